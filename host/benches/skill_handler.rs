//! The skill handler's work for one commit, called through the WebAssembly
//! runtime (fresh instance per call, as the server does) versus the same
//! Rust rules called natively, in one run: `check` (WIT 1.2, one call), the
//! 1.1 path (`validate` then `build-marker-metadata`, two calls), and the
//! fixed cost of a call that does nothing.
//!
//! `cargo bench -p dial-host --bench skill_handler` prints Markdown tables
//! for `docs/benchmarks.md`: latency (median over rounds of the mean time per
//! iteration within a round), then throughput on every core with
//! `max_concurrent_calls` calls in flight, and the process's RSS with the
//! instance pool full.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dial_host::config::HandlersConfig;
use dial_host::handlers::{
    Checked, FileEntry, FileSource, Handler as WasmHandler, HandlerRegistry, InMemoryFiles, Mutation, ResourceInfo,
    Runtime, RuntimeLimits,
};
use dial_skill_handler as native;
use native::sdk::{Handler, MemoryFiles};

const ROUNDS: usize = 15;
const ROUND_TIME: Duration = Duration::from_millis(200);

/// A typical SKILL.md: about 2 KiB, frontmatter with metadata, Markdown body.
fn skill_md() -> String {
    let mut text = String::from(
        "---\nname: pdf-processing\ndescription: Extract text and tables from PDF files, fill PDF forms, and merge documents. Use when working with PDF files or when the user mentions PDFs, forms, or document extraction.\nlicense: Apache-2.0\ncompatibility: Requires python3 and the pypdf package\nmetadata:\n  author: example-org\n  version: \"1.4.2\"\nallowed-tools: Bash(python3:*) Read\n---\n# PDF processing\n\n",
    );
    while text.len() < 2048 {
        text.push_str("## Step\n\nRun `scripts/extract.py <file>` to pull text out of a PDF; check the output for tables and hand them to `scripts/tables.py`.\n\n");
    }
    text
}

fn skill_files(extra_files: usize) -> InMemoryFiles {
    let mut files = InMemoryFiles::new();
    files.insert("SKILL.md", skill_md());
    for i in 0..extra_files {
        files.insert(format!("scripts/tool_{i}.py"), format!("print('tool {i}')\n").repeat(64));
    }
    files
}

/// Median of the per-iteration mean over rounds. Each round is timed by the
/// time this thread spent on a CPU (`/proc/thread-self/schedstat`; all of a
/// latency case's work, host and guest, runs on it), so other processes
/// taking the CPU away do not count; where that file is missing, by the wall
/// clock.
fn measure(mut iteration: impl FnMut()) -> Duration {
    warm_up(&mut iteration);
    let mut per_round: Vec<Duration> = (0..ROUNDS).map(|_| round(&mut iteration)).collect();
    per_round.sort();
    per_round[ROUNDS / 2]
}

/// A case beside its native baseline: their rounds alternate, so both see
/// the machine in the same state (a shared VM's speed drifts by a third
/// within a minute, which measuring one after the other mistakes for a
/// difference between them). Medians of each, and the median of the
/// per-round ratios.
fn measure_beside(mut native: impl FnMut(), mut wasm: impl FnMut()) -> (Duration, Duration, f64) {
    warm_up(&mut native);
    warm_up(&mut wasm);
    let (mut natives, mut wasms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (n, w) = (round(&mut native), round(&mut wasm));
        ratios.push(w.as_secs_f64() / n.as_secs_f64());
        natives.push(n);
        wasms.push(w);
    }
    natives.sort();
    wasms.sort();
    ratios.sort_by(f64::total_cmp);
    (natives[ROUNDS / 2], wasms[ROUNDS / 2], ratios[ROUNDS / 2])
}

fn warm_up(iteration: &mut impl FnMut()) {
    for _ in 0..50 {
        iteration();
    }
}

/// One round: the mean time per iteration over [`ROUND_TIME`].
fn round(iteration: &mut impl FnMut()) -> Duration {
    let start = Instant::now();
    let cpu_start = thread_cpu_time();
    let mut count = 0u32;
    while start.elapsed() < ROUND_TIME {
        iteration();
        count += 1;
    }
    let spent = match (cpu_start, thread_cpu_time()) {
        (Some(from), Some(to)) => to.saturating_sub(from),
        _ => start.elapsed(),
    };
    spent / count
}

