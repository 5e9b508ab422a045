//! A long chaos run (not part of `cargo test`: it takes ten minutes per backend): three instances and
//! sixteen clients — the cluster test's (`tests/blackbox/cluster.rs`), with its checker — while a random
//! instance is SIGKILLed (and restarted) every 30 s and Redis is restarted, empty, every 2 minutes.
//!
//!   cargo bench -p dial-host --bench chaos                      # S3 (moto) then Azure (Azurite), 10 min each
//!   CHAOS_BACKENDS=azure CHAOS_MINUTES=2 cargo bench -p dial-host --bench chaos
//!
//! Prints the figures docs/benchmarks.md records (operations, kills, Redis restarts, answers cut off or
//! 503, violations, orphaned objects) and exits non-zero on any violation or orphan. While Redis is away
//! writes are refused with 503, which a client cannot tell from "maybe landed", so the checker allows
//! both outcomes for them as it does for requests cut off by a kill.

#[path = "../../tests/blackbox/cluster.rs"]
#[allow(dead_code)] // the test functions in it are not built here
mod cluster;
#[path = "../../tests/services.rs"]
mod services;
#[path = "../../tests/blackbox/support.rs"]
#[allow(dead_code)]
mod support;

use std::time::{Duration, Instant};

const KILL_EVERY: Duration = Duration::from_secs(30);
const REDIS_RESTART_EVERY: Duration = Duration::from_secs(120);
/// How long a killed instance stays down before it is started again.
const DOWN_FOR: Duration = Duration::from_secs(3);

fn main() {
    let backends = std::env::var("CHAOS_BACKENDS").unwrap_or_else(|_| "s3,azure".into());
    let minutes: f64 = std::env::var("CHAOS_MINUTES").ok().and_then(|m| m.parse().ok()).unwrap_or(10.0);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut failed = false;
    for backend in backends.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        failed |= !runtime.block_on(run(backend, Duration::from_secs_f64(minutes * 60.0)));
    }
    if failed {
        std::process::exit(1);
    }
}

/// One run; true when the checker found nothing wrong.
async fn run(backend: &str, length: Duration) -> bool {
    let emulator = services::emulator(backend).unwrap_or_else(|| panic!("no emulator for {backend}: run scripts/test"));
    let mut redis = services::redis().expect("redis-server: run scripts/test");
    emulator.create(cluster::BUCKET);
    let mut instances = cluster::Cluster::start(&emulator, &redis);
    let (http, clients, stop) = cluster::start_clients(&instances, true).await;
    let started = Instant::now();
    let (mut kills, mut redis_restarts) = (0, 0);
    let (mut next_kill, mut next_redis) = (KILL_EVERY, REDIS_RESTART_EVERY);
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    while started.elapsed() < length {
        let now = started.elapsed();
        if now >= next_kill {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let victim = (seed % cluster::INSTANCES as u64) as usize;
            instances.kill(victim);
            tokio::time::sleep(DOWN_FOR).await;
            tokio::task::block_in_place(|| instances.restart(victim));
            kills += 1;
            next_kill += KILL_EVERY;
        } else if now >= next_redis {
            tokio::task::block_in_place(|| redis.restart());
            redis_restarts += 1;
            next_redis += REDIS_RESTART_EVERY;
        } else {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut runs = Vec::new();
    for client in clients {
        runs.push(client.await.expect("a client task"));
    }
    let traffic = started.elapsed();
    let report = cluster::check(&instances, &emulator, &http, runs).await;
    println!(
        "chaos {backend}: {} instances, {} clients, {:.1} min of traffic, {kills} SIGKILLs, {redis_restarts} Redis \
         restarts: {} operations {:?}; {} cut off by a kill, {} answered 503; violations: {}; orphaned objects after \
         the sweep: {} (the sweep took {:.0} s after the traffic); {} objects in the store",
        cluster::INSTANCES,
        cluster::CLIENTS,
        traffic.as_secs_f64() / 60.0,
        report.total,
        report.operations,
        report.cut_off,
        report.unavailable,
        report.violations.len(),
        report.orphans.len(),
        report.swept_in.as_secs_f64(),
        report.objects
    );
    for violation in report.violations.iter().take(20) {
        println!("  violation: {violation}");
    }
    for orphan in report.orphans.iter().take(20) {
        println!("  orphan: {orphan}");
    }
    report.violations.is_empty() && report.orphans.is_empty()
}
