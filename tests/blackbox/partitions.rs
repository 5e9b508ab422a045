//! Instances cut off by a network partition (`tests/partition.rs`: a relay
//! the test controls between the instance and the service), while another
//! instance keeps writing the same resources: the cut-off instance answers
//! writes with a 503 within its timeouts (reads go on while only Redis is
//! away), recovers without a restart once the link heals, and no
//! acknowledged write is lost or mixed.

use std::time::{Duration, Instant};

use crate::partition::Link;
use crate::services;
use crate::support::{Setup, unzip};

const KEY: &str = "partition-key";

fn skill(token: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("SKILL.md", format!("---\nname: s\ndescription: token {token}\n---\n").into_bytes()),
        ("data.txt", format!("{token}\n").repeat(50).into_bytes()),
    ]
}

fn token_of(zip: &[u8]) -> String {
    let files = unzip(zip);
    let text = |name: &str| {
        String::from_utf8(files.iter().find(|(n, _)| n == name).map(|(_, c)| c.clone()).unwrap_or_default()).unwrap()
    };
    let token = text("SKILL.md").lines().find_map(|l| l.strip_prefix("description: token ")).unwrap().to_string();
    assert_eq!(text("data.txt"), format!("{token}\n").repeat(50), "a mix of versions was served");
    token
}

async fn put(client: &crate::support::Client, url: &str, token: &str) -> crate::support::Reply {
    let files = skill(token);
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, c)| (*n, c.as_slice())).collect();
    client.put_files(url, &[("Api-Key", KEY)], &refs).await
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap()
}

/// `which` is cut: "redis" or "store". Instance A reaches it through the
/// link, instance B directly.
async fn an_instance_cut_off_answers_503_and_recovers(which: &str) {
    let Some(moto) = services::moto() else { return };
    let Some(redis) = services::redis() else { return };
    let bucket = format!("cut-{which}");
    moto.create_bucket(&bucket);
    let redis_link = Link::to(port_of(&redis.url)).await;
    let store_link = Link::to(port_of(&moto.endpoint)).await;
    let config = |setup: &Setup, through_links: bool| {
        let mut options = moto.storage_options();
        let redis_url = if through_links && which == "redis" { redis_link.url("redis") } else { redis.url.clone() };
        if through_links && which == "store" {
            options.insert("endpoint".into(), store_link.url("http"));
        }
        // The store's budget: a call that gets no answer in 2 s is retried for at most 3 s.
        options.insert("timeout".into(), "2s".into());
        options.insert("connect_timeout".into(), "1s".into());
        let options: String = options.iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();
        setup.config(&format!(
            "[encryption]\nsecret = \"p\"\n[keys.{KEY}]\nproject = \"p\"\nroles = [\"user\"]\n\
             [storage]\nurl = \"s3://{bucket}\"\nretry_timeout_ms = 3000\n[storage.options]\n{options}\
             [redis]\nurl = \"{redis_url}\"\nkey_prefix = \"{bucket}:\"\ntimeout_ms = 500\n\
             [locks]\nttl_ms = 2000\n"
        ))
    };
    let (setup_a, setup_b) = (Setup::new(), Setup::new());
    let a = setup_a.start(Some(&config(&setup_a, true)), &[]);
    let b = setup_b.start(Some(&config(&setup_b, false)), &[]);
    let (client_a, client_b) = (a.client(), b.client());
    let key = [("Api-Key", KEY)];
    let bucket_id = client_a.get("/v1/bucket", &key).await.json()["bucket"].as_str().unwrap().to_string();
    let url = format!("/v2/skills/{bucket_id}/shared/r");
    assert_eq!(put(&client_a, &url, "before").await.status, 200);

    match which {
        "redis" => redis_link.cut(),
        _ => store_link.cut(),
    }
    // A's writes are refused with a 503 naming what is away; B's go on.
    let mut acknowledged = Vec::new();
    let mut slowest = Duration::ZERO;
    for round in 0..3 {
        let started = Instant::now();
        let refused = put(&client_a, &url, &format!("a{round}")).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(refused.status, 503, "{which}: a write on the cut-off instance: {}", refused.body);
        let expected = if which == "redis" { "Redis" } else { "store" };
        assert!(refused.body.contains(expected), "the 503 names what is away: {}", refused.body);
        let written = put(&client_b, &url, &format!("b{round}")).await;
        assert_eq!(written.status, 200, "the other instance writes on: {}", written.body);
        acknowledged.push(format!("b{round}"));
    }
    if which == "redis" {
        // Reads need no lock: the cut-off instance serves B's latest write.
        let read = client_a.get(&url, &key).await;
        assert_eq!((read.status, token_of(&read.bytes)), (200, "b2".to_string()));
    } else {
        assert_eq!(client_a.get("/ready", &[]).await.status, 503, "readiness follows the store");
    }
    eprintln!("cut off from {which}: writes on the cut-off instance refused with 503 after at most {slowest:?}");

    // Healed: A writes again without a restart, and everyone reads the last acknowledged write.
    match which {
        "redis" => redis_link.heal(),
        _ => store_link.heal(),
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let healed_at = Instant::now();
    loop {
        let write = put(&client_a, &url, "a-after").await;
        if write.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "{which}: the cut-off instance never recovered: {}", write.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("cut off from {which}: writes back {:?} after the link healed", healed_at.elapsed());
    for client in [&client_a, &client_b] {
        let read = client.get(&url, &key).await;
        assert_eq!((read.status, token_of(&read.bytes)), (200, "a-after".to_string()));
    }
    let versions = client_b.get(&format!("/v2/versions/skills/{bucket_id}/shared/r"), &key).await.json();
    let kept = versions["versions"].as_array().unwrap().len();
    assert_eq!(kept, 1 + acknowledged.len() + 1, "every acknowledged write is a version: {versions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_cut_off_from_redis_answers_503_and_recovers() {
    an_instance_cut_off_answers_503_and_recovers("redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_cut_off_from_the_store_answers_503_and_recovers() {
    an_instance_cut_off_answers_503_and_recovers("store").await;
}
