//! The Python side of the deployment tests: a mock upstream LLM application
//! (`tests/upstream/mock_app.py`), a real MCP server (`tests/upstream/mcp_server.py`) and client
//! scripts on the official openai, anthropic and mcp SDKs (`tests/clients/`), all run by
//! `<workspace>/.venv-clients/bin/python`; and EPAM's own DIAL libraries — applications built with
//! aidial-sdk (`tests/upstream/dial_sdk_app.py`) and aidial-client calls (`tests/clients/dial_client.py`)
//! — run by `<workspace>/.venv-dial-sdk/bin/python` (aidial-client needs `openai<3`). `scripts/test`
//! installs both venvs.
//!
//! Without a venv the constructors, [`clients_python`] and [`dial_sdk_python`] return `None` after a
//! note, so the test skips; under `CI=true` they panic instead, because CI must never go green by
//! skipping.

#![allow(dead_code)] // each deployment test uses its own part

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The workspace root, where `scripts/test` puts `.venv-clients`.
pub(crate) const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// How long a server may take to print `ready` (the MCP server imports the whole SDK).
const START_TIMEOUT: Duration = Duration::from_secs(60);

const INSTALL: &str = "run scripts/test, which creates .venv-clients, or: python3 -m venv .venv-clients && \
                       .venv-clients/bin/pip install -r tests/requirements-clients.txt";

const INSTALL_DIAL_SDK: &str = "run scripts/test, which creates .venv-dial-sdk, or: python3 -m venv .venv-dial-sdk && \
                                .venv-dial-sdk/bin/pip install -r tests/requirements-dial-sdk.txt";

/// `<workspace>/.venv-clients/bin/python`; `None` with a note when it is missing, a panic under `CI=true`.
pub fn clients_python() -> Option<PathBuf> {
    venv_python(".venv-clients", "the Python client SDKs", INSTALL)
}

/// `<workspace>/.venv-dial-sdk/bin/python` (aidial-sdk, aidial-client); `None` with a note when it is
/// missing, a panic under `CI=true`.
pub fn dial_sdk_python() -> Option<PathBuf> {
    venv_python(".venv-dial-sdk", "EPAM's DIAL libraries (aidial-sdk, aidial-client)", INSTALL_DIAL_SDK)
}

fn venv_python(venv: &str, what: &str, install: &str) -> Option<PathBuf> {
    let python = Path::new(WORKSPACE).join(venv).join("bin/python");
    if python.is_file() {
        return Some(python);
    }
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("{what} are not installed, and CI=true forbids skipping their tests: {install}");
    }
    eprintln!("note: {what} are not installed; skipping this test. To run it: {install}");
    None
}

/// A command running `<workspace>/<script>` with the venv's Python.
fn python(interpreter: &Path, script: &str) -> Command {
    let mut command = Command::new(interpreter);
    command
        .arg(Path::new(WORKSPACE).join(script))
        // Keep the source tree free of __pycache__ and every test's traffic on loopback, whatever
        // proxy the environment names.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .stdin(Stdio::null());
    command
}

/// The mock upstream LLM application: OpenAI chat completions and responses, Anthropic messages.
/// See `tests/upstream/mock_app.py` for the commands a test's last user message can carry.
pub struct MockApp {
    server: PythonServer,
    http: reqwest::Client,
}

impl MockApp {
    /// Starts the app; `host_url` is the dial-host its callbacks go to (or set it later with
    /// [`MockApp::set_host_url`], for a host configured with this app's URL and so started after it).
    pub fn start(host_url: Option<&str>) -> Option<Self> {
        let interpreter = clients_python()?;
        let server = PythonServer::start("mock-app", |port| {
            let mut command = python(&interpreter, "tests/upstream/mock_app.py");
            command.args(["--port", &port.to_string()]);
            if let Some(url) = host_url {
                command.args(["--host-url", url]);
            }
            command
        });
        Some(Self { server, http: reqwest::Client::new() })
    }

    /// `http://127.0.0.1:<port>`; the APIs are at `/chat/completions`, `/responses` and `/v1/messages`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Lets a held stream (the `hold` command) go on; the number of streams that were waiting.
    pub async fn release(&self) -> u64 {
        let reply = self.post("/release", String::new()).await;
        let waiting = reply.json::<serde_json::Value>().await.expect("/release answers JSON")["waiting"].as_u64();
        waiting.expect("/release answers {\"waiting\": n}")
    }

