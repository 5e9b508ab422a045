//! Starts the real `dial-host` binary on a free port and talks HTTP to it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

pub const BUILT_BINARY: &str = env!("CARGO_BIN_EXE_dial-host");

/// The binary under test: this build's, or the one `TEST_DIAL_HOST_BINARY`
/// names (to replay the tests against another build, e.g. an older one).
pub fn binary() -> PathBuf {
    std::env::var_os("TEST_DIAL_HOST_BINARY").map_or_else(|| PathBuf::from(BUILT_BINARY), PathBuf::from)
}

/// How long a server may take to start (compiling the built-in handler on a
/// cold cache takes a few seconds in a debug build).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// One running server, killed on drop.
pub struct Server {
    child: Child,
    pub url: String,
    /// Banner lines printed after the "listening" line.
    pub banner: Vec<String>,
    pub data_dir: PathBuf,
    /// What the server has logged so far.
    stderr: Arc<Mutex<Vec<String>>>,
}

/// A scratch directory with a config file in it.
pub struct Setup {
    pub dir: tempfile::TempDir,
}

impl Setup {
    pub fn new() -> Self {
        Self { dir: tempfile::tempdir().expect("temp dir") }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `dial.toml` with the given TOML.
    pub fn config(&self, body: &str) -> PathBuf {
        let path = self.path().join("dial.toml");
        std::fs::write(&path, body).expect("write config");
        path
    }

    /// The environment every run gets: data in this directory, a free port,
    /// the shared handler cache.
    fn environment(&self) -> Vec<(String, String)> {
        vec![
            ("DIAL_HOST_DATA_DIR".into(), self.path().join("data").display().to_string()),
            ("DIAL_HOST_SERVER__LISTEN".into(), "127.0.0.1:0".into()),
            ("DIAL_HOST_HANDLERS__CACHE_DIR".into(), shared_cache_dir().display().to_string()),
        ]
    }

    /// Starts the server with `--config` and the given extra environment.
    pub fn start(&self, config: Option<&Path>, env: &[(&str, &str)]) -> Server {
        self.start_command(Command::new(binary()), config, env)
    }

    /// Starts the server in a process allowed `open_files` file descriptors.
    pub fn start_with_open_files(&self, config: Option<&Path>, open_files: u64) -> Server {
        let mut command = Command::new("sh");
        let binary = binary();
        command.args(["-c", "ulimit -n \"$0\" && exec \"$@\"", &open_files.to_string()]).arg(&binary);
        self.start_command(command, config, &[])
    }

    fn start_command(&self, mut command: Command, config: Option<&Path>, env: &[(&str, &str)]) -> Server {
        command.arg("serve");
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        command.current_dir(self.path()).envs(self.environment()).env_remove("DIAL_HOST_CONFIG").env_remove("RUST_LOG");
        for (key, value) in env {
            command.env(key, value);
        }
        Server::spawn(command, self.path().join("data"))
    }
}

/// Compiled handlers are shared between test servers so only the first
/// start pays for compilation.
pub fn shared_cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("blackbox-handler-cache")
}

