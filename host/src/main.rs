//! The `dial-host` command: `serve` (the default), `check-config`,
//! `handler inspect`, `handler test`, `handler push`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use dial_host::cli::handler_test::test_folder;
use dial_host::config::{Config, ServerConfig};
use dial_host::handlers::{Checked, HandlerSource, Problem, Runtime};
use dial_host::{server, telemetry};

/// The static (musl) build's allocator; see host/Cargo.toml.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (the sys crate names
/// no constant for it); the test below checks the index still means it.
#[cfg(target_env = "musl")]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc 3 holds freed memory for a second before it gives it back to the
/// system, so a burst of large allocations freed one after another (a vector
/// doubling) stays resident together: a large application's PUT peaked at 5.8
/// times its size instead of 3.7 with glibc's allocator. Given back at once, it
/// peaks at 4.0 (`limits::a_large_application_is_normalized_in_bounded_memory`).
/// A `MIMALLOC_PURGE_DELAY` the operator sets is left to rule.
#[cfg(target_env = "musl")]
fn give_freed_memory_back_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set is not thread-safe; this runs first in main,
        // before any other thread exists.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
    }
}

#[derive(Parser)]
#[command(version, about = "Stores and serves LLM-application resources with DIAL Core's HTTP API")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default when no command is given).
    Serve(ConfigArg),
    /// Load the configuration and every handler, report problems, and exit.
    CheckConfig(ConfigArg),
    /// Work with handler components.
    #[command(subcommand)]
    Handler(HandlerCommand),
}

