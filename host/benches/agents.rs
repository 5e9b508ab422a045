//! Skills reaching agents (issue 39), each against a baseline measured in
//! the same run, on the real server (release build, local disk):
//!
//! 1. `sha256`: what hashing every file with SHA-256 beside MD5 adds to a
//!    whole PUT of a 100-file, 5 MiB skill — the hashing as the upload path
//!    does it (`DigestStream`, 1 MiB batches on the blocking pool) with and
//!    without SHA-256, over the same bytes, against the PUT's own time (an
//!    upper bound: the PUT hashes while its writes are in flight); and, with
//!    `BENCH_BEFORE_BINARY=<a build from before SHA-256 was kept>`, the same
//!    PUT on that server and on this one, alternated;
//! 2. `mcp-list`: a `skills/list` page of 100 from 1 000 skills of 3 files,
//!    warm, versus a `/v2` listing page of the same 100 (recursive, the
//!    resources' metadata), and the store reads a warm page costs;
//! 3. `index`: the well-known index of 1 000 public skills, warm, versus a
//!    `/v2` listing page of the same 1 000, and the store reads a warm index
//!    costs.
//!
//! `cargo bench -p dial-host --bench agents` prints Markdown tables for
//! `docs/benchmarks.md`; `… -- sha256` (or `mcp-list`, `index`) runs only the
//! items named.

mod common;
#[path = "../../tests/random_bytes.rs"]
mod random_bytes;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{API_KEY, ServerProcess, cpu_model, load_average, micros, nproc, percentile};
use dial_host::hashing::DigestStream;
use random_bytes::random_bytes;
use serde_json::{Value, json};

const COMMAND: &str = "cargo bench -p dial-host --bench agents";
const ADMIN_KEY: &str = "bench-admin-key";
const ITERATIONS: usize = 41;
/// Skills listed (item 2) and indexed (item 3).
const SKILLS: usize = 1000;

fn main() {
    let named: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    let wanted = |item: &str| named.is_empty() || named.iter().any(|name| name == item);
    println!("## `{COMMAND}`");
    println!();
    println!("machine: nproc {}, {}; load average (1/5/15 min) before: {}", nproc(), cpu_model(), load_average());
    println!();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    if wanted("sha256") {
        runtime.block_on(sha256_beside_md5());
    }
    if wanted("mcp-list") || wanted("index") {
        let dir = tempfile::tempdir().unwrap();
        let admin = format!("[keys.{ADMIN_KEY}]\nproject = \"bench-admin\"\nroles = [\"admin\"]\n");
        let server = ServerProcess::start(dir.path(), &admin);
        let client = reqwest::Client::new();
        if wanted("mcp-list") {
            runtime.block_on(mcp_list(&server, &client));
        }
        if wanted("index") {
            runtime.block_on(index(&server, &client));
        }
    }
    println!("load average after: {}", load_average());
}

fn skill_md(name: &str) -> Vec<u8> {
    format!(
        "---\nname: {name}\ndescription: The {name} skill. Use it for {name} things.\nlicense: MIT\n---\n# {name}\n"
    )
    .into_bytes()
}

async fn put(client: &reqwest::Client, server: &ServerProcess, key: &str, url: &str, files: &[(String, Vec<u8>)]) {
    let mut form = reqwest::multipart::Form::new();
    for (name, content) in files {
        form = form.part("file", reqwest::multipart::Part::bytes(content.clone()).file_name(name.clone()));
    }
    let reply = client.put(format!("{}{url}", server.url)).header("Api-Key", key).multipart(form).send().await;
    match reply {
        Ok(reply) if reply.status() == 200 => {}
        Ok(reply) => server.fail(&format!("PUT {url} answered {}", reply.status())),
        Err(error) => server.fail(&format!("PUT {url}: {error}")),
    }
}

/// `n` small skills of 3 files below `prefix` (a `/v2` URL), 8 PUTs at once.
async fn populate(client: &reqwest::Client, server: &ServerProcess, key: &str, prefix: &str, n: usize) {
    use futures_util::StreamExt;
    futures_util::stream::iter(0..n)
        .for_each_concurrent(8, |i| async move {
            let name = format!("skill-{i:04}");
            let files = vec![
                ("SKILL.md".to_string(), skill_md(&name)),
                ("scripts/run.py".to_string(), format!("print({i})\n").into_bytes()),
                ("references/notes.md".to_string(), format!("# Notes {i}\n").repeat(20).into_bytes()),
            ];
            put(client, server, key, &format!("{prefix}/{name}"), &files).await;
        })
        .await;
}

/// Median, p90 of `times`.
fn summary(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    (percentile(times, 0.5), percentile(times, 0.9))
}

