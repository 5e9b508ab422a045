//! The Kubernetes manifests of `deploy/` (SPEC §15): every object valid
//! against the Kubernetes schemas (`kubernetes-validate --strict`), the
//! objects agreeing with one another and with the configuration they mount,
//! and that configuration, with the Secret's variables, accepted by
//! `dial-host check-config` over a real S3-compatible store (moto) and a
//! real Redis.

use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

use crate::services;
use crate::support::Setup;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");
/// The uid the Containerfile runs as.
const IMAGE_UID: i64 = 65532;
/// The oldest and the newest Kubernetes the manifests are checked against
/// (the preStop `sleep` action is on by default from 1.30).
const KUBERNETES_VERSIONS: [&str; 2] = ["1.31.0", "1.37.0"];

fn manifest_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(DEPLOY)
        .expect("deploy/")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every object of every manifest.
fn objects() -> Vec<Yaml> {
    manifest_files()
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            YamlLoader::load_from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        })
        .collect()
}

fn the<'a>(objects: &'a [Yaml], kind: &str) -> &'a Yaml {
    let found: Vec<&Yaml> = objects.iter().filter(|object| object["kind"].as_str() == Some(kind)).collect();
    assert_eq!(found.len(), 1, "one {kind} in deploy/");
    found[0]
}

fn text(yaml: &Yaml) -> &str {
    yaml.as_str().unwrap_or_else(|| panic!("not a string: {yaml:?}"))
}

/// The Secret's variables, as the pod gets them (`envFrom`).
fn secret_variables(objects: &[Yaml]) -> Vec<(String, String)> {
    let data = the(objects, "Secret")["stringData"].as_hash().expect("the Secret's stringData");
    data.iter().map(|(key, value)| (text(key).to_string(), text(value).to_string())).collect()
}

/// The TOML the ConfigMap holds.
fn mounted_config(objects: &[Yaml]) -> String {
    text(&the(objects, "ConfigMap")["data"]["dial-host.toml"]).to_string()
}

#[test]
fn every_manifest_is_valid_against_the_kubernetes_schemas() {
    let Some(validate) = services::kubernetes_validate() else { return };
    let files = manifest_files();
    assert_eq!(files.len(), 5, "Deployment, Service, ConfigMap, Secret, PodDisruptionBudget: {files:?}");
    for version in KUBERNETES_VERSIONS {
        let output = Command::new(&validate)
            .args(["--strict", "--kubernetes-version", version])
            .args(&files)
            .output()
            .expect("run kubernetes-validate");
        let said = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "Kubernetes {version}: {said}");
        assert_eq!(said.matches(" passed for resource ").count(), 5, "Kubernetes {version}: {said}");
    }
}