impl Server {
    fn spawn(mut command: Command, data_dir: PathBuf) -> Server {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start dial-host");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (lines_tx, lines_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let logged = Arc::new(Mutex::new(Vec::new()));
        let lines = logged.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[dial-host] {line}");
                lines.lock().unwrap().push(line);
            }
        });

        let first = lines_rx.recv_timeout(START_TIMEOUT).unwrap_or_else(|_| {
            let status = child.try_wait().ok().flatten();
            panic!("dial-host did not print its listening line (exit status: {status:?}); see [dial-host] lines above")
        });
        let url = first
            .split_once("listening on ")
            .map(|(_, url)| url.trim().to_string())
            .unwrap_or_else(|| panic!("unexpected first line: {first}"));
        let mut banner = Vec::new();
        while let Ok(line) = lines_rx.recv_timeout(Duration::from_millis(300)) {
            banner.push(line);
        }
        Server { child, url, banner, data_dir, stderr: logged }
    }

    /// The server's log lines so far.
    pub fn logged(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// The log lines so far, once `until` holds for them (the server writes
    /// its log from a background thread, so a line may trail its request),
    /// or after 10 s.
    pub fn logged_once(&self, until: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.logged();
            if until(&lines) || std::time::Instant::now() > deadline {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `host:port` of the listener.
    pub fn address(&self) -> &str {
        self.url.strip_prefix("http://").unwrap_or(&self.url)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM and waits up to `patience` for the process to exit:
    /// its exit status, or `None` if it is still running.
    pub fn terminate(&mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let deadline = std::time::Instant::now() + patience;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// The value after `label` in the banner (e.g. `admin key:`).
    pub fn banner_value(&self, label: &str) -> Option<String> {
        self.banner.iter().find_map(|line| {
            let rest = line.trim().strip_prefix(label)?;
            rest.split_whitespace().next().map(str::to_string)
        })
    }

    pub fn client(&self) -> Client {
        Client { base: self.url.clone(), http: reqwest::Client::new() }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resets the server's peak resident set size (`VmHWM`) to its current
    /// size and returns that size in KiB, so a later
    /// [`Server::peak_rss_kib`] measures only what happens in between.
    pub fn reset_peak_rss(&self) -> u64 {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").expect("reset VmHWM");
        self.memory_kib("VmRSS:")
    }

    /// The server's peak resident set size (`VmHWM`) in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.memory_kib("VmHWM:")
    }

    fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("read /proc status");
        let line = status.lines().find_map(|line| line.strip_prefix(field)).unwrap_or_else(|| panic!("no {field}"));
        line.trim().trim_end_matches("kB").trim().parse().expect("a size in kB")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Setup {
    /// Runs the binary to completion (for `check-config`, `handler inspect`,
    /// and starts that must fail): (success, stdout, stderr).
    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
        let (code, stdout, stderr) = self.run_for_code(args, env);
        (code == Some(0), stdout, stderr)
    }

    /// Like [`Setup::run`], with the exit code (`None` when killed by a signal).
    pub fn run_for_code(&self, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
        let mut command = Command::new(binary());
        command.args(args).current_dir(self.path()).envs(self.environment()).env_remove("DIAL_HOST_CONFIG");
        for (key, value) in env {
            command.env(key, value);
        }
        let output = command.output().expect("run dial-host");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

/// A tiny HTTP client bound to one server.
#[derive(Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
}

pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
    pub bytes: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn etag(&self) -> String {
        self.headers.get("etag").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
    }
}

impl Client {
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send(self.http.get(self.url(path)), headers).await
    }

    pub async fn delete(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send(self.http.delete(self.url(path)), headers).await
    }

    pub async fn put_empty(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send(self.http.put(self.url(path)), headers).await
    }

    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        self.send(self.http.post(self.url(path)).body(body.to_string()), headers).await
    }

    pub async fn post_bytes(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        self.send(self.http.post(self.url(path)).body(body.to_vec()), headers).await
    }

    pub async fn put_body(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        self.send(self.http.put(self.url(path)).body(body.to_vec()), headers).await
    }

    /// PUT a multipart body: one part per file, the part's filename = path.
    pub async fn put_files(&self, path: &str, headers: &[(&str, &str)], files: &[(&str, &[u8])]) -> Reply {
        let mut form = reqwest::multipart::Form::new();
        for (name, content) in files {
            form = form.part("file", reqwest::multipart::Part::bytes(content.to_vec()).file_name(name.to_string()));
        }
        self.send(self.http.put(self.url(path)).multipart(form), headers).await
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends one request over a plain socket, reading the reply while the
    /// body is still being written. A server that refuses an upload early
    /// answers and stops reading; an HTTP client would report the broken
    /// connection instead of the reply, this reads the reply and stops
    /// writing. `Content-Length` is the sum of the chunks.
    pub async fn send_raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Vec<bytes::Bytes>) -> Reply {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = self.base.strip_prefix("http://").expect("an http:// server URL").to_string();
        let (mut reader, mut writer) = tokio::net::TcpStream::connect(&address).await.expect("connect").into_split();
        let length: usize = body.iter().map(bytes::Bytes::len).sum();
        let mut head =
            format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: {length}\r\nConnection: close\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        // The writer is handed back, not dropped: dropping it half-closes
        // the connection, and the server then drops the request unanswered.
        let sending = tokio::spawn(async move {
            writer.write_all(head.as_bytes()).await?;
            for chunk in body {
                writer.write_all(&chunk).await?;
            }
            std::io::Result::Ok(writer)
        });
        // Until the server closes the connection; a reset after the reply is
        // the server dropping what it did not read.
        let mut received = Vec::new();
        let mut buffer = vec![0u8; 64 << 10];
        while let Ok(read @ 1..) = reader.read(&mut buffer).await {
            received.extend_from_slice(&buffer[..read]);
        }
        sending.abort();
        parse_raw_reply(&received)
    }

    async fn send(&self, mut request: reqwest::RequestBuilder, headers: &[(&str, &str)]) -> Reply {
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body").to_vec();
        let body = String::from_utf8_lossy(&bytes).into_owned();
        Reply { status, headers, body, bytes }
    }
}

/// An HTTP/1.1 reply read from a socket (`Connection: close`, so the body
/// runs to the end unless `Content-Length` says otherwise).
fn parse_raw_reply(received: &[u8]) -> Reply {
    let end = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| {
        panic!("no complete reply ({} bytes): {}", received.len(), String::from_utf8_lossy(received))
    });
    let head = String::from_utf8_lossy(&received[..end]);
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|line| line.split(' ').nth(1)).and_then(|code| code.parse().ok());
    let status = status.unwrap_or_else(|| panic!("no status line: {head}"));
    let mut headers = reqwest::header::HeaderMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':')
            && let (Ok(name), Ok(value)) = (
                reqwest::header::HeaderName::try_from(name.trim()),
                reqwest::header::HeaderValue::try_from(value.trim()),
            )
        {
            headers.insert(name, value);
        }
    }
    let body = &received[end + 4..];
    let length = headers.get("content-length").and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let bytes = body[..length.unwrap_or(body.len()).min(body.len())].to_vec();
    Reply { status, headers, body: String::from_utf8_lossy(&bytes).into_owned(), bytes }
}