    /// Where the callbacks go from now on.
    pub async fn set_host_url(&self, host_url: &str) {
        let reply = self.post("/host-url", host_url.to_string()).await;
        assert_eq!(reply.status(), 204, "setting the mock app's host URL");
    }

    /// The last report per API: `{"chat_completions", "responses", "messages"}`, each null until called.
    pub async fn last(&self) -> serde_json::Value {
        let reply = self.http.get(format!("{}/last", self.url())).send().await.expect("GET /last on the mock app");
        reply.json().await.expect("/last answers JSON")
    }

    async fn post(&self, path: &str, body: String) -> reqwest::Response {
        let request = self.http.post(format!("{}{path}", self.url())).body(body);
        request.send().await.unwrap_or_else(|error| panic!("POST {path} on the mock app: {error}"))
    }
}

/// A real MCP server (the official SDK), Streamable HTTP at `/mcp`, tools `whoami` and `add`;
/// `/old-mcp` redirects (307) to `/mcp`, `/elsewhere-mcp` to another origin.
pub struct McpServer {
    server: PythonServer,
}

impl McpServer {
    /// `elsewhere_url` is where `/elsewhere-mcp` redirects; by default a loopback port nobody listens on.
    pub fn start(elsewhere_url: Option<&str>) -> Option<Self> {
        let interpreter = clients_python()?;
        let server = PythonServer::start("mcp-server", |port| {
            let mut command = python(&interpreter, "tests/upstream/mcp_server.py");
            command.args(["--port", &port.to_string()]);
            if let Some(url) = elsewhere_url {
                command.args(["--elsewhere-url", url]);
            }
            command
        });
        Some(Self { server })
    }

    /// `http://127.0.0.1:<port>`, the origin.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// `http://127.0.0.1:<port>/mcp`, the MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.server.url())
    }
}

/// Runs `tests/clients/<script>` (`openai_client.py`, `anthropic_client.py`, `mcp_client.py`) with
/// `args` and returns the JSON line it printed: its results, or `{"error", "status", "body", "type"}`
/// when it failed (exit 1). Blocks the thread; see [`run_client_async`] to overlap with other work.
pub fn run_client(script: &str, args: &[&str]) -> serde_json::Value {
    let interpreter = clients_python().expect("run_client needs .venv-clients: check clients_python() first");
    run_script(&interpreter, script, args)
}

