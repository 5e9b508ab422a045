//! Two builds of a handler component side by side: the skill handler's
//! `check` of a 2 KiB SKILL.md (or, with `--fixed`, a call that does no
//! work) through each, in one runtime configuration, with their rounds
//! alternating so both see the machine in the same state.
//!
//! ```text
//! cargo run --release -p dial-handler-runtime --example compare_components -- A.wasm B.wasm [--fixed]
//! ```
//!
//! `-` names the built-in skill handler. Prints the median time per call of
//! each (this thread's time on a CPU) and the median of the per-round ratios
//! B/A. For a change to a guest's build (allocator, stack, flags), where the
//! host bench's native baseline would add its own noise.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dial_handler_runtime::config::HandlersConfig;
use dial_handler_runtime::{
    BUILTIN_SKILL_HANDLER, FileSource, Handler, HandlerSource, InMemoryFiles, Mutation, ResourceInfo, Runtime,
    RuntimeLimits,
};

const ROUNDS: usize = 21;
const ROUND_TIME: Duration = Duration::from_millis(150);

fn skill_md() -> String {
    let mut text = String::from(
        "---\nname: pdf-processing\ndescription: Extract text and tables from PDF files, fill PDF forms, and merge documents. Use when working with PDF files or when the user mentions PDFs, forms, or document extraction.\nlicense: Apache-2.0\ncompatibility: Requires python3 and the pypdf package\nmetadata:\n  author: example-org\n  version: \"1.4.2\"\nallowed-tools: Bash(python3:*) Read\n---\n# PDF processing\n\n",
    );
    while text.len() < 2048 {
        text.push_str("## Step\n\nRun `scripts/extract.py <file>` to pull text out of a PDF; check the output for tables and hand them to `scripts/tables.py`.\n\n");
    }
    text
}

/// This thread's time on a CPU (Linux), else the wall clock since `start`.
fn cpu_time(start: Instant) -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|stat| stat.split_whitespace().next()?.parse().ok())
        .map_or_else(|| start.elapsed(), Duration::from_nanos)
}

/// Microseconds per call over one round.
fn round(call: &mut impl FnMut()) -> f64 {
    let start = Instant::now();
    let cpu = cpu_time(start);
    let mut calls = 0u32;
    while start.elapsed() < ROUND_TIME {
        call();
        calls += 1;
    }
    (cpu_time(start) - cpu).as_secs_f64() * 1e6 / f64::from(calls)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fixed = args.iter().any(|arg| arg == "--fixed");
    let paths: Vec<&String> = args.iter().filter(|arg| !arg.starts_with("--")).collect();
    let [a, b] = paths[..] else {
        eprintln!("usage: compare_components A.wasm B.wasm [--fixed]   ('-' is the built-in skill handler)");
        std::process::exit(2);
    };
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let config = HandlersConfig::default();
    let load = |path: &str| {
        let runtime = Runtime::new(RuntimeLimits::from_config(&config), None, true).expect("an engine");
        let bytes = if path == "-" { BUILTIN_SKILL_HANDLER.to_vec() } else { std::fs::read(path).expect("the file") };
        let source = if path == "-" { HandlerSource::Builtin } else { HandlerSource::File(path.into()) };
        let loaded = tokio.block_on(runtime.load(bytes, source)).expect("a handler component");
        Handler::new(loaded, runtime, &config)
    };
    let handlers = [load(a), load(b)];

    let mut files = InMemoryFiles::new();
    files.insert("SKILL.md", skill_md());
    let entries = files.entries();
    let source: Arc<dyn FileSource> = Arc::new(files);
    let resource = ResourceInfo { name: "pdf-processing".into(), path: "team/pdf-processing".into() };
    let call = |handler: &Handler| {
        tokio.block_on(async {
            if fixed {
                black_box(handler.validate_file_mutation("scripts/a.py", Mutation::Put).await.unwrap()).unwrap();
            } else {
                black_box(handler.check(&resource, &entries, source.clone()).await.unwrap());
            }
        })
    };
    for handler in &handlers {
        for _ in 0..200 {
            call(handler);
        }
    }
    let (mut times_a, mut times_b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let time_a = round(&mut || call(&handlers[0]));
        let time_b = round(&mut || call(&handlers[1]));
        ratios.push(time_b / time_a);
        times_a.push(time_a);
        times_b.push(time_b);
    }
    let case = if fixed { "validate-file-mutation" } else { "check" };
    println!(
        "{case}: A {:.1} µs, B {:.1} µs, median of per-round B/A {:.3}",
        median(times_a),
        median(times_b),
        median(ratios)
    );
}
