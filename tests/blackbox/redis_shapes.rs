//! Two instances over one store (moto) and Redis in the shapes
//! docs/operations.md configures — a three-primary cluster and a primary
//! behind three sentinels — with an outage in the middle of the writes: a
//! primary killed and restarted, or a failover. Checked: a change on one
//! instance reaches a feed subscriber on the other (pub/sub across nodes);
//! every write is answered 200 or 503 (refused while Redis is away, never
//! hanging); writes resume by themselves; the last acknowledged write of
//! every resource is what both instances serve.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::feed::Feed;
use crate::services;
use crate::support::{Client, Setup, unzip};

const KEY: &str = "shape-key";
const WRITERS: usize = 4;

enum Shape {
    Cluster(services::RedisCluster),
    Sentinel(services::RedisSentinel),
}

impl Shape {
    /// The `[redis]` table, as docs/operations.md shows it.
    fn toml(&self) -> String {
        let list = |urls: &[String]| urls.iter().map(|u| format!("{u:?}")).collect::<Vec<_>>().join(", ");
        match self {
            Self::Cluster(cluster) => format!("[redis]\ncluster_nodes = [{}]\n", list(&cluster.nodes)),
            Self::Sentinel(sentinel) => format!(
                "[redis]\nsentinels = [{}]\nsentinel_master = \"{}\"\n",
                list(&sentinel.sentinels),
                sentinel.master_name
            ),
        }
    }

    fn outage(&mut self) -> &'static str {
        match self {
            Self::Cluster(cluster) => {
                cluster.kill(0);
                std::thread::sleep(Duration::from_millis(1_500));
                cluster.restart(0);
                "a primary killed for 1.5 s and restarted"
            }
            Self::Sentinel(sentinel) => {
                sentinel.fail_over();
                "the primary killed, the replica promoted"
            }
        }
    }
}

fn skill(token: &str) -> Vec<u8> {
    format!("---\nname: w\ndescription: token {token}\n---\n").into_bytes()
}

async fn put(client: &Client, url: &str, token: &str) -> u16 {
    client.put_files(url, &[("Api-Key", KEY)], &[("SKILL.md", &skill(token))]).await.status
}

async fn writes_go_on_through_an_outage(shape: &str) {
    let mut redis = match shape {
        "cluster" => match services::redis_cluster() {
            Some(cluster) => Shape::Cluster(cluster),
            None => return,
        },
        _ => match services::redis_sentinel() {
            Some(sentinel) => Shape::Sentinel(sentinel),
            None => return,
        },
    };
    let Some(moto) = services::moto() else { return };
    let bucket = format!("shape-{shape}");
    moto.create_bucket(&bucket);
    let options: String = moto.storage_options().iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();
    let config = |setup: &Setup| {
        setup.config(&format!(
            "[encryption]\nsecret = \"shape\"\n[keys.{KEY}]\nproject = \"p\"\nroles = [\"user\"]\n\
             [storage]\nurl = \"s3://{bucket}\"\n[storage.options]\n{options}{}timeout_ms = 500\n\
             [locks]\nttl_ms = 2000\n",
            redis.toml()
        ))
    };
    let (setup_a, setup_b) = (Setup::new(), Setup::new());
    let a = setup_a.start(Some(&config(&setup_a)), &[]);
    let b = setup_b.start(Some(&config(&setup_b)), &[]);
    let clients = [a.client(), b.client()];
    let key = [("Api-Key", KEY)];
    let bucket_id = clients[0].get("/v1/bucket", &key).await.json()["bucket"].as_str().unwrap().to_string();
    let url = |i: usize| format!("/v2/skills/{bucket_id}/w/r{i}");

    // Pub/sub across the cluster's nodes (or through the primary): A's change reaches B's subscriber.
    let mut feed = Feed::start(&b.url, &key, &[format!("skills/{bucket_id}/w/")]).await;
    assert_eq!(put(&clients[0], &url(0), "first").await, 200);
    let event = feed.event(Duration::from_secs(10)).await.expect("the change reached the other instance's feed");
    assert_eq!(event["action"], "CREATE");

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (client, url, stop) = (clients[i % 2].clone(), url(i), stop.clone());
            tokio::spawn(async move {
                // (token, status, how long the answer took)
                let mut answers = Vec::new();
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let token = format!("w{i}-{round}");
                    let started = Instant::now();
                    let status = put(&client, &url, &token).await;
                    answers.push((token, status, started.elapsed()));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                answers
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let what = tokio::task::block_in_place(|| redis.outage());
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);

    let (mut refused, mut slowest_refusal, mut acknowledged) = (0, Duration::ZERO, 0);
    for (i, writer) in writers.into_iter().enumerate() {
        let answers = writer.await.unwrap();
        for (token, status, took) in &answers {
            assert!(matches!(status, 200 | 503), "{shape}: {token} answered {status}");
            if *status == 503 {
                refused += 1;
                slowest_refusal = slowest_refusal.max(*took);
            } else {
                acknowledged += 1;
            }
        }
        // Writes resume: one more, acknowledged, and it is what both instances serve.
        let last = format!("w{i}-last");
        let deadline = Instant::now() + Duration::from_secs(30);
        while put(&clients[i % 2], &url(i), &last).await != 200 {
            assert!(Instant::now() < deadline, "{shape}: writes did not resume on r{i}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for client in &clients {
            let read = client.get(&url(i), &key).await;
            assert_eq!(read.status, 200);
            let files = unzip(&read.bytes);
            assert_eq!(files[0].1, skill(&last), "{shape}: r{i} does not serve its last acknowledged write");
        }
    }
    eprintln!(
        "{shape} ({what}): {acknowledged} writes acknowledged, {refused} refused with 503 (the slowest refusal \
         took {slowest_refusal:?}); all resumed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_on_through_a_cluster_primary_outage() {
    writes_go_on_through_an_outage("cluster").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_on_through_a_sentinel_failover() {
    writes_go_on_through_an_outage("sentinel").await;
}
