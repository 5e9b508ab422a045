// Scratch A/B (not committed): the skill check through two runtimes/components, rounds interleaved.
// usage: abprobe [A.wasm|-] [B.wasm|-]   env for B's engine: SCRATCH_B_<X>=... (read by engine_config when SCRATCH_SIDE=B)
use dial_handler_runtime::config::HandlersConfig;
use dial_handler_runtime::*;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn skill_md() -> String {
    let mut text = String::from(
        "---\nname: pdf-processing\ndescription: Extract text and tables from PDF files, fill PDF forms, and merge documents. Use when working with PDF files or when the user mentions PDFs, forms, or document extraction.\nlicense: Apache-2.0\ncompatibility: Requires python3 and the pypdf package\nmetadata:\n  author: example-org\n  version: \"1.4.2\"\nallowed-tools: Bash(python3:*) Read\n---\n# PDF processing\n\n",
    );
    while text.len() < 2048 {
        text.push_str("## Step\n\nRun `scripts/extract.py <file>` to pull text out of a PDF; check the output for tables and hand them to `scripts/tables.py`.\n\n");
    }
    text
}
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    Duration::from_nanos(stat.split_whitespace().next().unwrap().parse().unwrap())
}
fn round(mut f: impl FnMut()) -> f64 {
    let s = Instant::now();
    let c = cpu();
    let mut n = 0u32;
    while s.elapsed() < Duration::from_millis(150) {
        f();
        n += 1;
    }
    (cpu() - c).as_secs_f64() * 1e6 / n as f64
}
fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}
fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let config = HandlersConfig::default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut handlers = vec![];
    for (side, path) in ["A", "B"].iter().zip(args.iter()) {
        unsafe { std::env::set_var("SCRATCH_SIDE", side) };
        let runtime = Runtime::new(RuntimeLimits::from_config(&config), None, true).unwrap();
        let bytes = if path == "-" { BUILTIN_SKILL_HANDLER.to_vec() } else { std::fs::read(path).unwrap() };
        let loaded = rt.block_on(runtime.load(bytes, HandlerSource::Builtin)).unwrap();
        handlers.push(Handler::new(loaded, runtime, &config));
    }
    let mut files = InMemoryFiles::new();
    files.insert("SKILL.md", skill_md());
    let entries = files.entries();
    let source: Arc<dyn FileSource> = Arc::new(files);
    let resource = ResourceInfo { name: "pdf-processing".into(), path: "team/pdf-processing".into() };
    let fixed = std::env::var_os("FIXED").is_some();
    let call = |h: &Handler| {
        rt.block_on(async {
            if fixed {
                black_box(h.validate_file_mutation("scripts/a.py", Mutation::Put).await.unwrap()).unwrap();
            } else {
                black_box(h.check(&resource, &entries, source.clone()).await.unwrap());
            }
        })
    };
    for h in &handlers {
        for _ in 0..500 {
            call(h);
        }
    }
    let (mut a, mut b, mut r) = (vec![], vec![], vec![]);
    for _ in 0..21 {
        let ta = round(|| call(&handlers[0]));
        let tb = round(|| call(&handlers[1]));
        a.push(ta);
        b.push(tb);
        r.push(tb / ta);
    }
    println!("A {:.1} µs  B {:.1} µs  median B/A {:.3}", med(a), med(b), med(r));
}
