//! Real services for tests: each runs as a child process on a free loopback port and is killed on drop:
//! moto (S3), Azurite (Azure Blob), `redis-server` alone, as a three-primary cluster, or as a primary and a
//! replica watched by three sentinels, and an OCI registry (Debian's `docker-registry`).
//!
//! Include it from a test crate under `host/tests/` with
//! `#[path = "../../tests/services.rs"] mod services;`. `scripts/test` installs the services.
//!
//! A missing service makes its constructor return `None` after a note, so a newcomer's `cargo test` still
//! passes; under `CI=true` it panics instead, because CI must never go green by skipping.

#![allow(dead_code)] // each test crate uses its own part

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace root, where `scripts/test` puts `.venv-moto` and `.azurite`.
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// How long a service may take to answer after it is started (moto imports a lot of Python).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A moto S3 server. Buckets live in its memory: create a fresh one per test.
pub struct Moto {
    /// `http://127.0.0.1:<port>`
    pub endpoint: String,
    process: Service,
}

/// Starts moto from `$DIAL_TEST_MOTO_SERVER`, else from `<workspace>/.venv-moto/bin/moto_server`.
pub fn moto() -> Option<Moto> {
    let binary = match std::env::var_os("DIAL_TEST_MOTO_SERVER") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "DIAL_TEST_MOTO_SERVER={} does not exist", path.display());
            path
        }
        None => Path::new(WORKSPACE).join(".venv-moto/bin/moto_server"),
    };
    if !binary.is_file() {
        return missing(
            "moto (S3)",
            "run scripts/test, which creates .venv-moto, or: python3 -m venv .venv-moto && \
             .venv-moto/bin/pip install 'moto[s3]==5.2.5' flask flask-cors (or set DIAL_TEST_MOTO_SERVER)",
        );
    }
    let process = Service::start(
        "moto",
        |port| {
            let mut command = Command::new(&binary);
            command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
            command
        },
        http_answers,
    );
    Some(Moto { endpoint: format!("http://127.0.0.1:{}", process.port), process })
}

impl Moto {
    /// Creates a bucket. moto accepts an unsigned `PUT /<bucket>` for this (not for object writes).
    pub fn create_bucket(&self, name: &str) {
        let response = http_request(self.process.port, &format!("PUT /{name} HTTP/1.1"))
            .unwrap_or_else(|error| panic!("creating bucket {name} on moto: {error}"));
        assert!(response.starts_with("HTTP/1.1 200"), "creating bucket {name} on moto: {response}");
    }

    /// `storage.options` for an `s3://<bucket>` store on this server.
    pub fn storage_options(&self) -> BTreeMap<String, String> {
        [
            ("endpoint", self.endpoint.as_str()),
            ("region", "us-east-1"),
            ("access_key_id", "test"),
            ("secret_access_key", "test"),
            ("allow_http", "true"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
    }

    /// Kills the server now; clients see connection errors from here on.
    pub fn stop(&mut self) {
        self.process.stop();
    }
}

/// An Azurite Blob server (Azure's emulator), in memory. Containers live in its memory: create a fresh one
/// per test.
pub struct Azurite {
    /// `http://127.0.0.1:<port>/devstoreaccount1`
    pub endpoint: String,
    process: Service,
}

/// Azurite's one account and its published key (the emulator's documented default credentials).
const AZURITE_ACCOUNT: &str = "devstoreaccount1";
const AZURITE_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Starts Azurite from `$DIAL_TEST_AZURITE`, else from `<workspace>/.azurite/node_modules/.bin/azurite-blob`.
pub fn azurite() -> Option<Azurite> {
    let binary = match std::env::var_os("DIAL_TEST_AZURITE") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "DIAL_TEST_AZURITE={} does not exist", path.display());
            path
        }
        None => Path::new(WORKSPACE).join(".azurite/node_modules/.bin/azurite-blob"),
    };
    if !binary.is_file() {
        return missing(
            "Azurite (Azure Blob)",
            "run scripts/test, which installs it into .azurite, or: npm install --prefix .azurite azurite@3.37.0 \
             (or set DIAL_TEST_AZURITE)",
        );
    }
    let process = Service::start(
        "azurite",
        |port| {
            let mut command = Command::new(&binary);
            command.args([
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                &port.to_string(),
                "--inMemoryPersistence",
                "--disableTelemetry",
                "--skipApiVersionCheck",
                "--silent",
            ]);
            command
        },
        http_answers,
    );
    Some(Azurite { endpoint: format!("http://127.0.0.1:{}/{AZURITE_ACCOUNT}", process.port), process })
}

