//! Redis going away under traffic and coming back: writes that need a lock
//! fail fast with a 503 naming Redis, reads go on, `/ready` says not ready,
//! and the same process recovers when Redis returns.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::services;
use crate::support::{Client, Setup};

const KEY: &str = "outage-key";
/// The host's `locks.acquire_timeout_ms` in this test: every request that
/// needs Redis must have its answer well within it.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

fn skill(description: &str) -> Vec<u8> {
    format!("---\nname: s\ndescription: {description}\n---\n# s\n").into_bytes()
}

/// Writes in a loop until `stop`: (status, body, how long it took) of each.
async fn writer(client: Client, url: String, stop: Arc<AtomicBool>) -> Vec<(u16, String, Duration)> {
    let mut seen = Vec::new();
    let mut round = 0;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let started = Instant::now();
        let reply =
            client.put_files(&url, &[("Api-Key", KEY)], &[("SKILL.md", &skill(&format!("round {round}")))]).await;
        seen.push((reply.status, reply.body, started.elapsed()));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

#[tokio::test]
async fn a_redis_outage_fails_writes_fast_keeps_reads_and_recovers_without_a_restart() {
    let Some(mut redis) = services::redis() else { return };
    let setup = Setup::new();
    let config = setup.config(&format!(
        "[encryption]\nsecret = \"s\"\n[keys.{KEY}]\nproject = \"p\"\nroles = [\"user\"]\n\
         [redis]\nurl = \"{}\"\n[locks]\nacquire_timeout_ms = {}\n",
        redis.url,
        ACQUIRE_TIMEOUT.as_millis()
    ));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();
    let key = [("Api-Key", KEY)];
    let bucket = client.get("/v1/bucket", &key).await.json()["bucket"].as_str().unwrap().to_string();
    let stable = format!("/v2/skills/{bucket}/stable");
    assert_eq!(client.put_files(&stable, &key, &[("SKILL.md", &skill("before"))]).await.status, 200);
    assert_eq!(client.get("/ready", &[]).await.status, 200);

    // Traffic: two writers on their own resources, from before the outage to after it.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|i| tokio::spawn(writer(server.client(), format!("/v2/skills/{bucket}/busy-{i}"), stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    redis.stop();
    let down_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // While Redis is away: a write needing a lock is a prompt 503 naming Redis…
    for (path, body) in [(format!("/v1/prompts/{bucket}/p"), "{\"x\": 1}")] {
        let started = Instant::now();
        let reply = client.put_body(&path, &key, body.as_bytes()).await;
        assert_eq!(reply.status, 503, "{}", reply.body);
        assert!(reply.body.contains("Redis"), "{}", reply.body);
        assert!(started.elapsed() < ACQUIRE_TIMEOUT, "answered after {:?}", started.elapsed());
    }
    // …reads need no lock…
    let read = client.get(&format!("{stable}/files/SKILL.md"), &key).await;
    assert_eq!((read.status, read.bytes), (200, skill("before")));
    assert_eq!(client.get(&format!("/v2/metadata/skills/{bucket}/"), &key).await.status, 200);
    // …and the instance says it is not ready.
    let ready = client.get("/ready", &[]).await;
    assert_eq!(ready.status, 503);
    assert!(ready.body.contains("Redis"), "{}", ready.body);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let outage = down_at.elapsed();

    // Redis comes back (empty, as after a restart): the same process recovers.
    redis.restart();
    let back_at = Instant::now();
    let recovered = loop {
        let reply = client.put_files(&stable, &key, &[("SKILL.md", &skill("after"))]).await;
        if reply.status == 200 {
            break back_at.elapsed();
        }
        assert_eq!(reply.status, 503, "{}", reply.body);
        assert!(back_at.elapsed() < Duration::from_secs(30), "writes did not come back: {}", reply.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(client.get("/ready", &[]).await.status, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);

    let mut statuses = std::collections::BTreeMap::new();
    for writer in writers {
        let seen = writer.await.unwrap();
        assert_eq!(seen.last().map(|(status, ..)| *status), Some(200), "the writer's last write after recovery");
        for (status, body, took) in seen {
            assert!(status == 200 || status == 503, "{status}: {body}");
            if status == 503 {
                assert!(body.contains("Redis"), "{body}");
                assert!(took < ACQUIRE_TIMEOUT, "a failing write took {took:?}");
            }
            *statuses.entry(status).or_insert(0) += 1;
        }
    }
    assert!(statuses.get(&503).is_some_and(|n| *n > 0), "the outage was seen: {statuses:?}");
    let after = client.get(&format!("{stable}/files/SKILL.md"), &key).await;
    assert_eq!(after.bytes, skill("after"));
    eprintln!("outage {outage:?}: writers saw {statuses:?}; writes were back {recovered:?} after Redis");
}
