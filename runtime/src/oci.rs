//! Handler components from an OCI registry, pinned by digest
//! (`handlers.types.<group>.source = "oci://<registry>/<repo>@sha256:<hex>"`).
//!
//! The artifact is the Wasm OCI layout `wkg oci push` / `oci-wasm` publish:
//! an image manifest (`application/vnd.oci.image.manifest.v1+json`) whose
//! config has the media type `application/vnd.wasm.config.v0+json` and whose
//! one layer is the component (`application/wasm`).
//!
//! - [`OciReference::parse_pinned`]: the one accepted form; a tag, another
//!   algorithm or a malformed reference is refused with what to write.
//! - [`OciStore::fetch`]: the verified cache first (`<cache>/sha256-<hex>.wasm`
//!   beside its manifest, both checked against the digest on every read), else
//!   a pull bounded in time and bytes, verified against the manifest digest
//!   and the layer digest, then written to the cache atomically. A digest
//!   names immutable content, so a cached copy needs no registry.
//! - [`push`]: publishes a component in the same layout and returns its
//!   pinned reference.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Serialize;
use sha2::Digest as _;

/// The media type of the manifest's config blob.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the one layer, the component.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Manifests bigger than this are not a one-layer Wasm artifact.
const MAX_MANIFEST_BYTES: usize = 64 << 10;

/// `oci://<registry>/<repository>@sha256:<hex>`: a component pinned by its manifest's digest.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OciReference {
    pub registry: String,
    pub repository: String,
    /// 64 lowercase hex digits (the manifest's SHA-256).
    pub hex: String,
}

/// `oci://<registry>/<repository>:<tag>`: where `dial-host handler push` publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciTarget {
    pub registry: String,
    pub repository: String,
    pub tag: String,
}

/// Why a `source` is not a pinned `oci://` reference; the message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("'{0}' is not an oci:// reference; write oci://<registry>/<repository>@sha256:<digest>")]
    NotOci(String),
    #[error(
        "'{given}' names a tag, which can move: pin the digest instead, \
         oci://{registry}/{repository}@sha256:<digest> (`dial-host handler push` prints it)"
    )]
    Tag { given: String, registry: String, repository: String },
    #[error("'{given}' is pinned with '{algorithm}': only sha256 digests are accepted (…@sha256:<64 hex digits>)")]
    Algorithm { given: String, algorithm: String },
    #[error("'{given}' is malformed: {why}; write oci://<registry>/<repository>@sha256:<64 hex digits>")]
    Malformed { given: String, why: &'static str },
}

impl OciReference {
    /// Parses `oci://<registry>/<repository>@sha256:<hex>`, the only accepted form.
    pub fn parse_pinned(given: &str) -> Result<Self, ReferenceError> {
        let (registry, repository, pin) = split(given)?;
        let Pin::Digest(digest) = pin else {
            return Err(ReferenceError::Tag { given: given.into(), registry, repository });
        };
        let malformed = |why| ReferenceError::Malformed { given: given.into(), why };
        let (algorithm, hex) = digest.split_once(':').ok_or_else(|| malformed("the digest has no algorithm"))?;
        if algorithm != "sha256" {
            return Err(ReferenceError::Algorithm { given: given.into(), algorithm: algorithm.into() });
        }
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(malformed("a sha256 digest is 64 lowercase hex digits"));
        }
        Ok(Self { registry, repository, hex: hex.into() })
    }

    /// `sha256:<hex>`
    pub fn digest(&self) -> String {
        format!("sha256:{}", self.hex)
    }

    fn client_reference(&self) -> Reference {
        Reference::with_digest(self.registry.clone(), self.repository.clone(), self.digest())
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}@sha256:{}", self.registry, self.repository, self.hex)
    }
}

impl OciTarget {
    /// Parses `oci://<registry>/<repository>:<tag>` (the tag defaults to `latest`).
    pub fn parse(given: &str) -> Result<Self, ReferenceError> {
        match split(given)? {
            (registry, repository, Pin::Tag(tag)) => Ok(Self { registry, repository, tag }),
            (registry, repository, Pin::None) => Ok(Self { registry, repository, tag: "latest".into() }),
            (_, _, Pin::Digest(_)) => Err(ReferenceError::Malformed {
                given: given.into(),
                why: "a push names a tag (…:<tag>); the digest is what the push prints",
            }),
        }
    }
}

