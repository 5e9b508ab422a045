//! What the benches that run the real server share: starting the release
//! binary on a scratch directory, reading its memory, percentiles and the
//! machine's description. Each bench uses a part of it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// The project API key every bench server accepts.
pub const API_KEY: &str = "bench-key";

/// The `dial-host` binary of this build (or the one `BENCH_DIAL_HOST_BINARY`
/// names: an earlier build, for a before/after in one run), serving from a
/// scratch directory; killed on drop.
pub struct ServerProcess {
    child: Child,
    pub url: String,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// The server binary the benches start.
pub fn binary() -> std::path::PathBuf {
    std::env::var_os("BENCH_DIAL_HOST_BINARY").map_or_else(|| env!("CARGO_BIN_EXE_dial-host").into(), Into::into)
}

impl ServerProcess {
    /// Data in `dir/data`, the key [`API_KEY`], logs at `warn`; `extra` is
    /// appended to the configuration (more tables).
    pub fn start(dir: &std::path::Path, extra: &str) -> Self {
        Self::start_logging(dir, extra, "warn")
    }

    /// [`ServerProcess::start`] with the log filter `filter` (`info` logs
    /// every request: the production default).
    pub fn start_logging(dir: &std::path::Path, extra: &str, filter: &str) -> Self {
        Self::start_binary(&binary(), dir, extra, filter)
    }

    /// [`ServerProcess::start_logging`] with another build of the server
    /// (an earlier one, for a before/after in one run).
    pub fn start_binary(binary: &std::path::Path, dir: &std::path::Path, extra: &str, filter: &str) -> Self {
        let config = dir.join("dial.toml");
        std::fs::write(
            &config,
            format!(
                "data_dir = \"{}\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\n[encryption]\nsecret = \"x\"\n\n\
                 [keys.{API_KEY}]\nproject = \"bench\"\nroles = [\"user\"]\n\n[handlers]\ncache_dir = \"{}\"\n\n\
                 [log]\nfilter = \"{filter}\"\n\n{extra}",
                dir.join("data").display(),
                dir.join("handler-cache").display()
            ),
        )
        .unwrap();
        let mut command = Command::new(binary);
        command.arg("serve").arg("--config").arg(&config).current_dir(dir).env_remove("RUST_LOG");
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("DIAL_HOST_") {
                command.env_remove(key);
            }
        }
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start dial-host");
        let (lines_tx, lines_rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        // Read the banner to its end: a closed pipe would fail the server's next line.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines_tx.send(line);
            }
        });
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let kept = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut kept = kept.lock().unwrap();
                if kept.len() == 40 {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        let mut server = Self { child, url: String::new(), stderr };
        let first =
            lines_rx.recv_timeout(Duration::from_secs(180)).unwrap_or_else(|_| server.fail("no listening line"));
        server.url = match first.split_once("listening on ") {
            Some((_, url)) => url.trim().to_string(),
            None => server.fail(&format!("unexpected first line: {first}")),
        };
        server
    }

    /// The bucket id of [`API_KEY`].
    pub async fn bucket(&self, client: &reqwest::Client) -> String {
        let url = format!("{}/v1/bucket", self.url);
        let reply = client.get(url).header("Api-Key", API_KEY).send().await.unwrap();
        let body: serde_json::Value = reply.json().await.unwrap();
        body["bucket"].as_str().unwrap().to_string()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resets the process's peak RSS (VmHWM) to its current RSS.
    pub fn reset_peak_rss(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5");
    }

    pub fn fail(&self, why: &str) -> ! {
        let log: Vec<String> = self.stderr.lock().unwrap().iter().cloned().collect();
        panic!("dial-host: {why}\n{}", log.join("\n"));
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (VmRSS, VmHWM) of a process, in bytes.
pub fn memory_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let rank = (sorted.len() as f64 * fraction).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn micros(duration: Duration) -> String {
    format!("{:.0} µs", duration.as_secs_f64() * 1e6)
}

pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name").map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

pub fn load_average() -> String {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    loadavg.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