#[test]
fn the_objects_agree_with_one_another_and_with_the_configuration() {
    let objects = objects();
    let deployment = the(&objects, "Deployment");
    let pod = &deployment["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    for (kind, selector) in [
        ("Deployment", &deployment["spec"]["selector"]["matchLabels"]),
        ("Service", &the(&objects, "Service")["spec"]["selector"]),
        ("PodDisruptionBudget", &the(&objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]),
    ] {
        for (key, value) in selector.as_hash().unwrap() {
            assert_eq!(&labels[text(key)], value, "the {kind} selects the pods");
        }
    }
    let containers = pod["spec"]["containers"].as_vec().unwrap();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    let port = container["ports"].as_vec().unwrap().iter().find(|port| port["name"].as_str() == Some("http")).unwrap();
    assert_eq!(the(&objects, "Service")["spec"]["ports"][0]["targetPort"].as_str(), Some("http"));
    for (probe, path) in [("startupProbe", "/health"), ("livenessProbe", "/health"), ("readinessProbe", "/ready")] {
        assert_eq!(container[probe]["httpGet"]["path"].as_str(), Some(path), "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"].as_str(), Some("http"), "{probe}");
    }

    // The configuration: mounted where DIAL_HOST_CONFIG points, listening on
    // the container's port, keeping its data on the data volume.
    let config: toml::Value = toml::from_str(&mounted_config(&objects)).expect("the ConfigMap's TOML");
    let config_path = container["env"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|var| var["name"].as_str() == Some("DIAL_HOST_CONFIG"))
        .map(|var| text(&var["value"]).to_string())
        .expect("DIAL_HOST_CONFIG");
    let mount = |volume: &str| {
        let mounts = container["volumeMounts"].as_vec().unwrap();
        let found = mounts.iter().find(|mount| mount["name"].as_str() == Some(volume)).unwrap();
        text(&found["mountPath"]).to_string()
    };
    assert_eq!(config_path, format!("{}/dial-host.toml", mount("config")));
    let volumes = pod["spec"]["volumes"].as_vec().unwrap();
    let config_volume = volumes.iter().find(|volume| volume["name"].as_str() == Some("config")).unwrap();
    assert_eq!(config_volume["configMap"]["name"], the(&objects, "ConfigMap")["metadata"]["name"]);
    assert_eq!(container["envFrom"][0]["secretRef"]["name"], the(&objects, "Secret")["metadata"]["name"]);
    let listen = config["server"]["listen"].as_str().unwrap();
    assert_eq!(listen.rsplit_once(':').unwrap().1.parse::<i64>().unwrap(), port["containerPort"].as_i64().unwrap());
    assert_eq!(config["data_dir"].as_str(), Some(mount("data").as_str()));
    assert!(config["storage"]["url"].as_str().unwrap().starts_with("s3://"), "S3-compatible storage");

    // A stop: the preStop pause, then requests in flight get
    // stop_timeout_seconds; the grace period outlasts both.
    let stop_timeout = config["server"]["stop_timeout_seconds"].as_integer().unwrap();
    let pause = container["lifecycle"]["preStop"]["sleep"]["seconds"].as_i64().unwrap();
    let grace = pod["spec"]["terminationGracePeriodSeconds"].as_i64().unwrap();
    assert!(grace > pause + stop_timeout, "terminationGracePeriodSeconds {grace} <= {pause} + {stop_timeout}");

    // Non-root as the image's uid, nothing writable but the volumes.
    let security = &pod["spec"]["securityContext"];
    assert_eq!(security["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(security["runAsUser"].as_i64(), Some(IMAGE_UID));
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(container["securityContext"]["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert!(
        !container["resources"]["requests"].is_badvalue() && !container["resources"]["limits"]["memory"].is_badvalue()
    );
    let containerfile = std::fs::read_to_string(Path::new(DEPLOY).join("../Containerfile")).unwrap();
    assert!(containerfile.contains(&format!("USER {IMAGE_UID}:{IMAGE_UID}")), "the image runs as {IMAGE_UID}");
}

#[test]
fn the_mounted_configuration_passes_check_config_over_s3_and_redis() {
    let Some(moto) = services::moto() else { return };
    let Some(redis) = services::redis() else { return };
    let objects = objects();
    let config: toml::Value = toml::from_str(&mounted_config(&objects)).unwrap();
    moto.create_bucket(config["storage"]["url"].as_str().unwrap().trim_start_matches("s3://"));
    let setup = Setup::new();
    let file = setup.config(&mounted_config(&objects));

    // The pod's variables, then where this test's services are: the S3
    // endpoint (the store the ConfigMap names, on moto) and Redis.
    let mut env = secret_variables(&objects);
    assert!(env.iter().any(|(key, _)| key == "DIAL_HOST_ENCRYPTION__SECRET"), "{env:?}");
    env.retain(|(key, _)| key != "DIAL_HOST_REDIS__URL");
    env.extend(
        [
            ("DIAL_HOST_REDIS__URL", redis.url.as_str()),
            ("AWS_ENDPOINT", moto.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .map(|(key, value)| (key.to_string(), value.to_string())),
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect();
    let (ok, stdout, stderr) = setup.run(&["check-config", "--config", file.to_str().unwrap()], &env);
    assert!(ok, "check-config refused the mounted configuration:\n{stdout}\n{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(stdout.contains("storage: s3://dial-host-resources"), "{stdout}");
    assert!(stdout.contains("  redis: "), "{stdout}");
    assert!(
        stdout.contains("traces: http://otel-collector.observability.svc.cluster.local:4318/v1/traces"),
        "{stdout}"
    );
}