/// Store reads `/metrics` counted so far (gets, ranged gets, heads).
async fn store_reads(client: &reqwest::Client, server: &ServerProcess) -> f64 {
    let text = client.get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    text.lines()
        .filter(|line| line.starts_with("dial_host_store_operations_total{"))
        .filter(|line| {
            ["get", "get_opts", "get_ranges", "head"].iter().any(|op| line.contains(&format!("operation=\"{op}\"")))
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Times `a` and `b` alternately, [`ITERATIONS`] each after a warm-up.
async fn alternate<A, B, FA, FB>(mut a: A, mut b: B) -> (Vec<Duration>, Vec<Duration>)
where
    A: FnMut() -> FA,
    B: FnMut() -> FB,
    FA: Future<Output = ()>,
    FB: Future<Output = ()>,
{
    for _ in 0..3 {
        a().await;
        b().await;
    }
    let (mut times_a, mut times_b) = (Vec::new(), Vec::new());
    for _ in 0..ITERATIONS {
        let started = Instant::now();
        a().await;
        times_a.push(started.elapsed());
        let started = Instant::now();
        b().await;
        times_b.push(started.elapsed());
    }
    (times_a, times_b)
}

/// Item 1.
async fn sha256_beside_md5() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "");
    let client = reqwest::Client::new();
    let bucket = server.bucket(&client).await;
    let mut files = vec![("SKILL.md".to_string(), skill_md("big"))];
    files.extend((0..99).map(|i| (format!("data/f{i:02}.bin"), random_bytes(i as u64, (5 << 20) / 99))));
    let total: usize = files.iter().map(|(_, content)| content.len()).sum();
    let chunks: Vec<Vec<Bytes>> =
        files.iter().map(|(_, content)| content.chunks(1 << 20).map(Bytes::copy_from_slice).collect()).collect();
    let hash = |with_sha256: bool| {
        let chunks = chunks.clone();
        async move {
            for file in chunks {
                let mut stream = if with_sha256 { DigestStream::md5_and_sha256() } else { DigestStream::md5() };
                for chunk in file {
                    stream.update(chunk).await.unwrap();
                }
                std::hint::black_box(stream.finish().await.unwrap());
            }
        }
    };
    let url = format!("/v2/skills/{bucket}/big");
    let (mut puts, mut md5) = alternate(|| put(&client, &server, API_KEY, &url, &files), || hash(false)).await;
    let (mut both, _) = alternate(|| hash(true), || async {}).await;
    let ((put_p50, _), (md5_p50, _), (both_p50, _)) = (summary(&mut puts), summary(&mut md5), summary(&mut both));
    let added = both_p50.saturating_sub(md5_p50);
    // The same PUT on a build from before, alternated with this one.
    let before = match std::env::var_os("BENCH_BEFORE_BINARY") {
        Some(binary) => {
            let before_dir = tempfile::tempdir().unwrap();
            let old = ServerProcess::start_binary(binary.as_ref(), before_dir.path(), "", "warn");
            let old_bucket = old.bucket(&client).await;
            let old_url = format!("/v2/skills/{old_bucket}/big");
            let (mut old_puts, mut new_puts) = alternate(
                || put(&client, &old, API_KEY, &old_url, &files),
                || put(&client, &server, API_KEY, &url, &files),
            )
            .await;
            Some((summary(&mut old_puts), summary(&mut new_puts)))
        }
        None => None,
    };
    println!("### 1. SHA-256 beside MD5 on a whole PUT — `{COMMAND} -- sha256`");
    println!();
    println!("100 files, {:.1} MiB, local disk, median of {ITERATIONS}.", total as f64 / (1 << 20) as f64);
    println!();
    println!("| what | median | of the PUT |");
    println!("|---|---|---|");
    println!("| whole PUT through the server (baseline) | {} | 100 % |", micros(put_p50));
    println!(
        "| MD5 of its files, as the upload path hashes them | {} | {:.1} % |",
        micros(md5_p50),
        pct(md5_p50, put_p50)
    );
    println!("| MD5 and SHA-256 of its files | {} | {:.1} % |", micros(both_p50), pct(both_p50, put_p50));
    println!("| **SHA-256 added** (target ≤ 5 %) | **{}** | **{:.1} %** |", micros(added), pct(added, put_p50));
    println!();
    if let Some(((old_p50, old_p90), (new_p50, new_p90))) = before {
        println!(
            "The same PUT on a build from before SHA-256 was kept and on this one, alternated, {ITERATIONS} each:"
        );
        println!();
        println!("| server | median | p90 | vs before |");
        println!("|---|---|---|---|");
        println!("| before (MD5 only; baseline) | {} | {} | 1.00× |", micros(old_p50), micros(old_p90));
        println!(
            "| **now (MD5 and SHA-256; target ≤ 1.05×)** | **{}** | {} | **{:.3}×** |",
            micros(new_p50),
            micros(new_p90),
            new_p50.as_secs_f64() / old_p50.as_secs_f64()
        );
        println!();
    }
}

fn pct(part: Duration, whole: Duration) -> f64 {
    100.0 * part.as_secs_f64() / whole.as_secs_f64()
}

/// Item 2.
async fn mcp_list(server: &ServerProcess, client: &reqwest::Client) {
    let bucket = server.bucket(client).await;
    populate(client, server, API_KEY, &format!("/v2/skills/{bucket}/team"), SKILLS).await;
    let listing = format!("{}/v2/metadata/skills/{bucket}/?recursive=true&limit=100", server.url);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "skills/list"}).to_string();
    let v2_page = || async {
        let reply = client.get(&listing).header("Api-Key", API_KEY).send().await.unwrap();
        let page: Value = reply.json().await.unwrap();
        assert_eq!(page["items"].as_array().map(Vec::len), Some(100), "{page}");
    };
    let mcp_page = || async {
        let reply = client.post(format!("{}/v1/skills/mcp", server.url)).header("Api-Key", API_KEY).body(body.clone());
        let page: Value = reply.send().await.unwrap().json().await.unwrap();
        assert_eq!(page["result"]["skills"].as_array().map(Vec::len), Some(100), "{page}");
    };
    let (mut v2, mut mcp) = alternate(v2_page, mcp_page).await;
    let before = store_reads(client, server).await;
    mcp_page().await;
    let reads = store_reads(client, server).await - before;
    let ((v2_p50, v2_p90), (mcp_p50, mcp_p90)) = (summary(&mut v2), summary(&mut mcp));
    println!("### 2. A `skills/list` page of 100 — `{COMMAND} -- mcp-list`");
    println!();
    println!("{SKILLS} skills of 3 files in one bucket, warm, local disk; alternated, {ITERATIONS} each.");
    println!();
    println!("| page of 100 | median | p90 | vs /v2 |");
    println!("|---|---|---|---|");
    println!(
        "| `GET /v2/metadata/skills/<b>/?recursive=true&limit=100` (baseline) | {} | {} | 1.00× |",
        micros(v2_p50),
        micros(v2_p90)
    );
    println!(
        "| **`skills/list`** (frontmatter + every file's size and digest; target ≤ 1.2×) | **{}** | {} | **{:.2}×** |",
        micros(mcp_p50),
        micros(mcp_p90),
        mcp_p50.as_secs_f64() / v2_p50.as_secs_f64()
    );
    println!();
    println!("Store reads of one warm `skills/list` page: {reads} (no file, no marker).");
    println!();
}