impl fmt::Display for OciTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}:{}", self.registry, self.repository, self.tag)
    }
}

enum Pin {
    None,
    Tag(String),
    Digest(String),
}

/// `oci://<registry>/<repository>[:<tag>][@<digest>]` into its parts (a digest wins over a tag).
fn split(given: &str) -> Result<(String, String, Pin), ReferenceError> {
    let malformed = |why| ReferenceError::Malformed { given: given.into(), why };
    let rest = given.strip_prefix("oci://").ok_or_else(|| ReferenceError::NotOci(given.into()))?;
    let (name, digest) = match rest.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (rest, None),
    };
    let (registry, path) = name.split_once('/').ok_or_else(|| malformed("no repository after the registry"))?;
    if registry.is_empty() || !registry.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b)) {
        return Err(malformed("the registry is a host name with an optional :port"));
    }
    let (repository, tag) = match path.rsplit_once(':') {
        Some((repository, tag)) => (repository, Some(tag)),
        None => (path, None),
    };
    let component_ok = |part: &str| {
        !part.is_empty()
            && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && part.as_bytes()[0].is_ascii_alphanumeric()
    };
    if !repository.split('/').all(component_ok) {
        return Err(malformed("a repository is lowercase letters, digits, '.', '_', '-' and '/'"));
    }
    if let Some(tag) = tag
        && (tag.is_empty() || tag.len() > 128 || !tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)))
    {
        return Err(malformed("a tag is up to 128 letters, digits, '.', '_' and '-'"));
    }
    let pin = match (digest, tag) {
        (Some(digest), _) => Pin::Digest(digest.into()),
        (None, Some(tag)) => Pin::Tag(tag.into()),
        (None, None) => Pin::None,
    };
    Ok((registry.into(), repository.into(), pin))
}

/// How pulls are bounded, and which registries speak plain HTTP.
#[derive(Debug, Clone)]
pub struct PullSettings {
    /// The whole pull (manifest and layer) must finish within this.
    pub timeout: Duration,
    /// A bigger layer is refused before and while it is read.
    pub max_bytes: u64,
    /// Registries (`host:port`) reached over plain HTTP besides the loopback ones.
    pub insecure_registries: Vec<String>,
}

/// Why a component could not be had; every message names the reference.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// Connection refused, a timeout, a 5xx: the registry is away.
    #[error("registry unreachable for {reference}: {detail}")]
    Unreachable { reference: String, detail: String },
    /// The registry answered, and what it gave is refused (missing, not a
    /// Wasm artifact, too big, or not what the digest pins).
    #[error("{reference}: {detail}")]
    Refused { reference: String, detail: String },
}

/// Where a fetched component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    Cache,
    Registry,
}

/// Pulls pinned components and keeps them on disk by digest.
#[derive(Debug, Clone)]
pub struct OciStore {
    /// `<handler cache>/oci`; `None`: no disk cache (every fetch pulls).
    dir: Option<PathBuf>,
    settings: PullSettings,
}

impl OciStore {
    pub fn new(dir: Option<PathBuf>, settings: PullSettings) -> Self {
        Self { dir, settings }
    }

    /// The file a pinned component is cached in.
    pub fn cached_path(&self, reference: &OciReference) -> Option<PathBuf> {
        self.dir.as_ref().map(|dir| dir.join(format!("sha256-{}.wasm", reference.hex)))
    }

    /// The component `reference` pins: from the cache when a verified copy is
    /// there, else from the registry (then cached).
    pub async fn fetch(&self, reference: &OciReference) -> Result<(Vec<u8>, Fetched), PullError> {
        if let Some(wasm) = self.read_cached(reference).await {
            return Ok((wasm, Fetched::Cache));
        }
        let pulled = tokio::time::timeout(self.settings.timeout, self.pull(reference)).await.map_err(|_| {
            PullError::Unreachable {
                reference: reference.to_string(),
                detail: format!("the pull did not finish within {:?}", self.settings.timeout),
            }
        })??;
        if let Err(error) = self.write_cached(reference, &pulled.0, &pulled.1).await {
            tracing::warn!(reference = %reference, %error, "could not cache a pulled handler component");
        }
        Ok((pulled.1, Fetched::Registry))
    }

