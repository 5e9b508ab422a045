//! The example applications (`examples/apps/`) and their README's
//! walk-through, run as written: both applications on their own ports, the
//! host on the example configuration (endpoints and the port moved by
//! environment overrides), then every `python` block of the README in
//! order, with the official SDKs.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::Setup;
use crate::upstream::{WORKSPACE, clients_python};

/// An example application's process, killed on drop.
struct App(Child);

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts `examples/apps/<script>` and waits until it accepts connections.
fn start_app(python: &Path, script: &str, port: u16, host_url: &str) -> App {
    let mut child = Command::new(python)
        .arg(Path::new(WORKSPACE).join("examples/apps").join(script))
        .args(["--port", &port.to_string(), "--host-url", host_url])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("starting {script}: {error}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "{script} exited before accepting connections");
        assert!(Instant::now() < deadline, "{script} did not listen on {port} within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    App(child)
}

/// Every fenced `python` block of a Markdown page, in order, as one script.
fn python_blocks(markdown: &str) -> String {
    let mut script = String::new();
    let mut inside = false;
    for line in markdown.lines() {
        match line.trim_end() {
            "```python" if !inside => inside = true,
            "```" if inside => {
                inside = false;
                script.push('\n');
            }
            _ if inside => {
                script.push_str(line);
                script.push('\n');
            }
            _ => {}
        }
    }
    script
}

#[test]
fn the_example_applications_walk_through_runs_as_written() {
    let Some(python) = clients_python() else { return };
    let host_port = free_port();
    let host_url = format!("http://127.0.0.1:{host_port}");
    let (chat_port, tools_port) = (free_port(), free_port());
    let _chat = start_app(&python, "chat_app.py", chat_port, &host_url);
    let _tools = start_app(&python, "notes_mcp.py", tools_port, &host_url);

    let setup = Setup::new();
    let config = Path::new(WORKSPACE).join("examples/apps/dial-host.toml");
    let chat = format!("http://127.0.0.1:{chat_port}");
    let env = [
        ("DIAL_HOST_SERVER__LISTEN", format!("127.0.0.1:{host_port}")),
        ("DIAL_HOST_APPLICATIONS__NOTES_CHAT__ENDPOINT", format!("{chat}/chat/completions")),
        ("DIAL_HOST_APPLICATIONS__NOTES_CHAT__INTERFACES__ANTHROPIC_MESSAGES__ENDPOINT", format!("{chat}/v1/messages")),
        ("DIAL_HOST_APPLICATIONS__NOTES_TOOLS__MCP__ENDPOINT", format!("http://127.0.0.1:{tools_port}/mcp")),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = setup.start(Some(&config), &env);
    assert_eq!(server.url, host_url);
    for name in ["notes_chat", "notes_tools"] {
        assert!(
            server.banner.iter().any(|line| line.contains(&format!("application: {name} ("))),
            "{:?}",
            server.banner
        );
    }

    let readme = std::fs::read_to_string(Path::new(WORKSPACE).join("examples/apps/README.md")).unwrap();
    let script = python_blocks(&readme);
    assert!(script.contains("OpenAI(") && script.contains("Anthropic(") && script.contains("streamable_http_client"));
    let file = setup.path().join("walkthrough.py");
    std::fs::write(&file, &script).unwrap();
    let output = Command::new(&python)
        .arg(&file)
        .env("DIAL_HOST_URL", &host_url)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the walk-through failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("Noted. Your notes: groceries, trip."), "{stdout}");
    assert!(stdout.contains("['books', 'groceries', 'trip']"), "{stdout}");
}
