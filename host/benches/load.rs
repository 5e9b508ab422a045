//! Load figures for one instance (issue: operations): requests per second
//! and p50/p99 latency with the server's peak RSS, on the embedded default
//! (local disk) and on S3 (moto), for
//!
//! - the first page (100) of a folder of 1 000 skills, and of 1 000 v1 files,
//! - the ZIP of a small skill and of a 5 MiB skill,
//! - one file of a skill (`…/files/SKILL.md`),
//! - a whole PUT of a small skill,
//!
//! each with [`CLIENTS`] concurrent clients on keep-alive connections for
//! [`DURATION`] after a warm-up. `GET /health` under the same load is the
//! baseline each row is compared with (same run, same clients).
//!
//! `cargo bench -p dial-host --bench load` prints Markdown tables for
//! `docs/benchmarks.md`; `… -- local` or `… -- moto` runs one store, and
//! `listings` among the arguments only the baseline and the listing rows.
//! `BENCH_DIAL_HOST_BINARY=<path>` serves from another build (a before/after
//! in one run).

#[path = "../../tests/services.rs"]
mod services;

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{API_KEY, ServerProcess, cpu_model, load_average, memory_of, nproc, percentile};

const COMMAND: &str = "cargo bench -p dial-host --bench load";
const CLIENTS: usize = 8;
const WARMUP: Duration = Duration::from_millis(500);
const DURATION: Duration = Duration::from_secs(5);
const FOLDER_SKILLS: usize = 1000;
const BIG_BYTES: usize = 5 << 20;

fn main() {
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!("## `{COMMAND}`");
    println!();
    println!("machine: {} × {}, load average before: {}", nproc(), cpu_model(), load_average());
    println!();
    println!("server: `{}`", common::binary().display());
    println!();
    if only.is_empty() || only.iter().any(|a| a == "local") {
        runtime.block_on(run("local disk (embedded default)", "", &only));
    }
    if only.is_empty() || only.iter().any(|a| a == "moto") {
        let Some(moto) = services::moto() else { return };
        moto.create_bucket("load");
        let options: String = moto.storage_options().iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();
        let storage = format!("[storage]\nurl = \"s3://load\"\n[storage.options]\n{options}");
        runtime.block_on(run("S3 (moto on the same machine)", &storage, &only));
    }
    println!("load average after: {}", load_average());
}

struct Row {
    name: &'static str,
    requests: usize,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
    peak_rss: u64,
}

/// `only` holding `listings`: the baseline and the listing rows alone.
async fn run(store: &str, extra: &str, only: &[String]) {
    let listings_only = only.iter().any(|a| a == "listings");
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), extra);
    let client = reqwest::Client::new();
    let bucket = server.bucket(&client).await;
    let base = format!("{}/v2/skills/{bucket}", server.url);
    let files = format!("{}/v1/files/{bucket}", server.url);

    // The fixtures: 1 000 skills in one folder, a small skill, a 5 MiB one.
    let seeding = Instant::now();
    let seeded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seeders: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (client, base, files, seeded) = (client.clone(), base.clone(), files.clone(), seeded.clone());
            tokio::spawn(async move {
                loop {
                    let i = seeded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= FOLDER_SKILLS {
                        break;
                    }
                    put(&client, &format!("{base}/many/skill-{i:04}"), &small_skill(i)).await;
                    let file = vec![("f.txt".to_string(), format!("file {i}").into_bytes())];
                    put(&client, &format!("{files}/many/file-{i:04}.txt"), &file).await;
                }
            })
        })
        .collect();
    for seeder in seeders {
        seeder.await.unwrap();
    }
    let seeding = seeding.elapsed();
    put(&client, &format!("{base}/small"), &small_skill(0)).await;
    let mut big = small_skill(1);
    big.push(("data.bin".into(), (0..BIG_BYTES).map(|i| (i * 7919 % 251) as u8).collect()));
    put(&client, &format!("{base}/big"), &big).await;

    let (idle_rss, _) = memory_of(server.pid());
    let mut rows = Vec::new();
    let health = format!("{}/health", server.url);
    let listing = format!("{}/v2/metadata/skills/{bucket}/many/?limit=100", server.url);
    let v1_listing = format!("{}/v1/metadata/files/{bucket}/many/?limit=100", server.url);
    let (small, big, file) = (format!("{base}/small"), format!("{base}/big"), format!("{base}/small/files/SKILL.md"));
    for (name, target) in [
        ("`GET /health` (baseline)", Target::Get(health)),
        ("listing, first page of 1 000 skills", Target::Get(listing)),
        ("v1 listing, first page of 1 000 files", Target::Get(v1_listing)),
        ("ZIP of a small skill", Target::Get(small)),
        ("ZIP of a 5 MiB skill", Target::Get(big)),
        ("one file (`…/files/SKILL.md`)", Target::Get(file)),
        ("whole PUT of a small skill", Target::Put(base.clone())),
    ] {
        if listings_only && !(name.contains("listing") || name.contains("/health")) {
            continue;
        }
        rows.push(measure(&server, name, target).await);
    }

    println!("### {store}");
    println!();
    println!(
        "{CLIENTS} clients, keep-alive, {DURATION:?} per row after {WARMUP:?} of warm-up; seeding 1 000 skills and 1 000 \
         files took {seeding:.1?}; idle RSS {}",
        mib(idle_rss)
    );
    println!();
    println!("| request | requests/s | × `/health` | p50 | p99 | peak RSS |");
    println!("|---|---|---|---|---|---|");
    let baseline = rows[0].requests as f64 / rows[0].elapsed.as_secs_f64();
    for row in &rows {
        let rps = row.requests as f64 / row.elapsed.as_secs_f64();
        println!(
            "| {} | {rps:.0} | {:.4} | {} | {} | {} |",
            row.name,
            rps / baseline,
            ms(row.p50),
            ms(row.p99),
            mib(row.peak_rss)
        );
    }
    println!();
}