impl Azurite {
    /// Creates a container (object_store cannot): a Create Container request signed with the account key.
    pub fn create_container(&self, name: &str) {
        use base64::Engine as _;
        use hmac::Mac as _;
        let date = httpdate_now();
        let version = "2021-08-06";
        // Shared Key: verb, eleven empty standard headers (Content-Length is empty when zero), the x-ms-*
        // headers, then the resource (path-style: the account name, then the URL path, which repeats it).
        let to_sign = format!(
            "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n\
             /{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{name}\nrestype:container"
        );
        let key = base64::engine::general_purpose::STANDARD.decode(AZURITE_KEY).expect("the emulator key is base64");
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::KeyInit>::new_from_slice(&key).expect("any key length");
        mac.update(to_sign.as_bytes());
        let signature = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        let request = format!(
            "PUT /{AZURITE_ACCOUNT}/{name}?restype=container HTTP/1.1\r\nx-ms-date: {date}\r\n\
             x-ms-version: {version}\r\nAuthorization: SharedKey {AZURITE_ACCOUNT}:{signature}"
        );
        let response = http_request(self.process.port, &request)
            .unwrap_or_else(|error| panic!("creating container {name} on Azurite: {error}"));
        assert!(response.starts_with("HTTP/1.1 201"), "creating container {name} on Azurite: {response}");
    }