/// `tests/clients/dial_client.py` (aidial-client) with `args`, as [`run_client`] runs the others, on
/// a blocking thread.
pub async fn run_dial_client(args: &[&str]) -> serde_json::Value {
    let interpreter = dial_sdk_python().expect("run_dial_client needs .venv-dial-sdk: check dial_sdk_python() first");
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        run_script(&interpreter, "dial_client.py", &args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .expect("the client thread panicked")
}

/// [`run_client`] with another venv's Python (see [`dial_sdk_python`]).
pub fn run_client_with(interpreter: &Path, script: &str, args: &[&str]) -> serde_json::Value {
    run_script(interpreter, script, args)
}

fn run_script(interpreter: &Path, script: &str, args: &[&str]) -> serde_json::Value {
    let output = python(interpreter, &format!("tests/clients/{script}"))
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("starting {script}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stdout.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
    let result: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|error| {
        panic!("{script} printed no JSON line ({error}; {}):\n{stdout}\n{stderr}", output.status)
    });
    let failed = result.get("error").is_some();
    match output.status.code() {
        Some(0) if !failed => {}
        Some(1) if failed => eprintln!("note: {script} failed as reported: {result}\n{stderr}"),
        _ => panic!("{script} exited with {} and printed {result}:\n{stderr}", output.status),
    }
    result
}

/// [`run_client`] on a blocking thread, so a test can run clients concurrently or await other things.
pub async fn run_client_async(script: &str, args: &[&str]) -> serde_json::Value {
    let script = script.to_string();
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    tokio::task::spawn_blocking(move || run_client(&script, &args.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .expect("the client thread panicked")
}

/// The applications of `tests/upstream/dial_sdk_app.py`, built with aidial-sdk: `echo-sdk`, `maker`
/// and `chainer`, each at `/openai/deployments/<name>/…`.
pub struct DialSdkApp {
    server: PythonServer,
    http: reqwest::Client,
}

impl DialSdkApp {
    pub fn start() -> Option<Self> {
        let interpreter = dial_sdk_python()?;
        let server = PythonServer::start("dial-sdk-app", |port| {
            let mut command = python(&interpreter, "tests/upstream/dial_sdk_app.py");
            command.args(["--port", &port.to_string()]);
            command
        });
        Some(Self { server, http: reqwest::Client::new() })
    }

    /// `http://127.0.0.1:<port>`: the `base_url` of the applications' interfaces.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The host the applications call back (and aidial-sdk asks for properties).
    pub async fn set_dial_url(&self, host_url: &str) {
        let reply = self.http.post(format!("{}/dial-url", self.url())).body(host_url.to_string()).send().await;
        assert_eq!(reply.expect("POST /dial-url on the SDK app").status(), 204, "setting the SDK app's DIAL URL");
    }

    /// The rates `echo-sdk`'s rate endpoint received: `[{"response_id", "rate", "api_key_length"}]`.
    pub async fn rates(&self) -> serde_json::Value {
        let reply = self.http.get(format!("{}/rates", self.url())).send().await.expect("GET /rates on the SDK app");
        reply.json().await.expect("/rates answers JSON")
    }
}

/// A Python server on a free loopback port, its stderr relayed to the test output; killed on drop.
struct PythonServer {
    name: &'static str,
    port: u16,
    child: Child,
}

impl PythonServer {
    /// Starts the server and waits for its `ready` line. A port can be taken between choosing and
    /// binding it, so a start whose process exits early is retried on another port.
    fn start(name: &'static str, command: impl Fn(u16) -> Command) -> Self {
        for _ in 0..3 {
            let port = free_port();
            let mut child = command(port)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|error| panic!("starting {name}: {error}"));
            let ready = watch_stdout(child.stdout.take().expect("piped stdout"), name, port);
            relay_stderr(child.stderr.take().expect("piped stderr"), name, port);
            let server = Self { name, port, child };
            match ready.recv_timeout(START_TIMEOUT) {
                Ok(()) => return server,
                // Its stdout closed without `ready`: it exited (a taken port, or a crash shown above).
                Err(mpsc::RecvTimeoutError::Disconnected) => drop(server),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{name} did not print `ready` within {START_TIMEOUT:?}; see [{name}:{port}] lines above")
                }
            }
        }
        panic!("{name} exited right after starting, three times; see its [{name}:<port>] lines above")
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Signals once the server prints `ready`; anything else it prints is relayed like stderr.
fn watch_stdout(stdout: ChildStdout, name: &'static str, port: u16) -> mpsc::Receiver<()> {
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.trim() == "ready" {
                let _ = ready_tx.send(());
            } else {
                eprintln!("[{name}:{port}] {line}");
            }
        }
    });
    ready_rx
}

fn relay_stderr(stderr: ChildStderr, name: &'static str, port: u16) {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[{name}:{port}] {line}");
        }
    });
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("finding a free port").port()
}

/// The harness itself, without a dial-host: each SDK client straight at the mock app (streaming,
/// held until the client's release) and the MCP client at the MCP server through its redirect.
#[tokio::test]
async fn sdk_clients_parse_the_mock_upstreams() {
    let Some(app) = MockApp::start(None) else { return };
    let Some(mcp) = McpServer::start(None) else { return };
    let (base, release) = (app.url(), format!("{}/release", app.url()));
    for (script, extra) in
        [("openai_client.py", None), ("openai_client.py", Some("--responses")), ("anthropic_client.py", None)]
    {
        let mut args =
            vec!["--base-url", &base, "--api-key", "k", "--message", "hold", "--stream", "--release-url", &release];
        args.extend(extra);
        let out = run_client_async(script, &args).await;
        assert_eq!(out["first_before_release"].as_bool(), Some(true), "{script} {extra:?}: {out}");
        assert_eq!(out["report"]["api_key"], "k", "{script} {extra:?}: {out}");
    }
    assert_eq!(app.last().await["messages"]["path"], "/v1/messages");

    let out = run_client_async("mcp_client.py", &["--url", &format!("{}/old-mcp", mcp.url()), "--api-key", "m"]).await;
    assert_eq!((&out["add"], &out["whoami"]), (&serde_json::json!(5), &serde_json::json!("m")), "{out}");
}