/// A user calling with an HS256 bearer token (`sub` = id, `roles`).
pub struct JwtUser {
    pub token: String,
    pub bucket: String,
}

impl JwtUser {
    pub async fn new(client: &Client, secret: &str, id: &str, roles: &[&str]) -> Self {
        use jsonwebtoken::{EncodingKey, Header, encode};
        let claims = serde_json::json!({"sub": id, "roles": roles, "exp": 4_102_444_800u64});
        let key = EncodingKey::from_secret(secret.as_bytes()).unwrap();
        let token = format!("Bearer {}", encode(&Header::default(), &claims, &key).unwrap());
        let reply = client.get("/v1/bucket", &[("Authorization", &token)]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let bucket = reply.json()["bucket"].as_str().unwrap().to_string();
        Self { token, bucket }
    }

    pub fn auth(&self) -> [(&str, &str); 1] {
        [("Authorization", self.token.as_str())]
    }
}

/// Every file below `dir`, recursively.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_below(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// The value of the sample `name{…}` whose labels include all of `labels`
/// (0 when there is none yet).
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
                .then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// `GET /metrics` (no credentials needed).
pub async fn scrape(client: &Client) -> String {
    let reply = client.get("/metrics", &[]).await;
    assert_eq!(reply.status, 200, "no credentials needed: {}", reply.body);
    assert!(reply.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    reply.body
}

/// The store operations `/metrics` counted so far, of the given kinds.
pub fn store_operations(text: &str, operations: &[&str]) -> f64 {
    operations
        .iter()
        .map(|operation| sample(text, "dial_host_store_operations_total", &[("operation", operation)]))
        .sum()
}

/// The MD5 of `bytes` in hex: a file's etag (content-derived, as DIAL's).
pub fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The entries of a ZIP, sorted by name.
pub fn unzip(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a valid zip");
    let mut files = Vec::new();
    for index in 0..archive.len() {
        let mut file = archive.by_index(index).unwrap();
        let mut content = Vec::new();
        file.read_to_end(&mut content).unwrap();
        files.push((file.name().unwrap().to_string(), content));
    }
    files.sort();
    files
}
