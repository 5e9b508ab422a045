//! A handler written in Python (`examples/handlers/python-datasets`, built
//! with componentize-py) beside the built-in Rust skill handler, in one run:
//! component load cold (compile) and from the disk cache, memory of an idle
//! loaded type and per call in flight, and the cost per `check` (plus the
//! fixed cost of a call that does nothing).
//!
//! `cargo bench -p dial-host --bench python_handler` builds the Python
//! component first with `scripts/build-python-handlers` (componentize-py
//! from `.venv-componentize`, which `scripts/test` installs) and prints
//! Markdown tables for `docs/benchmarks.md`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dial_host::config::HandlersConfig;
use dial_host::handlers::{
    BUILTIN_SKILL_HANDLER, CacheConfig, Checked, FileEntry, FileSource, Handler, HandlerSource, InMemoryFiles,
    Mutation, ResourceInfo, Runtime, RuntimeLimits,
};

const ROUNDS: usize = 9;
const ROUND_TIME: Duration = Duration::from_millis(300);
const CACHED_LOADS: usize = 5;
const IDLE_COPIES: usize = 4;
const IN_FLIGHT: usize = 8;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn python_component() -> Vec<u8> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("wasm-examples/python");
    let status = std::process::Command::new(workspace().join("scripts/build-python-handlers"))
        .arg(&dir)
        .status()
        .expect("run scripts/build-python-handlers");
    assert!(status.success(), "building the Python handlers failed (is componentize-py installed? run scripts/test)");
    std::fs::read(dir.join("datasets.wasm")).unwrap()
}

/// Median of the per-iteration mean over rounds.
fn measure(mut iteration: impl FnMut()) -> Duration {
    for _ in 0..20 {
        iteration();
    }
    let mut per_round = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut count = 0u32;
        while start.elapsed() < ROUND_TIME {
            iteration();
            count += 1;
        }
        per_round.push(start.elapsed() / count);
    }
    per_round.sort();
    per_round[ROUNDS / 2]
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// `VmRSS` of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
}

fn mib(kib: i64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn runtime_with_cache(dir: &Path) -> Arc<Runtime> {
    let config = HandlersConfig::default();
    Runtime::new(RuntimeLimits::from_config(&config), Some(CacheConfig::new(dir.to_path_buf(), "bench")), true).unwrap()
}

fn load(tokio: &tokio::runtime::Runtime, runtime: &Arc<Runtime>, wasm: &[u8], name: &str) -> Handler {
    let source = HandlerSource::File(PathBuf::from(name));
    let loaded = tokio.block_on(runtime.load(wasm.to_vec(), source)).unwrap();
    Handler::new(loaded, runtime.clone(), &HandlersConfig::default())
}

/// What one commit of each type reads: a typical skill, a small dataset.
fn skill_files() -> (ResourceInfo, InMemoryFiles) {
    let mut text = String::from(
        "---\nname: pdf-processing\ndescription: Extract text and tables from PDF files.\nlicense: Apache-2.0\nmetadata:\n  version: \"1.4.2\"\n---\n# PDF processing\n\n",
    );
    while text.len() < 2048 {
        text.push_str("## Step\n\nRun `scripts/extract.py <file>` to pull text out of a PDF.\n\n");
    }
    let mut files = InMemoryFiles::new();
    files.insert("SKILL.md", text);
    (ResourceInfo { name: "pdf-processing".into(), path: "team/pdf-processing".into() }, files)
}

fn dataset_files(rows: usize) -> (ResourceInfo, InMemoryFiles) {
    let card = r#"{"name": "tickets", "description": "Support tickets.", "license": "CC-BY-4.0",
        "columns": [{"name": "id", "type": "integer"}, {"name": "text", "type": "string"},
                    {"name": "tags", "type": "array", "required": false}]}"#;
    let mut data = String::new();
    for i in 0..rows {
        data.push_str(&format!(
            "{{\"id\": {i}, \"text\": \"Ticket number {i}: the printer is on fire\", \"tags\": [\"hw\"]}}\n"
        ));
    }
    let mut files = InMemoryFiles::new();
    files.insert("dataset.json", card);
    files.insert("data/train.jsonl", data);
    (ResourceInfo { name: "tickets".into(), path: "team/tickets".into() }, files)
}

async fn check(handler: &Handler, resource: &ResourceInfo, entries: &[FileEntry], source: &Arc<dyn FileSource>) {
    let checked = handler.check(resource, entries, source.clone()).await.unwrap();
    assert!(matches!(checked, Checked::Valid { .. }), "{checked:?}");
    black_box(checked);
}

struct Case {
    label: &'static str,
    wasm: Vec<u8>,
    files: (ResourceInfo, InMemoryFiles),
}