#[derive(clap::Args, Default)]
struct ConfigArg {
    /// TOML configuration file; without one, the embedded default is used.
    /// `handler inspect`/`test` take the server's handler limits and its
    /// compiled-component cache (`handlers.cache_dir`) from it.
    #[arg(long, short, env = "DIAL_HOST_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum HandlerCommand {
    /// Print what a handler component describes and whether it implements
    /// the host's `dial:handler@1.x` world.
    Inspect {
        /// The `.wasm` component.
        file: PathBuf,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Run a handler's validate and metadata on a local folder and print the
    /// verdict. Exit code 0: valid; 1: invalid; 2: the handler did not load
    /// or failed.
    Test {
        /// The folder, laid out as the resource would be.
        dir: PathBuf,
        /// The `.wasm` component.
        file: PathBuf,
        /// Treat warnings as problems, like `[handlers.types.<group>] strict = true`.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Publish a handler component to an OCI registry (the Wasm OCI layout
    /// `wkg oci push` uses) and print the pinned `oci://…@sha256:…`
    /// reference for `handlers.types.<group>.source`.
    Push {
        /// The `.wasm` component.
        file: PathBuf,
        /// `oci://<registry>/<repository>:<tag>`.
        target: String,
        /// A registry (`host:port`) to reach over plain HTTP; loopback ones always are.
        #[arg(long = "insecure-registry")]
        insecure: Vec<String>,
    },
}

fn main() -> ExitCode {
    #[cfg(target_env = "musl")]
    give_freed_memory_back_at_once();
    let cli = Cli::parse();
    let result = match cli.command.unwrap_or(Command::Serve(ConfigArg::default())) {
        Command::Serve(arg) => serve(arg),
        Command::CheckConfig(arg) => block_on(check_config(arg)),
        Command::Handler(HandlerCommand::Inspect { file, config }) => block_on(inspect(file, config)),
        Command::Handler(HandlerCommand::Test { dir, file, strict, config }) => {
            block_on(test_handler(dir, file, strict, config))
        }
        Command::Handler(HandlerCommand::Push { file, target, insecure }) => block_on(push(file, target, insecure)),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The async runtime, with tokio's blocking pool capped at `blocking_threads`.
fn runtime(blocking_threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(blocking_threads)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Runs a command that needs no server settings on a default runtime.
fn block_on(command: impl Future<Output = anyhow::Result<ExitCode>>) -> anyhow::Result<ExitCode> {
    runtime(ServerConfig::default().blocking_threads)?.block_on(command)
}

fn load_config(arg: &ConfigArg) -> anyhow::Result<Config> {
    Config::load(arg.config.as_deref()).context("invalid configuration")
}

/// The blocking pool is sized by the configuration, so the runtime starts
/// after the configuration is read.
fn serve(arg: ConfigArg) -> anyhow::Result<ExitCode> {
    let config = load_config(&arg)?;
    server::check_settings(&config)?;
    let _telemetry = telemetry::init(&config.log, &config.telemetry)?;
    let runtime = runtime(config.server.blocking_threads)?;
    runtime.block_on(async { server::serve(server::prepare(config)?).await })?;
    Ok(ExitCode::SUCCESS)
}

async fn check_config(arg: ConfigArg) -> anyhow::Result<ExitCode> {
    let config = load_config(&arg)?;
    // Logs only: checking exports no spans (the endpoint is checked below).
    let _telemetry = telemetry::init(&config.log, &Default::default())?;
    if config.encryption.secret.is_none() {
        println!(
            "note: encryption.secret is unset; a generated one in {} will be used (fine for one instance only)",
            config.data_dir.display()
        );
    }
    let prepared = server::prepare(config)?;
    let state = server::build_state(&prepared.config).await?;
    let failed = state.handlers().failed();
    println!("{}", if failed.is_empty() { "configuration OK" } else { "configuration loaded; a handler type FAILED" });
    println!("  storage: {}", prepared.config.storage_url());
    if let Ok(Some(redis)) = dial_host::redis_conn::RedisTarget::from_config(&prepared.config.redis) {
        println!("  redis: {redis}");
    }
    if let Some(Ok(traces)) = prepared.config.telemetry.otlp_endpoint.as_deref().map(telemetry::traces_url) {
        println!("  traces: {traces} (OTLP/HTTP, service.name {})", prepared.config.telemetry.service_name);
    }
    for handler in state.handlers().all() {
        println!("  handler: {} ({}, {})", handler.description().group, handler.label(), handler.source());
    }
    for failure in &failed {
        println!("  handler FAILED: {}: {}", failure.source, failure.error);
    }
    for (name, app) in state.apps().all() {
        println!("  application: {name} ({})", app.summary());
    }
    Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Exit code of `handler test` when the handler cannot be read, loaded or run.
const HANDLER_FAILED: u8 = 2;

/// The runtime the server with this configuration runs handlers in: its
/// limits, and its compiled-component cache (so a component the server has
/// compiled loads in milliseconds here, and the other way round).
/// Without a secret (none configured, and no server has generated one in
/// the data directory yet) there is no cache: its entries are authenticated
/// with a key derived from the secret, and this command makes no files.
fn handler_runtime(arg: &ConfigArg) -> anyhow::Result<Arc<Runtime>> {
    let config = load_config(arg)?;
    let secret = server::existing_secret(&config)?;
    server::handler_runtime(&config, secret.as_deref())
}

/// Where the compiled code came from: the line `handler inspect`/`test` print.
fn cache_line(runtime: &Runtime, from_cache: bool) -> String {
    match (runtime.cache_dir(), from_cache) {
        (Some(dir), true) => format!("cache:   loaded from {}", dir.display()),
        (Some(dir), false) => format!("cache:   compiled now, saved in {}", dir.display()),
        (None, _) => "cache:   compiled now, not cached (no encryption.secret, and no server has run with this \
                      data_dir: pass the server's --config)"
            .into(),
    }
}

async fn inspect(file: PathBuf, config: ConfigArg) -> anyhow::Result<ExitCode> {
    let mut out = String::new();
    let wasm = match std::fs::read(&file) {
        Ok(wasm) => wasm,
        Err(error) => {
            let _ = writeln!(out, "error:   cannot read {}: {error}", file.display());
            return Ok(print(&out, ExitCode::FAILURE));
        }
    };
    let size = wasm.len();
    let runtime = handler_runtime(&config)?;
    let _ = writeln!(out, "file:    {} ({size} bytes)", file.display());
    let code = match runtime.load(wasm, HandlerSource::File(file.clone())).await {
        Ok(loaded) => {
            let d = loaded.description();
            let limit = |value: Option<String>| value.unwrap_or_else(|| "host default".into());
            let _ = writeln!(out, "world:   dial:handler@1.x — implemented");
            let _ = writeln!(out, "sha256:  {}", loaded.sha256());
            let _ = writeln!(out, "{}", cache_line(&runtime, loaded.from_cache()));
            let _ = writeln!(out, "type:    {}", d.type_name);
            let _ = writeln!(out, "group:   {} (routes /v2/{}/…)", d.group, d.group);
            let _ = writeln!(out, "name:    {}", d.display_name);
            let _ = writeln!(out, "version: {}", d.handler_version);
            let _ = writeln!(
                out,
                "limits:  max_files {}, max_file_bytes {}, max_total_bytes {}",
                limit(d.limits.max_files.map(|v| v.to_string())),
                limit(d.limits.max_file_bytes.map(|v| v.to_string())),
                limit(d.limits.max_total_bytes.map(|v| v.to_string()))
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            let _ = writeln!(out, "world:   dial:handler@1.x — NOT implemented");
            let _ = writeln!(out, "problem: {error}");
            ExitCode::FAILURE
        }
    };
    Ok(print(&out, code))
}

async fn test_handler(dir: PathBuf, file: PathBuf, strict: bool, config: ConfigArg) -> anyhow::Result<ExitCode> {
    let mut out = String::new();
    let wasm = match std::fs::read(&file) {
        Ok(wasm) => wasm,
        Err(error) => {
            let _ = writeln!(out, "error:   cannot read the handler {}: {error}", file.display());
            return Ok(print(&out, ExitCode::from(HANDLER_FAILED)));
        }
    };
    let runtime = handler_runtime(&config)?;
    let report = match test_folder(runtime.clone(), wasm, HandlerSource::File(file.clone()), &dir, strict).await {
        Ok(report) => report,
        Err(error) => {
            let _ = writeln!(out, "error:   {error}");
            return Ok(print(&out, ExitCode::from(HANDLER_FAILED)));
        }
    };
    let _ = writeln!(out, "handler: {} ({})", report.handler.label(), report.handler.description().group);
    let _ = writeln!(out, "folder:  {}", dir.display());
    let _ = writeln!(out, "{}", cache_line(&runtime, report.handler.from_cache()));
    let print_problems = |out: &mut String, kind: &str, problems: &[Problem]| {
        for problem in problems {
            let _ = writeln!(out, "  {kind} {}: {}", problem.path.as_deref().unwrap_or("(resource)"), problem.message);
        }
    };
    print_problems(&mut out, "host error", &report.host_problems);
    match &report.checked {
        Checked::Valid { warnings, metadata } => {
            print_problems(&mut out, "warning", warnings);
            // In the order the handler gave it.
            for (key, value) in metadata {
                let _ = writeln!(out, "  metadata {key}: {value}");
            }
        }
        Checked::Invalid { problems } => print_problems(&mut out, "error", problems),
    }
    let valid = report.is_valid();
    let _ = writeln!(out, "verdict: {}", if valid { "valid" } else { "invalid" });
    Ok(print(&out, if valid { ExitCode::SUCCESS } else { ExitCode::FAILURE }))
}

async fn push(file: PathBuf, target: String, insecure: Vec<String>) -> anyhow::Result<ExitCode> {
    let pushed = dial_host::cli::push::push_handler(&file, &target, &insecure).await?;
    let mut out = String::new();
    let _ = writeln!(out, "pushed:  {} ({}) to {target}", pushed.label, pushed.group);
    let _ = writeln!(out, "{}", pushed.reference);
    let _ = writeln!(out, "config:  [handlers.types.{}]", pushed.group);
    let _ = writeln!(out, "         source = \"{}\"", pushed.reference);
    Ok(print(&out, ExitCode::SUCCESS))
}

/// Writes a command's output. A reader that went away (`| head`) is not an
/// error: the command still ends with its own exit code.
fn print(out: &str, code: ExitCode) -> ExitCode {
    use std::io::Write;
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Ok(()) => code,
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => code,
        Err(error) => {
            eprintln!("error: writing the output: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(all(test, target_env = "musl"))]
mod tests {
    use super::MI_OPTION_PURGE_DELAY;

    /// The index is the purge delay's: mimalloc 3 defaults it to 1000 ms
    /// (a version that renumbered its options would fail here, not purge
    /// something else silently).
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: reading an option; mimalloc initialized them on first allocation.
            assert_eq!(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }, 1000);
        }
    }
}