/// Time the calling thread has run on a CPU, from Linux's schedstat.
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// `-- profile-fixed` / `-- profile-commit` / `-- profile-commit-1.1`: call
/// one case in a loop for [`PROFILE_TIME`] and print nothing else, for `perf
/// record` / `perf stat` / `strace -c` on the bench binary.
const PROFILE_TIME: Duration = Duration::from_secs(10);
/// How long each throughput case runs.
const THROUGHPUT_TIME: Duration = Duration::from_secs(3);

fn resource() -> ResourceInfo {
    ResourceInfo { name: "pdf-processing".into(), path: "team/pdf-processing".into() }
}

fn skills(runtime: &tokio::runtime::Runtime, config: &HandlersConfig) -> (WasmHandler, bool) {
    let wasm_runtime = Runtime::new(RuntimeLimits::from_config(config), None, true).unwrap();
    let pooling = wasm_runtime.uses_pooling();
    let registry = runtime.block_on(HandlerRegistry::load(wasm_runtime, config)).unwrap();
    (registry.get("skills").unwrap(), pooling)
}

/// One commit's handler work through `check` (one call).
async fn commit(skills: &WasmHandler, entries: &[FileEntry], source: &Arc<dyn FileSource>) {
    let checked = skills.check(&resource(), entries, source.clone()).await.unwrap();
    assert!(matches!(checked, Checked::Valid { .. }));
    black_box(checked);
}

/// One commit's handler work as a 1.1 component costs it: two calls.
async fn commit_two_calls(skills: &WasmHandler, entries: &[FileEntry], source: &Arc<dyn FileSource>) {
    let verdict = skills.validate(&resource(), entries, source.clone()).await.unwrap();
    let metadata = skills.build_marker_metadata(&resource(), entries, source.clone()).await.unwrap().unwrap();
    black_box((verdict, metadata));
}

fn profile(case: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (skills, _) = skills(&runtime, &HandlersConfig::default());
    let files = skill_files(0);
    let entries: Vec<FileEntry> = files.entries();
    let source: Arc<dyn FileSource> = Arc::new(files);
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < PROFILE_TIME {
        runtime.block_on(async {
            match case {
                "profile-fixed" => {
                    black_box(skills.validate_file_mutation("scripts/a.py", Mutation::Put).await.unwrap()).unwrap()
                }
                "profile-commit-1.1" => commit_two_calls(&skills, &entries, &source).await,
                _ => commit(&skills, &entries, &source).await,
            }
        });
        calls += 1;
    }
    eprintln!("{case}: {calls} iterations, {:.1} µs each", start.elapsed().as_secs_f64() * 1e6 / calls as f64);
}

/// The native file set: same bytes, same chunking contract as the host import.
fn native_files(runtime: &tokio::runtime::Runtime, files: &InMemoryFiles) -> MemoryFiles {
    let mut native_files = MemoryFiles::new();
    for entry in &files.entries() {
        let bytes = runtime.block_on(files.read(&entry.path, 0, u32::MAX)).unwrap();
        native_files.insert(entry.path.clone(), bytes.to_vec());
    }
    native_files
}

fn native_resource() -> native::sdk::ResourceInfo {
    native::sdk::ResourceInfo::at(&resource().path)
}