#[derive(Clone)]
enum Target {
    Get(String),
    /// Whole PUTs of a small skill under this prefix, one name per client.
    Put(String),
}

/// `CLIENTS` clients, each with its own keep-alive connection, in a loop.
async fn measure(server: &ServerProcess, name: &'static str, target: Target) -> Row {
    let warm_until = Instant::now() + WARMUP;
    let until = warm_until + DURATION;
    server.reset_peak_rss();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|worker| {
            let target = target.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::builder().pool_max_idle_per_host(1).tcp_nodelay(true).build().unwrap();
                let mut times = Vec::new();
                let mut round = 0;
                loop {
                    let started = Instant::now();
                    if started >= until {
                        break;
                    }
                    round += 1;
                    match &target {
                        Target::Get(url) => {
                            let response = client.get(url).header("Api-Key", API_KEY).send().await.unwrap();
                            assert_eq!(response.status().as_u16(), 200, "{url}");
                            std::hint::black_box(response.bytes().await.unwrap());
                        }
                        Target::Put(prefix) => {
                            put(&client, &format!("{prefix}/put-{worker}"), &small_skill(round)).await;
                        }
                    }
                    if started >= warm_until {
                        times.push(started.elapsed());
                    }
                }
                times
            })
        })
        .collect();
    let mut times = Vec::new();
    for worker in workers {
        times.extend(worker.await.unwrap());
    }
    times.sort();
    if times.is_empty() {
        // Not one request both started after the warm-up and ended in time
        // (an emulator slower than the row): say so rather than a rate.
        times.push(DURATION);
    }
    let (_, peak_rss) = memory_of(server.pid());
    Row {
        name,
        requests: times.len(),
        elapsed: DURATION,
        p50: percentile(&times, 0.50),
        p99: percentile(&times, 0.99),
        peak_rss,
    }
}

fn small_skill(seed: usize) -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "SKILL.md".into(),
            format!("---\nname: s\ndescription: Skill number {seed} of the load bench.\n---\n# s\n").into_bytes(),
        ),
        ("scripts/run.py".into(), format!("print({seed})\n").repeat(16).into_bytes()),
    ]
}

async fn put(client: &reqwest::Client, url: &str, files: &[(String, Vec<u8>)]) {
    let form = files.iter().fold(reqwest::multipart::Form::new(), |form, (name, content)| {
        form.part("file", reqwest::multipart::Part::bytes(content.clone()).file_name(name.clone()))
    });
    let response = client.put(url).header("Api-Key", API_KEY).multipart(form).send().await.unwrap();
    let status = response.status().as_u16();
    assert_eq!(status, 200, "PUT {url}: {}", response.text().await.unwrap_or_default());
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}