fn main() {
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cases = [
        Case { label: "Rust skill handler", wasm: BUILTIN_SKILL_HANDLER.to_vec(), files: skill_files() },
        Case { label: "Python datasets handler", wasm: python_component(), files: dataset_files(100) },
    ];

    println!("| handler | component | load, cold (compile) | load, from the disk cache | idle loaded type (RSS) |");
    println!("|---|---|---|---|---|");
    let mut handlers = Vec::new();
    for case in &cases {
        let cache = tempfile::tempdir().unwrap();
        let runtime = runtime_with_cache(cache.path());
        let start = Instant::now();
        drop(load(&tokio, &runtime, &case.wasm, case.label));
        let cold = start.elapsed();
        let mut cached = Vec::new();
        for _ in 0..CACHED_LOADS {
            let runtime = runtime_with_cache(cache.path());
            let start = Instant::now();
            let handler = load(&tokio, &runtime, &case.wasm, case.label);
            cached.push(start.elapsed());
            assert!(handler.from_cache());
        }
        cached.sort();
        // Idle: what several loaded copies keep, per copy.
        let runtime = runtime_with_cache(cache.path());
        drop(load(&tokio, &runtime, &case.wasm, case.label));
        let before = rss_kib() as i64;
        let copies: Vec<Handler> = (0..IDLE_COPIES).map(|_| load(&tokio, &runtime, &case.wasm, case.label)).collect();
        let idle = (rss_kib() as i64 - before) / IDLE_COPIES as i64;
        println!(
            "| {} | {:.1} MB | {} | {} | {} |",
            case.label,
            case.wasm.len() as f64 / 1e6,
            millis(cold),
            millis(cached[CACHED_LOADS / 2]),
            mib(idle)
        );
        drop(copies);
        handlers.push((load(&tokio, &runtime, &case.wasm, case.label), runtime, cache));
    }
    println!();
    println!(
        "cold: one load into an empty cache (compile + cache write + `describe`); cached: median of {CACHED_LOADS} \
         loads by a fresh engine; idle: RSS growth per copy over {IDLE_COPIES} copies loaded from the cache"
    );
    println!();

    println!("| handler | case | per call | ratio to the Rust handler |");
    println!("|---|---|---|---|");
    let mut baseline = [Duration::ZERO; 2];
    for (index, (case, (handler, _, _))) in cases.iter().zip(&handlers).enumerate() {
        let (resource, files) = &case.files;
        let entries = files.entries();
        let source: Arc<dyn FileSource> = Arc::new(files.clone());
        let commit = measure(|| tokio.block_on(check(handler, resource, &entries, &source)));
        let fixed = measure(|| {
            tokio.block_on(async {
                black_box(handler.validate_file_mutation("README.md", Mutation::Put).await.unwrap()).unwrap();
            })
        });
        let what = if index == 0 { "`check`, 2 KiB SKILL.md" } else { "`check`, card + 100 rows (8 KiB)" };
        for (slot, (name, time)) in
            [(what, commit), ("validate-file-mutation (the fixed cost of a call)", fixed)].into_iter().enumerate()
        {
            if index == 0 {
                baseline[slot] = time;
            }
            let ratio = time.as_secs_f64() / baseline[slot].as_secs_f64();
            println!("| {} | {name} | {} | {ratio:.1}× |", case.label, millis(time));
        }
    }
    // How many rows fit in the CPU deadline: the Python check of bigger datasets.
    let (python, _, _) = &handlers[1];
    for rows in [10_000, 50_000] {
        let (resource, files) = dataset_files(rows);
        let bytes: u64 = files.entries().iter().map(|e| e.size).sum();
        let entries = files.entries();
        let source: Arc<dyn FileSource> = Arc::new(files);
        let start = Instant::now();
        let outcome = tokio.block_on(python.check(&resource, &entries, source));
        let elapsed = start.elapsed();
        let said = match outcome {
            Ok(Checked::Valid { .. }) => "valid".to_string(),
            Ok(Checked::Invalid { problems }) => format!("invalid: {}", problems[0].message),
            Err(error) => error.to_string(),
        };
        println!(
            "| Python datasets handler | `check`, {rows} rows ({:.1} MiB), one call | {} | {said} |",
            bytes as f64 / 1048576.0,
            millis(elapsed)
        );
    }
    println!();

    // Memory per call in flight: IN_FLIGHT calls at once on a multi-threaded runtime.
    println!("| handler | calls in flight | RSS growth while they run, per call |");
    println!("|---|---|---|");
    drop(tokio);
    for (case, (handler, _, _)) in cases.iter().zip(&handlers) {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap();
        let (resource, files) = &case.files;
        let entries = Arc::new(files.entries());
        let source: Arc<dyn FileSource> = Arc::new(files.clone());
        let idle = rss_kib() as i64;
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
        multi.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..IN_FLIGHT {
                let (handler, resource, entries, source) =
                    (handler.clone(), resource.clone(), entries.clone(), source.clone());
                tasks.spawn(async move {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_secs(2) {
                        check(&handler, &resource, &entries, &source).await;
                    }
                });
            }
            let sampler = {
                let peak = peak.clone();
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        peak.fetch_max(rss_kib(), std::sync::atomic::Ordering::Relaxed);
                    }
                })
            };
            while let Some(done) = tasks.join_next().await {
                done.unwrap();
            }
            sampler.abort();
        });
        let grown = peak.load(std::sync::atomic::Ordering::Relaxed) as i64 - idle;
        println!("| {} | {IN_FLIGHT} | {} |", case.label, mib(grown / IN_FLIGHT as i64));
    }
    println!();
    println!(
        "pooling allocator, memory_limit_mib 64, memory kept resident per slot: {} KiB; {} cores",
        RuntimeLimits::from_config(&HandlersConfig::default()).memory_keep_resident_bytes >> 10,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
}