    /// `storage.options` for an `az://<container>` store on this server. The endpoint (path-style, with the
    /// account) is given instead of `use_emulator`, whose address comes from a process-wide variable.
    pub fn storage_options(&self) -> BTreeMap<String, String> {
        [
            ("account_name", AZURITE_ACCOUNT),
            ("access_key", AZURITE_KEY),
            ("endpoint", self.endpoint.as_str()),
            ("allow_http", "true"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
    }

    /// Kills the server now; clients see connection errors from here on.
    pub fn stop(&mut self) {
        self.process.stop();
    }
}

/// The current time as an HTTP date (`Tue, 01 Dec 2026 16:07:02 GMT`), for a signed request.
fn httpdate_now() -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let days = secs / 86_400;
    let (h, m, s) = ((secs % 86_400) / 3600, (secs % 3600) / 60, secs % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{}, {day:02} {} {year} {h:02}:{m:02}:{s:02} GMT", DAYS[(days % 7) as usize], MONTHS[(month - 1) as usize])
}

/// A cloud store emulator: what a storage test needs of either, so one suite runs on both.
pub enum Emulator {
    S3(Moto),
    Azure(Azurite),
}

/// The cloud backends the tests run on (GCS has no usable emulator: docs/operations.md).
pub const EMULATED: [&str; 2] = ["s3", "azure"];

/// Starts the emulator of `backend` (`"s3"` or `"azure"`), or `None` after a note when it is missing
/// (a panic under `CI=true`).
pub fn emulator(backend: &str) -> Option<Emulator> {
    match backend {
        "s3" => moto().map(Emulator::S3),
        "azure" => azurite().map(Emulator::Azure),
        other => panic!("no emulator for backend {other:?}"),
    }
}

impl Emulator {
    pub fn name(&self) -> &'static str {
        match self {
            Self::S3(_) => "s3",
            Self::Azure(_) => "azure",
        }
    }

    /// Creates a bucket (S3) or container (Azure).
    pub fn create(&self, bucket: &str) {
        match self {
            Self::S3(moto) => moto.create_bucket(bucket),
            Self::Azure(azurite) => azurite.create_container(bucket),
        }
    }

    /// The `storage.url` of a bucket or container, with an optional `/prefix`.
    pub fn url(&self, bucket: &str) -> String {
        match self {
            Self::S3(_) => format!("s3://{bucket}"),
            Self::Azure(_) => format!("az://{bucket}"),
        }
    }

    pub fn storage_options(&self) -> BTreeMap<String, String> {
        match self {
            Self::S3(moto) => moto.storage_options(),
            Self::Azure(azurite) => azurite.storage_options(),
        }
    }

    /// A config's `[storage]` table for `bucket` on this emulator.
    pub fn storage_toml(&self, bucket: &str) -> String {
        let options: String = self.storage_options().iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();
        format!("[storage]\nurl = \"{}\"\n[storage.options]\n{options}", self.url(bucket))
    }

    /// Kills the server now.
    pub fn stop(&mut self) {
        match self {
            Self::S3(moto) => moto.stop(),
            Self::Azure(azurite) => azurite.stop(),
        }
    }
}

/// An OCI registry (Debian's `docker-registry`, the CNCF distribution server) on loopback, storing in a
/// directory of its own (removed on drop). Plain HTTP, no authentication.
pub struct OciRegistry {
    /// `127.0.0.1:<port>`, as an `oci://` reference names the registry.
    pub address: String,
    dir: PathBuf,
    process: Service,
}

/// Starts `/usr/bin/docker-registry serve`, else the one on `PATH`.
pub fn oci_registry() -> Option<OciRegistry> {
    let binary = Some(PathBuf::from("/usr/bin/docker-registry"))
        .filter(|path| path.is_file())
        .or_else(|| find_on_path("docker-registry"));
    let Some(binary) = binary else {
        return missing(
            "docker-registry (an OCI registry)",
            "run scripts/test, or: apt-get install -y docker-registry",
        );
    };
    let dir = std::env::temp_dir().join(format!("dial-test-oci-registry-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).expect("creating the registry's directory");
    let config = dir.join("config.yml");
    let storage = dir.join("storage");
    let process = Service::start(
        "docker-registry",
        |port| {
            let body = format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    \
                 enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                storage.display()
            );
            std::fs::write(&config, body).expect("writing the registry's configuration");
            let mut command = Command::new(&binary);
            command.arg("serve").arg(&config);
            command
        },
        http_answers,
    );
    Some(OciRegistry { address: format!("127.0.0.1:{}", process.port), dir, process })
}

impl OciRegistry {
    /// Where the registry keeps the blob (or manifest) with this SHA-256, to damage it on purpose.
    pub fn blob_path(&self, sha256_hex: &str) -> PathBuf {
        self.dir.join(format!("storage/docker/registry/v2/blobs/sha256/{}/{sha256_hex}/data", &sha256_hex[..2]))
    }

    /// Kills the registry now; clients see connection refused from here on.
    pub fn stop(&mut self) {
        self.process.stop();
    }
}

impl Drop for OciRegistry {
    fn drop(&mut self) {
        self.process.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A throwaway redis-server: no persistence, loopback only.
pub struct Redis {
    /// `redis://127.0.0.1:<port>`
    pub url: String,
    process: Service,
    binary: PathBuf,
}

/// Starts `/usr/bin/redis-server`, else the one on `PATH`.
pub fn redis() -> Option<Redis> {
    let binary = redis_binary()?;
    let process = Service::start("redis", |port| redis_command(&binary, port), redis_answers);
    Some(Redis { url: format!("redis://127.0.0.1:{}", process.port), process, binary })
}

fn redis_command(binary: &std::path::Path, port: u16) -> Command {
    let mut command = Command::new(binary);
    command.args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]);
    // A replica still writes the snapshot its primary sends (`dump.rdb`):
    // into a directory of its own, never the test's working directory.
    let dir = std::env::temp_dir().join(format!("dial-host-redis-{port}"));
    std::fs::create_dir_all(&dir).expect("a directory for redis-server");
    command.arg("--dir").arg(dir);
    command
}

impl Redis {
    /// Kills the server now; clients see connection errors from here on.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Starts a fresh (empty) server on the same port, as after an outage.
    #[allow(dead_code)] // not every test binary that includes this module restarts Redis
    pub fn restart(&mut self) {
        self.process.stop();
        let port = self.process.port;
        self.process.respawn(redis_command(&self.binary, port), redis_answers);
    }
}

/// Finds `redis-server` (and says how to install it when missing).
fn redis_binary() -> Option<PathBuf> {
    let binary = Some(PathBuf::from("/usr/bin/redis-server"))
        .filter(|path| path.is_file())
        .or_else(|| find_on_path("redis-server"));
    if binary.is_none() {
        return missing("redis-server", "run scripts/test, or: apt-get install -y redis-server");
    }
    binary
}

/// Runs `redis-cli -p <port> <args>` and returns its output (RESP3 off: plain text).
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let cli = Some(PathBuf::from("/usr/bin/redis-cli"))
        .filter(|path| path.is_file())
        .or_else(|| find_on_path("redis-cli"))
        .expect("redis-cli (package redis-tools, installed with redis-server)");
    let output = Command::new(cli)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// Polls `done` every 50 ms until it holds or `within` passes (then panics naming `what`).
fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Redis Cluster of three primaries (no replicas) on loopback, made with `cluster-enabled yes` and
/// `redis-cli --cluster create`. A node can be killed and restarted on its port with its slots.
pub struct RedisCluster {
    /// `redis://127.0.0.1:<port>` of every node.
    pub nodes: Vec<String>,
    ports: Vec<u16>,
    processes: Vec<Service>,
    binary: PathBuf,
    dir: PathBuf,
}

pub fn redis_cluster() -> Option<RedisCluster> {
    let binary = redis_binary()?;
    let dir = std::env::temp_dir().join(format!("dial-test-cluster-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).expect("a directory for the cluster's node files");
    let processes: Vec<Service> = (0..3)
        .map(|_| {
            Service::start_on(cluster_port, "redis-cluster", |port| cluster_node(&binary, &dir, port), redis_answers)
        })
        .collect();
    let ports: Vec<u16> = processes.iter().map(|process| process.port).collect();
    let addresses: Vec<String> = ports.iter().map(|port| format!("127.0.0.1:{port}")).collect();
    let mut create = vec!["--cluster", "create"];
    create.extend(addresses.iter().map(String::as_str));
    create.extend(["--cluster-replicas", "0", "--cluster-yes"]);
    let made = redis_cli(ports[0], &create);
    assert!(made.contains("[OK] All 16384 slots covered"), "redis-cli --cluster create: {made}");
    let cluster = RedisCluster {
        nodes: ports.iter().map(|port| format!("redis://127.0.0.1:{port}")).collect(),
        ports,
        processes,
        binary,
        dir,
    };
    cluster.wait_until_ok();
    Some(cluster)
}

/// A port whose cluster bus port (+10000) is a valid port too.
fn cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

fn cluster_node(binary: &Path, dir: &Path, port: u16) -> Command {
    let mut command = redis_command(binary, port);
    let config = dir.join(format!("nodes-{port}.conf"));
    command.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"]);
    command.arg("--cluster-config-file").arg(config);
    // A cluster that lost a primary keeps serving the slots of the others.
    command.args(["--cluster-require-full-coverage", "no"]);
    command
}

impl RedisCluster {
    /// Waits until every running node reports `cluster_state:ok`.
    pub fn wait_until_ok(&self) {
        for (index, port) in self.ports.iter().enumerate() {
            if self.processes[index].child.is_some() {
                wait_for("the cluster to be ok", Duration::from_secs(30), || {
                    redis_cli(*port, &["cluster", "info"]).contains("cluster_state:ok")
                });
            }
        }
    }

    /// The hash slot of `key` (`redis-cli --cluster create` gives the first node slots 0–5460).
    pub fn slot_of(&self, key: &str) -> u16 {
        let port = self.ports.iter().zip(&self.processes).find(|(_, p)| p.child.is_some()).expect("a live node").0;
        let reply = redis_cli(*port, &["cluster", "keyslot", key]);
        reply.trim().parse().unwrap_or_else(|_| panic!("cluster keyslot {key}: {reply}"))
    }

    /// Kills node `index` (a primary: its slots are unserved until it returns).
    pub fn kill(&mut self, index: usize) {
        self.processes[index].stop();
    }

    /// Starts node `index` again on its port with its node file (same id, same slots).
    pub fn restart(&mut self, index: usize) {
        let port = self.ports[index];
        self.processes[index].respawn(cluster_node(&self.binary, &self.dir, port), redis_answers);
        self.wait_until_ok();
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for process in &mut self.processes {
            process.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A primary and a replica watched by three sentinels (quorum 2, a primary is down after 1 s).
pub struct RedisSentinel {
    /// `redis://127.0.0.1:<port>` of every sentinel.
    pub sentinels: Vec<String>,
    /// The name the sentinels know the primary by.
    pub master_name: &'static str,
    primary: Service,
    replica: Service,
    sentinel_processes: Vec<Service>,
    dir: PathBuf,
}

pub fn redis_sentinel() -> Option<RedisSentinel> {
    let binary = redis_binary()?;
    let master_name = "dialprimary";
    let dir = std::env::temp_dir().join(format!("dial-test-sentinel-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).expect("a directory for the sentinels' files");
    let primary = Service::start("redis-primary", |port| redis_command(&binary, port), redis_answers);
    let primary_port = primary.port;
    let replica = Service::start(
        "redis-replica",
        |port| {
            let mut command = redis_command(&binary, port);
            command.args(["--replicaof", "127.0.0.1", &primary_port.to_string()]);
            command
        },
        redis_answers,
    );
    wait_for("the replica to sync", Duration::from_secs(30), || {
        redis_cli(replica.port, &["info", "replication"]).contains("master_link_status:up")
    });
    let sentinel_processes: Vec<Service> = (0..3)
        .map(|_| {
            Service::start(
                "redis-sentinel",
                |port| {
                    // A sentinel rewrites its file: one per sentinel.
                    let file = dir.join(format!("sentinel-{port}.conf"));
                    std::fs::write(
                        &file,
                        format!(
                            "port {port}\nbind 127.0.0.1\nsentinel monitor {master_name} 127.0.0.1 {primary_port} 2\n\
                             sentinel down-after-milliseconds {master_name} 1000\n\
                             sentinel failover-timeout {master_name} 3000\n"
                        ),
                    )
                    .expect("writing a sentinel's config");
                    let mut command = Command::new(&binary);
                    command.arg(&file).arg("--sentinel");
                    command
                },
                redis_answers,
            )
        })
        .collect();
    let sentinel = RedisSentinel {
        sentinels: sentinel_processes.iter().map(|s| format!("redis://127.0.0.1:{}", s.port)).collect(),
        master_name,
        primary,
        replica,
        sentinel_processes,
        dir,
    };
    // Failover needs the sentinels to know each other (they announce themselves every 2 s).
    for process in &sentinel.sentinel_processes {
        wait_for("the sentinels to reach quorum", Duration::from_secs(30), || {
            redis_cli(process.port, &["sentinel", "ckquorum", master_name]).contains("3 usable Sentinels")
        });
    }
    Some(sentinel)
}

impl RedisSentinel {
    /// The port the sentinels name as the primary now.
    pub fn primary_port(&self) -> u16 {
        let reply =
            redis_cli(self.sentinel_processes[0].port, &["sentinel", "get-master-addr-by-name", self.master_name]);
        reply.lines().nth(1).and_then(|port| port.trim().parse().ok()).unwrap_or_else(|| panic!("no primary: {reply}"))
    }

    /// SIGKILLs the primary and waits until the sentinels have promoted the replica.
    pub fn fail_over(&mut self) {
        let old = self.primary.port;
        self.primary.stop();
        wait_for("the sentinels to promote the replica", Duration::from_secs(30), || {
            self.sentinel_processes.iter().all(|s| {
                let reply = redis_cli(s.port, &["sentinel", "get-master-addr-by-name", self.master_name]);
                reply.lines().nth(1).is_some_and(|port| port.trim() == self.replica.port.to_string())
            })
        });
        wait_for("the promoted replica to take writes", Duration::from_secs(30), || {
            redis_cli(self.replica.port, &["info", "replication"]).contains("role:master")
        });
        assert_ne!(self.primary_port(), old);
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for process in &mut self.sentinel_processes {
            process.stop();
        }
        self.replica.stop();
        self.primary.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Debian's `chromedriver` (package `chromium-driver`) on a free port, driving Debian's `chromium`
/// (package `chromium`): the browser tests' WebDriver. Nothing downloads a browser build.
pub struct ChromeDriver {
    /// `http://127.0.0.1:<port>`, the WebDriver endpoint.
    pub url: String,
    /// The Chromium binary sessions start.
    pub chromium: PathBuf,
    _process: Service,
}

pub fn chromedriver() -> Option<ChromeDriver> {
    let (Some(driver), Some(chromium)) = (find_on_path("chromedriver"), find_on_path("chromium")) else {
        return missing(
            "chromium and chromedriver",
            "run scripts/test, which installs them, or: apt-get install chromium chromium-driver",
        );
    };
    let process = Service::start(
        "chromedriver",
        |port| {
            let mut command = Command::new(&driver);
            command.args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()]);
            command
        },
        http_answers,
    );
    Some(ChromeDriver { url: format!("http://127.0.0.1:{}", process.port), chromium, _process: process })
}

/// `kubernetes-validate` (PyPI), which checks manifests against the Kubernetes schemas it carries, from
/// `<workspace>/.venv-deploy`.
pub fn kubernetes_validate() -> Option<PathBuf> {
    let binary = Path::new(WORKSPACE).join(".venv-deploy/bin/kubernetes-validate");
    if binary.is_file() {
        return Some(binary);
    }
    missing(
        "kubernetes-validate",
        "run scripts/test, which creates .venv-deploy, or: python3 -m venv .venv-deploy && \
         .venv-deploy/bin/pip install -r tests/requirements-deploy.txt",
    )
}

/// `None` with a note, or under `CI=true` a panic: CI must fail rather than skip.
fn missing<T>(service: &str, install: &str) -> Option<T> {
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("{service} is not installed, and CI=true forbids skipping its tests. Install it: {install}");
    }
    eprintln!("note: {service} is not installed; skipping this test. To run it: {install}");
    None
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|path| path.is_file())
}

/// A child process serving on a loopback port, its output in a log file; killed (and the log removed) on drop.
struct Service {
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl Service {
    /// Starts the service on a free port and waits until `answers(port)`. A port can be taken between
    /// choosing and binding it, so a start whose process exits early is retried on another port.
    fn start(name: &'static str, command: impl Fn(u16) -> Command, answers: fn(u16) -> bool) -> Self {
        Self::start_on(free_port, name, command, answers)
    }

    /// [`Service::start`] on a port `port()` picks.
    fn start_on(
        port: fn() -> u16,
        name: &'static str,
        command: impl Fn(u16) -> Command,
        answers: fn(u16) -> bool,
    ) -> Self {
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = port();
            let log = std::env::temp_dir().join(format!("dial-test-{name}-{}-{port}.log", std::process::id()));
            let out = std::fs::File::create(&log).expect("creating a service log file");
            let child = command(port)
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("duplicating a log file handle"))
                .stderr(out)
                .spawn()
                .unwrap_or_else(|error| panic!("starting {name}: {error}"));
            let mut service = Self { port, child: Some(child), log };
            match service.wait_until(answers) {
                Ok(()) => return service,
                Err(exited) => {
                    last_log = std::fs::read_to_string(&service.log).unwrap_or_default();
                    if !exited {
                        panic!("{name} did not answer on port {port} within {START_TIMEOUT:?}; its log:\n{last_log}");
                    }
                }
            }
        }
        panic!("{name} exited right after starting, three times; its last log:\n{last_log}")
    }

    /// Starts the service again on its port (after [`Service::stop`]).
    fn respawn(&mut self, mut command: Command, answers: fn(u16) -> bool) {
        let out = std::fs::File::create(&self.log).expect("creating a service log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("duplicating a log file handle"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|error| panic!("restarting a service: {error}"));
        self.child = Some(child);
        if self.wait_until(answers).is_err() {
            panic!(
                "the service did not come back on port {}: {}",
                self.port,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }

    /// `Err(true)` when the process exited, `Err(false)` on timeout.
    fn wait_until(&mut self, answers: fn(u16) -> bool) -> Result<(), bool> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if answers(self.port) {
                return Ok(());
            }
            let child = self.child.as_mut().expect("service is running");
            if child.try_wait().is_ok_and(|status| status.is_some()) {
                self.child = None;
                return Err(true);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop();
        Err(false)
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("finding a free port").port()
}

fn http_answers(port: u16) -> bool {
    http_request(port, "GET / HTTP/1.1").is_ok_and(|response| response.starts_with("HTTP/"))
}

fn redis_answers(port: u16) -> bool {
    exchange(port, b"PING\r\n").is_ok_and(|response| response.starts_with("+PONG"))
}

/// One bodiless HTTP/1.1 request (`request_line` like `PUT /x HTTP/1.1`); the whole response as text.
fn http_request(port: u16, request_line: &str) -> std::io::Result<String> {
    let request = format!("{request_line}\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    exchange(port, request.as_bytes())
}

/// Sends `request` and reads until the server closes the connection or sends a complete first reply.
fn exchange(port: u16, request: &[u8]) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(request)?;
    let mut response = Vec::new();
    let mut buffer = [0; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                response.extend_from_slice(&buffer[..n]);
                // Redis keeps the connection open; one line is its whole answer to PING.
                if response.ends_with(b"\r\n") && response.starts_with(b"+") {
                    break;
                }
            }
            Err(error) if response.is_empty() => return Err(error),
            Err(_) => break,
        }
    }
    Ok(String::from_utf8_lossy(&response).into_owned())
}