    /// The cached manifest and component, verified against the digest; a
    /// damaged entry is removed and counts as a miss.
    async fn read_cached(&self, reference: &OciReference) -> Option<Vec<u8>> {
        let wasm_path = self.cached_path(reference)?;
        let manifest_path = wasm_path.with_extension("manifest.json");
        let (Ok(manifest), Ok(wasm)) = (tokio::fs::read(&manifest_path).await, tokio::fs::read(&wasm_path).await)
        else {
            return None;
        };
        match verify(reference, &manifest, self.settings.max_bytes)
            .and_then(|layer| check_layer(&layer, &wasm).map_err(|detail| refused(reference, detail)))
        {
            Ok(()) => Some(wasm),
            Err(error) => {
                tracing::warn!(reference = %reference, %error, "a cached handler component failed its check: pulling it again");
                let _ = tokio::fs::remove_file(&wasm_path).await;
                let _ = tokio::fs::remove_file(&manifest_path).await;
                None
            }
        }
    }

    /// The component first, then the manifest that vouches for it, each renamed into place.
    async fn write_cached(&self, reference: &OciReference, manifest: &[u8], wasm: &[u8]) -> std::io::Result<()> {
        let Some(wasm_path) = self.cached_path(reference) else { return Ok(()) };
        let dir = wasm_path.parent().expect("a cache file has a directory");
        tokio::fs::create_dir_all(dir).await?;
        write_atomically(&wasm_path, wasm).await?;
        write_atomically(&wasm_path.with_extension("manifest.json"), manifest).await
    }

    /// `(manifest bytes, component bytes)`, both verified.
    async fn pull(&self, reference: &OciReference) -> Result<(Vec<u8>, Vec<u8>), PullError> {
        let client = client_for(&reference.registry, &self.settings.insecure_registries, self.settings.timeout);
        let image = reference.client_reference();
        let (manifest, _) = client
            .pull_manifest_raw(&image, &RegistryAuth::Anonymous, &[OCI_IMAGE_MEDIA_TYPE])
            .await
            .map_err(|error| classify(reference, "the manifest", error))?;
        let layer = verify(reference, &manifest, self.settings.max_bytes)?;
        let mut stream =
            client.pull_blob_stream(&image, &layer).await.map_err(|error| classify(reference, "the layer", error))?;
        let mut wasm = Vec::with_capacity(layer.size.max(0) as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|error| {
                if error.get_ref().is_some_and(|inner| inner.is::<DigestError>()) {
                    refused(reference, format!("layer digest mismatch: {error}"))
                } else {
                    PullError::Unreachable {
                        reference: reference.to_string(),
                        detail: format!("reading the layer: {error}"),
                    }
                }
            })?;
            if (wasm.len() + chunk.len()) as u64 > self.settings.max_bytes {
                return Err(refused(reference, too_big(self.settings.max_bytes)));
            }
            wasm.extend_from_slice(&chunk);
        }
        check_layer(&layer, &wasm).map_err(|detail| refused(reference, detail))?;
        Ok((manifest.to_vec(), wasm))
    }
}

/// The manifest is the one the digest pins, and a one-layer Wasm artifact
/// within the size bound: its layer's descriptor.
fn verify(reference: &OciReference, manifest: &[u8], max_bytes: u64) -> Result<OciDescriptor, PullError> {
    let actual = sha256_hex(manifest);
    if actual != reference.hex {
        return Err(refused(reference, format!("digest mismatch: the registry's manifest is sha256:{actual}")));
    }
    if manifest.len() > MAX_MANIFEST_BYTES {
        return Err(refused(reference, format!("the manifest is over {MAX_MANIFEST_BYTES} bytes")));
    }
    let parsed: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|error| refused(reference, format!("not an OCI image manifest: {error}")))?;
    if parsed.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(refused(
            reference,
            format!("not a Wasm artifact: its config is '{}', not {CONFIG_MEDIA_TYPE}", parsed.config.media_type),
        ));
    }
    let [layer] = parsed.layers.as_slice() else {
        return Err(refused(reference, format!("a Wasm artifact has one layer, this has {}", parsed.layers.len())));
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(refused(reference, format!("its layer is '{}', not {LAYER_MEDIA_TYPE}", layer.media_type)));
    }
    if layer.size < 0 || layer.size as u64 > max_bytes {
        return Err(refused(reference, too_big(max_bytes)));
    }
    Ok(layer.clone())
}

