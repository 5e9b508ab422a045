//! The skill handler's `validate` + `build-marker-metadata`, called through
//! the WebAssembly runtime (fresh instance per call, as the server does)
//! versus the same Rust rules called natively, in one run.
//!
//! `cargo bench -p dial-host --bench skill_handler` prints a Markdown table
//! for `docs/benchmarks.md`. Each figure is the median over rounds of the
//! mean time per iteration within a round.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dial_host::config::HandlersConfig;
use dial_host::handlers::{
    FileEntry, FileSource, HandlerRegistry, InMemoryFiles, Mutation, ResourceInfo, Runtime, RuntimeLimits,
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

/// Median of the per-iteration mean over rounds.
fn measure(mut iteration: impl FnMut()) -> Duration {
    for _ in 0..50 {
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

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// `-- profile-fixed` / `-- profile-commit`: call one case in a loop for
/// [`PROFILE_TIME`] and print nothing else, for `perf record` / `perf stat`
/// / `strace -c` on the bench binary.
const PROFILE_TIME: Duration = Duration::from_secs(10);

fn profile(case: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let resource = ResourceInfo { name: "pdf-processing".into(), path: "team/pdf-processing".into() };
    let config = HandlersConfig::default();
    let wasm_runtime = Runtime::new(RuntimeLimits::from_config(&config), None, true).unwrap();
    let registry = runtime.block_on(HandlerRegistry::load(wasm_runtime, &config)).unwrap();
    let skills = registry.get("skills").unwrap();
    let files = skill_files(0);
    let entries: Vec<FileEntry> = files.entries();
    let source: Arc<dyn FileSource> = Arc::new(files);
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < PROFILE_TIME {
        runtime.block_on(async {
            if case == "profile-fixed" {
                black_box(skills.validate_file_mutation("scripts/a.py", Mutation::Put).await.unwrap()).unwrap();
            } else {
                let verdict = skills.validate(&resource, &entries, source.clone()).await.unwrap();
                let metadata =
                    skills.build_marker_metadata(&resource, &entries, source.clone()).await.unwrap().unwrap();
                black_box((verdict, metadata));
            }
        });
        calls += 1;
    }
    eprintln!("{case}: {calls} iterations, {:.1} µs each", start.elapsed().as_secs_f64() * 1e6 / calls as f64);
}

fn main() {
    if let Some(case) = std::env::args().skip(1).find(|a| a.starts_with("profile-")) {
        return profile(&case);
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let resource = ResourceInfo { name: "pdf-processing".into(), path: "team/pdf-processing".into() };
    let native_resource = native::sdk::ResourceInfo { name: resource.name.clone(), path: resource.path.clone() };

    println!(
        "| case | memory kept resident | native | wasm (fresh instance per call) | ratio wasm/native | overhead per call |"
    );
    println!("|---|---|---|---|---|---|");
    let mut pooling = false;
    for (label, extra) in [("2 KiB SKILL.md", 0), ("10-file skill", 9)] {
        let files = skill_files(extra);
        let entries: Vec<FileEntry> = files.entries();
        // The native file set: same bytes, same chunking contract as the host import.
        let mut native_files = MemoryFiles::new();
        for entry in &entries {
            let bytes = runtime.block_on(files.read(&entry.path, 0, u32::MAX)).unwrap();
            native_files.insert(entry.path.clone(), bytes.to_vec());
        }
        let source: Arc<dyn FileSource> = Arc::new(files);

        let native_time = measure(|| {
            let warnings = native::SkillHandler::validate(&native_resource, &mut native_files).unwrap();
            let metadata = native::SkillHandler::metadata(&native_resource, &mut native_files).unwrap();
            black_box((warnings, metadata));
        });
        // The pooling allocator's reset of an instance's memory: returned to
        // the kernel (0) or kept resident and zeroed with memset.
        for keep_resident_kib in [0u64, 256, 1024] {
            let config =
                HandlersConfig { memory_keep_resident_kib: Some(keep_resident_kib), ..HandlersConfig::default() };
            let wasm_runtime = Runtime::new(RuntimeLimits::from_config(&config), None, true).unwrap();
            pooling = wasm_runtime.uses_pooling();
            let registry = runtime.block_on(HandlerRegistry::load(wasm_runtime, &config)).unwrap();
            let skills = registry.get("skills").unwrap();
            let wasm_time = measure(|| {
                runtime.block_on(async {
                    let verdict = skills.validate(&resource, &entries, source.clone()).await.unwrap();
                    let metadata =
                        skills.build_marker_metadata(&resource, &entries, source.clone()).await.unwrap().unwrap();
                    black_box((verdict, metadata));
                })
            });
            let ratio = wasm_time.as_secs_f64() / native_time.as_secs_f64();
            // Two handler calls per iteration.
            let overhead = wasm_time.saturating_sub(native_time) / 2;
            println!(
                "| validate + build-marker-metadata, {label} | {keep_resident_kib} KiB | {} | {} | {ratio:.2}× | {} |",
                micros(native_time),
                micros(wasm_time),
                micros(overhead)
            );
            if extra == 0 {
                let trivial = measure(|| {
                    runtime.block_on(async {
                        black_box(skills.validate_file_mutation("scripts/a.py", Mutation::Put).await.unwrap()).unwrap();
                    })
                });
                println!(
                    "| validate-file-mutation (no work: the fixed cost of one call) | {keep_resident_kib} KiB | – | {} | – | {} |",
                    micros(trivial),
                    micros(trivial)
                );
            }
        }
    }
    println!();
    println!(
        "pooling allocator: {pooling}; {ROUNDS} rounds × {} ms per case; median of round means",
        ROUND_TIME.as_millis()
    );
}