/// Item 3.
async fn index(server: &ServerProcess, client: &reqwest::Client) {
    populate(client, server, ADMIN_KEY, "/v2/skills/public/team", SKILLS).await;
    let listing = format!("{}/v2/metadata/skills/public/team/?limit=1000", server.url);
    let index_url = format!("{}/.well-known/agent-skills/index.json", server.url);
    let v2_page = || async {
        let page: Value = client.get(&listing).header("Api-Key", API_KEY).send().await.unwrap().json().await.unwrap();
        assert_eq!(page["items"].as_array().map(Vec::len), Some(SKILLS), "{page}");
    };
    let index_page = || async {
        let index: Value = client.get(&index_url).send().await.unwrap().json().await.unwrap();
        assert_eq!(index["skills"].as_array().map(Vec::len), Some(SKILLS), "{index}");
    };
    // The first index hashes every archive once and keeps the digests.
    let started = Instant::now();
    index_page().await;
    let cold = started.elapsed();
    let (mut v2, mut warm) = alternate(v2_page, index_page).await;
    let before = store_reads(client, server).await;
    index_page().await;
    let reads = store_reads(client, server).await - before;
    let ((v2_p50, v2_p90), (index_p50, index_p90)) = (summary(&mut v2), summary(&mut warm));
    println!("### 3. The well-known index of {SKILLS} public skills — `{COMMAND} -- index`");
    println!();
    println!("| what | median | p90 | vs /v2 |");
    println!("|---|---|---|---|");
    println!(
        "| `GET /v2/metadata/skills/public/team/?limit=1000` (baseline) | {} | {} | 1.00× |",
        micros(v2_p50),
        micros(v2_p90)
    );
    println!(
        "| **index, warm** | **{}** | {} | **{:.2}×** |",
        micros(index_p50),
        micros(index_p90),
        index_p50.as_secs_f64() / v2_p50.as_secs_f64()
    );
    println!(
        "| index, first (every archive built and hashed once) | {} | – | {:.1}× |",
        micros(cold),
        cold.as_secs_f64() / v2_p50.as_secs_f64()
    );
    println!();
    println!("Store reads of one warm index of {SKILLS} skills: {reads} (no per-skill read).");
    println!();
}