fn check_layer(layer: &OciDescriptor, wasm: &[u8]) -> Result<(), String> {
    let actual = format!("sha256:{}", sha256_hex(wasm));
    if actual != layer.digest || wasm.len() as i64 != layer.size {
        return Err(format!("layer digest mismatch: the manifest names {}, the bytes are {actual}", layer.digest));
    }
    Ok(())
}

fn too_big(max_bytes: u64) -> String {
    format!("the component is over handlers.oci_max_mib ({} MiB)", max_bytes >> 20)
}

fn refused(reference: &OciReference, detail: String) -> PullError {
    PullError::Refused { reference: reference.to_string(), detail }
}

/// A registry that did not answer, or answered 5xx, is away; anything else it said is a refusal.
fn classify(reference: &OciReference, what: &str, error: OciDistributionError) -> PullError {
    let away = match &error {
        OciDistributionError::RequestError(_) | OciDistributionError::IoError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code >= 500 || *code == 429,
        _ => false,
    };
    let detail = match &error {
        OciDistributionError::DigestError(_) => format!("digest mismatch fetching {what}: {error}"),
        _ => format!("fetching {what}: {error}"),
    };
    if away { PullError::Unreachable { reference: reference.to_string(), detail } } else { refused(reference, detail) }
}

/// Whether a registry host is on this machine (plain HTTP allowed).
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => registry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A client speaking HTTPS, or plain HTTP to a loopback or listed registry.
fn client_for(registry: &str, insecure: &[String], timeout: Duration) -> Client {
    let plain = is_loopback(registry) || insecure.iter().any(|listed| listed == registry);
    Client::new(ClientConfig {
        protocol: if plain { ClientProtocol::Http } else { ClientProtocol::Https },
        platform_resolver: None,
        connect_timeout: Some(timeout),
        read_timeout: Some(timeout),
        ..ClientConfig::default()
    })
}

/// SHA-256, lowercase hex (digests here are `sha256:<this>`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

async fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("tmp-{}-{:?}", std::process::id(), std::thread::current().id()));
    tokio::fs::write(&temporary, bytes).await?;
    match tokio::fs::rename(&temporary, path).await {
        Ok(()) => Ok(()),
        Err(error) => {
            let _ = tokio::fs::remove_file(&temporary).await;
            Err(error)
        }
    }
}

/// The config blob `wkg`/`oci-wasm` write for a component.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig<'a> {
    created: &'a str,
    author: Option<&'a str>,
    architecture: &'static str,
    os: &'static str,
    layer_digests: Vec<String>,
    component: ComponentInfo<'a>,
}

#[derive(Serialize)]
struct ComponentInfo<'a> {
    exports: &'a [String],
    imports: &'a [String],
    target: Option<&'a str>,
}

/// What [`push`] publishes besides the bytes.
pub struct PushInput<'a> {
    pub wasm: &'a [u8],
    /// RFC 3339 time of the push.
    pub created: &'a str,
    pub imports: &'a [String],
    pub exports: &'a [String],
    /// Registries reached over plain HTTP besides the loopback ones.
    pub insecure_registries: &'a [String],
    pub timeout: Duration,
}