fn latency(runtime: &tokio::runtime::Runtime) {
    println!("| case | memory kept resident | native | wasm (fresh instance per call) | ratio wasm/native |");
    println!("|---|---|---|---|---|");
    let mut pooling = false;
    for (label, extra) in [("2 KiB SKILL.md", 0), ("10-file skill", 9)] {
        let files = skill_files(extra);
        let entries: Vec<FileEntry> = files.entries();
        let mut native_files = native_files(runtime, &files);
        let source: Arc<dyn FileSource> = Arc::new(files);

        // The pooling allocator's reset of a slot: returned to the kernel
        // (0), or kept resident and reset in place (the default where the
        // kernel has PAGEMAP_SCAN).
        for keep_resident_kib in [None, Some(0u64)] {
            let config = HandlersConfig { memory_keep_resident_kib: keep_resident_kib, ..HandlersConfig::default() };
            let resident = RuntimeLimits::from_config(&config).memory_keep_resident_bytes >> 10;
            let (skills, uses_pooling) = skills(runtime, &config);
            pooling = uses_pooling;
            let check = measure_beside(
                || {
                    black_box(native::SkillHandler::check(&native_resource(), &mut native_files).unwrap());
                },
                || runtime.block_on(commit(&skills, &entries, &source)),
            );
            let two = measure_beside(
                || {
                    let warnings = native::SkillHandler::validate(&native_resource(), &mut native_files).unwrap();
                    let metadata = native::SkillHandler::metadata(&native_resource(), &mut native_files).unwrap();
                    black_box((warnings, metadata));
                },
                || runtime.block_on(commit_two_calls(&skills, &entries, &source)),
            );
            let row = |case: &str, (native, wasm, ratio): (Duration, Duration, f64)| {
                println!("| {case}, {label} | {resident} KiB | {} | {} | {ratio:.2}× |", micros(native), micros(wasm));
            };
            row("commit: `check` (WIT 1.2, one call)", check);
            row("commit: `validate` + `build-marker-metadata` (1.1, two calls)", two);
            if extra == 0 {
                let trivial = measure(|| {
                    runtime.block_on(async {
                        black_box(skills.validate_file_mutation("scripts/a.py", Mutation::Put).await.unwrap()).unwrap();
                    })
                });
                println!(
                    "| validate-file-mutation (no work: the fixed cost of one call) | {resident} KiB | – | {} | – |",
                    micros(trivial)
                );
            }
        }
    }
    println!();
    println!(
        "pooling allocator: {pooling}; {ROUNDS} rounds × {} ms per case, native and wasm rounds alternating; medians of round means, ratio = median of the per-round ratios; time on CPU: {}",
        ROUND_TIME.as_millis(),
        if thread_cpu_time().is_some() { "this thread's (schedstat)" } else { "wall clock" }
    );
}

/// `VmRSS` and `VmHWM` of this process, in MiB.
fn rss_mib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            >> 10
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Commits per second on every core: native threads calling `check` in a
/// loop, then `max_concurrent_calls` tasks in flight on a multi-threaded
/// runtime with a worker per core; RSS while the pool is full.
fn throughput() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let config = HandlersConfig::default();
    let in_flight = config.max_concurrent_calls as usize;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(cores).enable_all().build().unwrap();
    let (before_rss, _) = rss_mib();
    let (skills, _) = skills(&runtime, &config);
    let files = skill_files(0);
    let entries: Arc<Vec<FileEntry>> = Arc::new(files.entries());

    let native_calls: u64 = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..cores)
            .map(|_| {
                let mut native_files = native_files(&runtime, &files);
                scope.spawn(move || {
                    let start = Instant::now();
                    let mut calls = 0u64;
                    while start.elapsed() < THROUGHPUT_TIME {
                        black_box(native::SkillHandler::check(&native_resource(), &mut native_files).unwrap());
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    let native_rate = native_calls as f64 / THROUGHPUT_TIME.as_secs_f64();

    let source: Arc<dyn FileSource> = Arc::new(files);
    let peak_rss = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let wasm_calls: u64 = runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..in_flight {
            let (skills, entries, source) = (skills.clone(), entries.clone(), source.clone());
            tasks.spawn(async move {
                let start = Instant::now();
                let mut calls = 0u64;
                while start.elapsed() < THROUGHPUT_TIME {
                    commit(&skills, &entries, &source).await;
                    calls += 1;
                }
                calls
            });
        }
        // Sampled while every slot is busy.
        let sampler = {
            let peak_rss = peak_rss.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    peak_rss.fetch_max(rss_mib().0, std::sync::atomic::Ordering::Relaxed);
                }
            })
        };
        let mut total = 0;
        while let Some(calls) = tasks.join_next().await {
            total += calls.unwrap();
        }
        sampler.abort();
        total
    });
    let wasm_rate = wasm_calls as f64 / THROUGHPUT_TIME.as_secs_f64();
    println!("| case | calls in flight | commits/s | ratio wasm/native |");
    println!("|---|---|---|---|");
    println!("| native `check`, {cores} threads | {cores} | {native_rate:.0} | – |");
    println!(
        "| wasm `check`, fresh instance per call, {cores} workers | {in_flight} | {wasm_rate:.0} | {:.2}× slower |",
        native_rate / wasm_rate
    );
    println!();
    let peak = peak_rss.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "RSS: {before_rss} MiB before the engine, {peak} MiB at most while {in_flight} instances ran (sampled every 100 ms); \
         {} s per case",
        THROUGHPUT_TIME.as_secs()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(case) = args.iter().find(|a| a.starts_with("profile-")) {
        return profile(case);
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if !args.iter().any(|a| a == "throughput") {
        latency(&runtime);
        println!();
    }
    drop(runtime);
    throughput();
}
