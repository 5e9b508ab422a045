//! Real services for tests: each runs as a child process on a free loopback port and is killed on drop.
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

/// The workspace root, where `scripts/test` puts `.venv-moto`.
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

/// A throwaway redis-server: no persistence, loopback only.
pub struct Redis {
    /// `redis://127.0.0.1:<port>`
    pub url: String,
    process: Service,
    binary: PathBuf,
}

/// Starts `/usr/bin/redis-server`, else the one on `PATH`.
pub fn redis() -> Option<Redis> {
    let binary = Some(PathBuf::from("/usr/bin/redis-server"))
        .filter(|path| path.is_file())
        .or_else(|| find_on_path("redis-server"));
    let Some(binary) = binary else {
        return missing("redis-server", "run scripts/test, or: apt-get install -y redis-server");
    };
    let process = Service::start("redis", |port| redis_command(&binary, port), redis_answers);
    Some(Redis { url: format!("redis://127.0.0.1:{}", process.port), process, binary })
}

fn redis_command(binary: &std::path::Path, port: u16) -> Command {
    let mut command = Command::new(binary);
    command.args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]);
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
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = free_port();
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