/// Publishes a component at `target` in the Wasm OCI layout; returns the pinned reference.
pub async fn push(target: &OciTarget, input: PushInput<'_>) -> Result<OciReference, OciDistributionError> {
    let client = client_for(&target.registry, input.insecure_registries, input.timeout);
    let image = Reference::with_tag(target.registry.clone(), target.repository.clone(), target.tag.clone());
    let layer_digest = format!("sha256:{}", sha256_hex(input.wasm));
    let config = serde_json::to_vec(&WasmConfig {
        created: input.created,
        author: None,
        architecture: "wasm",
        os: "wasip2",
        layer_digests: vec![layer_digest.clone()],
        component: ComponentInfo { exports: input.exports, imports: input.imports, target: None },
    })?;
    let config_digest = format!("sha256:{}", sha256_hex(&config));
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config: OciDescriptor {
            media_type: CONFIG_MEDIA_TYPE.into(),
            digest: config_digest.clone(),
            size: config.len() as i64,
            ..Default::default()
        },
        layers: vec![OciDescriptor {
            media_type: LAYER_MEDIA_TYPE.into(),
            digest: layer_digest.clone(),
            size: input.wasm.len() as i64,
            ..Default::default()
        }],
        ..Default::default()
    };
    let manifest = serde_json::to_vec(&manifest)?;
    client.store_auth_if_needed(image.resolve_registry(), &RegistryAuth::Anonymous).await;
    client.push_blob(&image, input.wasm.to_vec(), &layer_digest).await?;
    client.push_blob(&image, config, &config_digest).await?;
    let content_type = OCI_IMAGE_MEDIA_TYPE.parse().expect("a valid header value");
    client.push_manifest_raw(&image, manifest.clone(), content_type).await?;
    Ok(OciReference {
        registry: target.registry.clone(),
        repository: target.repository.clone(),
        hex: sha256_hex(&manifest),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_pinned_reference_parses_and_prints_back() {
        let given = format!("oci://127.0.0.1:5000/handlers/prompts@sha256:{HEX}");
        let reference = OciReference::parse_pinned(&given).unwrap();
        assert_eq!(
            (reference.registry.as_str(), reference.repository.as_str()),
            ("127.0.0.1:5000", "handlers/prompts")
        );
        assert_eq!(reference.to_string(), given);
        // A tag beside the digest is allowed and ignored: the digest decides.
        let tagged = OciReference::parse_pinned(&format!("oci://ghcr.io/acme/prompts:1.0@sha256:{HEX}")).unwrap();
        assert_eq!(tagged.repository, "acme/prompts");
    }

    #[test]
    fn anything_but_a_sha256_pin_is_refused_with_what_to_write() {
        let tag = OciReference::parse_pinned("oci://ghcr.io/acme/prompts:1.0").unwrap_err().to_string();
        assert!(tag.contains("names a tag") && tag.contains("oci://ghcr.io/acme/prompts@sha256:<digest>"), "{tag}");
        let bare = OciReference::parse_pinned("oci://ghcr.io/acme/prompts").unwrap_err().to_string();
        assert!(bare.contains("names a tag"), "{bare}");
        let sha512 = OciReference::parse_pinned("oci://ghcr.io/acme/p@sha512:abcd").unwrap_err().to_string();
        assert!(sha512.contains("only sha256"), "{sha512}");
        let short = OciReference::parse_pinned("oci://ghcr.io/acme/p@sha256:abcd").unwrap_err().to_string();
        assert!(short.contains("64 lowercase hex digits"), "{short}");
        let upper = OciReference::parse_pinned(&format!("oci://r/p@sha256:{}", HEX.to_uppercase())).unwrap_err();
        assert!(upper.to_string().contains("lowercase"));
        assert!(matches!(OciReference::parse_pinned("https://r/p"), Err(ReferenceError::NotOci(_))));
        for bad in ["oci://registry-only", "oci:///p@sha256:x", "oci://r/Upper@sha256:x", "oci://r/p:@sha256:x"] {
            assert!(
                matches!(OciReference::parse_pinned(bad), Err(ReferenceError::Malformed { .. })),
                "{bad}: {:?}",
                OciReference::parse_pinned(bad)
            );
        }
    }

    #[test]
    fn a_push_target_names_a_tag() {
        let target = OciTarget::parse("oci://localhost:5000/prompts:v2").unwrap();
        assert_eq!((target.repository.as_str(), target.tag.as_str()), ("prompts", "v2"));
        assert_eq!(OciTarget::parse("oci://localhost:5000/prompts").unwrap().tag, "latest");
        assert!(OciTarget::parse(&format!("oci://r/p@sha256:{HEX}")).is_err());
    }

    #[test]
    fn plain_http_only_for_loopback_registries() {
        for local in ["localhost:5000", "127.0.0.1:5000", "127.0.0.2", "[::1]:5000", "localhost"] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in ["ghcr.io", "10.0.0.1:5000", "localhost.example.com", "evil-localhost:5000"] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    #[test]
    fn a_manifest_is_checked_against_the_pin_and_the_layout() {
        let manifest = |config: &str, layers: &str| {
            format!(
                r#"{{"schemaVersion":2,"mediaType":"{OCI_IMAGE_MEDIA_TYPE}","config":{{"mediaType":"{config}","digest":"sha256:{HEX}","size":2}},"layers":[{layers}]}}"#
            )
        };
        let layer = format!(r#"{{"mediaType":"application/wasm","digest":"sha256:{HEX}","size":10}}"#);
        let pin = |bytes: &str| OciReference {
            registry: "r".into(),
            repository: "p".into(),
            hex: sha256_hex(bytes.as_bytes()),
        };
        let good = manifest(CONFIG_MEDIA_TYPE, &layer);
        assert_eq!(verify(&pin(&good), good.as_bytes(), 1 << 20).unwrap().size, 10);
        let other = OciReference { hex: HEX.into(), ..pin(&good) };
        assert!(verify(&other, good.as_bytes(), 1 << 20).unwrap_err().to_string().contains("digest mismatch"));
        assert!(verify(&pin(&good), good.as_bytes(), 5).unwrap_err().to_string().contains("over handlers.oci_max_mib"));
        let image = manifest("application/vnd.oci.image.config.v1+json", &layer);
        assert!(
            verify(&pin(&image), image.as_bytes(), 1 << 20).unwrap_err().to_string().contains("not a Wasm artifact")
        );
        let two = manifest(CONFIG_MEDIA_TYPE, &format!("{layer},{layer}"));
        assert!(verify(&pin(&two), two.as_bytes(), 1 << 20).unwrap_err().to_string().contains("has 2"));
        let wasm = b"\0asm";
        let descriptor =
            OciDescriptor { digest: format!("sha256:{}", sha256_hex(wasm)), size: 4, ..Default::default() };
        assert!(check_layer(&descriptor, wasm).is_ok());
        assert!(check_layer(&descriptor, b"\0asn").unwrap_err().contains("layer digest mismatch"));
    }

    #[tokio::test]
    async fn a_cached_copy_serves_without_the_registry_and_a_damaged_one_is_dropped() {
        let dir = std::env::temp_dir().join(format!("dial-oci-cache-test-{}", std::process::id()));
        let wasm = b"\0asm\x0d\0\x01\0".to_vec();
        let manifest = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"{CONFIG_MEDIA_TYPE}","digest":"sha256:{HEX}","size":2}},"layers":[{{"mediaType":"application/wasm","digest":"sha256:{}","size":{}}}]}}"#,
            sha256_hex(&wasm),
            wasm.len()
        );
        // Port 1 on loopback: nothing listens, every pull is refused at once.
        let reference = OciReference {
            registry: "127.0.0.1:1".into(),
            repository: "p".into(),
            hex: sha256_hex(manifest.as_bytes()),
        };
        let settings =
            PullSettings { timeout: Duration::from_secs(5), max_bytes: 1 << 20, insecure_registries: vec![] };
        let store = OciStore::new(Some(dir.clone()), settings);
        store.write_cached(&reference, manifest.as_bytes(), &wasm).await.unwrap();
        assert_eq!(store.fetch(&reference).await.unwrap(), (wasm.clone(), Fetched::Cache));

        let cached = store.cached_path(&reference).unwrap();
        std::fs::write(&cached, b"\0asm\x0d\0\x01\x01").unwrap();
        let error = store.fetch(&reference).await.unwrap_err();
        assert!(matches!(error, PullError::Unreachable { .. }), "{error}");
        assert!(!cached.exists(), "a copy that fails its check is removed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
