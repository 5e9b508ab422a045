//! A JavaScript handler (componentize-js: SpiderMonkey and the module in one
//! 12 MB component, `examples/handlers/js-openapi-tools`) against the Rust
//! skill handler (about 240 KB), in one run, the way the server runs them
//! (pooling allocator, fresh instance per call, default limits): load time
//! cold (compile) and from the compiled cache, memory per idle loaded type,
//! memory per call, and the cost of a commit's `check` (native skill rules
//! as the baseline).
//!
//! `scripts/test` (or `npm ci && node build.mjs --out …` in the example)
//! builds the component into `<target>/handler-js/openapi-tools.wasm`;
//! `DIAL_BENCH_JS_HANDLER=<file>` names another. Then
//! `cargo bench -p dial-host --bench js_handler` prints Markdown tables for
//! `docs/benchmarks.md`.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dial_host::config::HandlersConfig;
use dial_host::handlers::{
    BUILTIN_SKILL_HANDLER, CacheConfig, Checked, FileEntry, FileSource, Handler, HandlerSource, InMemoryFiles,
    Mutation, ResourceInfo, Runtime, RuntimeLimits,
};
use dial_skill_handler as native;
use native::sdk::{Handler as _, MemoryFiles};

const ROUNDS: usize = 15;
const ROUND_TIME: Duration = Duration::from_millis(200);
/// Loads from the cache per component, for the idle-memory figure.
const IDLE_COPIES: usize = 8;

fn js_component() -> Vec<u8> {
    let path = std::env::var_os("DIAL_BENCH_JS_HANDLER").map_or_else(
        || PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../handler-js/openapi-tools.wasm"),
        PathBuf::from,
    );
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; build it with scripts/test (or set DIAL_BENCH_JS_HANDLER)", path.display())
    })
}

/// The skill of `skill_handler.rs`: a 2 KiB SKILL.md.
fn skill_files() -> InMemoryFiles {
    let mut text = String::from(
        "---\nname: pdf-processing\ndescription: Extract text and tables from PDF files, fill PDF forms, and merge documents. Use when working with PDF files or when the user mentions PDFs, forms, or document extraction.\nlicense: Apache-2.0\nmetadata:\n  author: example-org\n  version: \"1.4.2\"\n---\n# PDF processing\n\n",
    );
    while text.len() < 2048 {
        text.push_str("## Step\n\nRun `scripts/extract.py <file>` to pull text out of a PDF.\n\n");
    }
    let mut files = InMemoryFiles::new();
    files.insert("SKILL.md", text);
    files
}

/// An `openapi.json` of `operations` operations, each with a `$ref`.
fn tool_files(operations: usize) -> InMemoryFiles {
    let mut paths = Vec::new();
    for i in 0..operations {
        paths.push(format!(
            r##""/items{i}/{{id}}": {{"get": {{"operationId": "getItem{i}", "summary": "Get item {i}", "parameters": [{{"name": "id", "in": "path", "required": true, "schema": {{"type": "string"}}}}], "responses": {{"200": {{"description": "The item", "content": {{"application/json": {{"schema": {{"$ref": "#/components/schemas/Item"}}}}}}}}}}}}}}"##
        ));
    }
    let spec = format!(
        r##"{{"openapi": "3.1.0", "info": {{"title": "Items", "version": "1.0.0"}}, "servers": [{{"url": "https://items.example.com"}}], "paths": {{{}}}, "components": {{"schemas": {{"Item": {{"type": "object", "properties": {{"id": {{"type": "string"}}, "name": {{"type": "string"}}}}}}}}}}}}"##,
        paths.join(", ")
    );
    let mut files = InMemoryFiles::new();
    files.insert("openapi.json", spec);
    files
}

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

/// `VmRSS` and `VmHWM` of this process, in KiB.
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn runtime(cache: &std::path::Path) -> Arc<Runtime> {
    let limits = RuntimeLimits::from_config(&HandlersConfig::default());
    Runtime::new(limits, Some(CacheConfig::new(cache.to_path_buf(), "bench")), true).unwrap()
}

struct Measured {
    cold: Duration,
    cached: Duration,
    idle_kib: u64,
    handler: Handler,
}

/// Loads `wasm` cold (fresh cache), then [`IDLE_COPIES`] times from the cache
/// into another runtime, keeping them loaded.
fn load(rt: &tokio::runtime::Runtime, wasm: &[u8], source: HandlerSource) -> Measured {
    let cache = tempfile::tempdir().unwrap();
    let cold_runtime = runtime(cache.path());
    let start = Instant::now();
    let loaded = rt.block_on(cold_runtime.load(wasm.to_vec(), source.clone())).unwrap();
    let cold = start.elapsed();
    drop(loaded);
    drop(cold_runtime);

    let warm = runtime(cache.path());
    let mut kept = Vec::new();
    let mut cached = Vec::new();
    let (before, _) = memory_kib();
    for _ in 0..IDLE_COPIES {
        let start = Instant::now();
        kept.push(rt.block_on(warm.load(wasm.to_vec(), source.clone())).unwrap());
        cached.push(start.elapsed());
    }
    let (after, _) = memory_kib();
    cached.sort();
    let handler = Handler::new(kept.pop().unwrap(), warm, &HandlersConfig::default());
    std::mem::forget(kept); // stay loaded, as idle types in a registry do
    Measured {
        cold,
        cached: cached[IDLE_COPIES / 2],
        idle_kib: after.saturating_sub(before) / IDLE_COPIES as u64,
        handler,
    }
}

async fn commit(handler: &Handler, resource: &ResourceInfo, entries: &[FileEntry], source: &Arc<dyn FileSource>) {
    let checked = handler.check(resource, entries, source.clone()).await.unwrap();
    assert!(matches!(checked, Checked::Valid { .. }), "{checked:?}");
    black_box(checked);
}

/// Peak RSS growth over one call (the instance's memory, pooled slot included).
fn per_call_kib(call: impl Fn()) -> u64 {
    call(); // the first call may map the slot
    reset_peak();
    let (before, _) = memory_kib();
    call();
    let (_, peak) = memory_kib();
    peak.saturating_sub(before)
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let js = js_component();
    let skill = load(&rt, BUILTIN_SKILL_HANDLER, HandlerSource::Builtin);
    let tool = load(&rt, &js, HandlerSource::File("openapi-tools.wasm".into()));

    println!("| component | size | load, cold (compile) | load from the compiled cache | RSS per idle loaded type |");
    println!("|---|---|---|---|---|");
    for (name, size, m) in
        [("Rust skill handler", BUILTIN_SKILL_HANDLER.len(), &skill), ("JavaScript openapi-tool", js.len(), &tool)]
    {
        println!(
            "| {name} | {:.2} MiB | {} | {} | {:.1} MiB |",
            size as f64 / (1 << 20) as f64,
            millis(m.cold),
            millis(m.cached),
            m.idle_kib as f64 / 1024.0
        );
    }
    println!(
        "\nratios JavaScript/Rust: cold load {:.1}×, cached load {:.1}×, idle memory {:.1}×\n",
        tool.cold.as_secs_f64() / skill.cold.as_secs_f64(),
        tool.cached.as_secs_f64() / skill.cached.as_secs_f64(),
        tool.idle_kib as f64 / skill.idle_kib.max(1) as f64
    );

    let skill_resource = ResourceInfo { name: "pdf-processing".into(), path: "team/pdf-processing".into() };
    let tool_resource = ResourceInfo { name: "items".into(), path: "team/items".into() };
    let skill_files = skill_files();
    let mut native_files = MemoryFiles::new();
    for entry in skill_files.entries() {
        let bytes = rt.block_on(skill_files.read(&entry.path, 0, u32::MAX)).unwrap();
        native_files.insert(entry.path.clone(), bytes.to_vec());
    }
    let native_resource = native::sdk::ResourceInfo::at(&skill_resource.path);
    let native = measure(|| {
        black_box(native::SkillHandler::check(&native_resource, &mut native_files).unwrap());
    });

    println!(
        "| case | input | time per call | memory per call (peak RSS growth) | ratio to native skill `check` | ratio to wasm skill `check` |"
    );
    println!("|---|---|---|---|---|---|");
    println!("| native skill `check` (baseline) | 2 KiB SKILL.md | {} | – | 1.00× | – |", micros(native));
    let skill_entries = skill_files.entries();
    let skill_source: Arc<dyn FileSource> = Arc::new(skill_files);
    let skill_call = || rt.block_on(commit(&skill.handler, &skill_resource, &skill_entries, &skill_source));
    let skill_time = measure(skill_call);
    let skill_memory = per_call_kib(skill_call);
    let row = |case: &str, input: &str, time: Duration, kib: Option<u64>| {
        let memory = kib.map_or("–".to_string(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0));
        println!(
            "| {case} | {input} | {} | {memory} | {:.1}× | {:.1}× |",
            micros(time),
            time.as_secs_f64() / native.as_secs_f64(),
            time.as_secs_f64() / skill_time.as_secs_f64()
        );
    };
    row("Rust skill handler `check`", "2 KiB SKILL.md", skill_time, Some(skill_memory));
    for operations in [3, 100] {
        let files = tool_files(operations);
        let size = files.entries()[0].size;
        let entries = files.entries();
        let source: Arc<dyn FileSource> = Arc::new(files);
        let call = || rt.block_on(commit(&tool.handler, &tool_resource, &entries, &source));
        let time = measure(call);
        let memory = per_call_kib(call);
        row(
            "JavaScript openapi-tool `check`",
            &format!("openapi.json, {operations} operations, {:.1} KiB", size as f64 / 1024.0),
            time,
            Some(memory),
        );
    }
    for (name, handler, path) in
        [("Rust skill", &skill.handler, "scripts/a.py"), ("JavaScript openapi-tool", &tool.handler, "README.md")]
    {
        let fixed = measure(|| {
            rt.block_on(async {
                black_box(handler.validate_file_mutation(path, Mutation::Put).await.unwrap()).unwrap()
            })
        });
        row(&format!("{name} `validate-file-mutation` (the fixed cost of a call)"), "–", fixed, None);
    }
    println!(
        "\n{ROUNDS} rounds × {} ms per case, median of round means; idle memory: RSS growth over {IDLE_COPIES} \
         loads from the cache, per load",
        ROUND_TIME.as_millis()
    );
}
