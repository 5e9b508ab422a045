//! The change feed (`POST /v1/ops/resource/subscribe`) end to end: two
//! instances over one store and one Redis, an SSE reader on one of them,
//! changes made on the other; heartbeats; a revoked share ends the events;
//! refusals before the stream starts; memory with 1 000 idle subscribers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::services;
use crate::support::Setup;

const ALICE: &str = "alice-key";
const BOB: &str = "bob-key";

fn config(setup: &Setup, storage: &str, redis: Option<&services::Redis>) -> std::path::PathBuf {
    let redis = redis.map(|r| format!("[redis]\nurl = \"{}\"\nkey_prefix = \"feed:\"\n", r.url)).unwrap_or_default();
    setup.config(&format!(
        "[encryption]\nsecret = \"feed\"\n[keys.{ALICE}]\nproject = \"alice\"\nroles = [\"user\"]\n\
         [keys.{BOB}]\nproject = \"bob\"\nroles = [\"user\"]\n[feed]\nheartbeat_seconds = 1\nmax_subscriptions_per_caller = 1000\n{storage}{redis}"
    ))
}

/// What an SSE stream delivered: `data:` payloads and comment lines.
pub(crate) struct Feed {
    response: reqwest::Response,
    pending: String,
    /// The server closed the stream.
    pub ended: bool,
}

pub(crate) enum Item {
    Event(Value),
    Comment(String),
}

impl Feed {
    pub async fn open(server_url: &str, auth: &[(&str, &str)], urls: &[String]) -> reqwest::Response {
        let resources: Vec<Value> = urls.iter().map(|url| json!({"url": url})).collect();
        let mut request = reqwest::Client::new().post(format!("{server_url}/v1/ops/resource/subscribe"));
        for (name, value) in auth {
            request = request.header(*name, *value);
        }
        request.body(json!({"resources": resources}).to_string()).send().await.unwrap()
    }

    pub async fn start(server_url: &str, auth: &[(&str, &str)], urls: &[String]) -> Self {
        let response = Self::open(server_url, auth, urls).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self { response, pending: String::new(), ended: false }
    }

    /// The next event or comment, `None` when the stream ended or nothing
    /// came within `patience`.
    pub async fn next(&mut self, patience: Duration) -> Option<Item> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(comment) = line.strip_prefix(':') {
                        return Some(Item::Comment(comment.trim().to_string()));
                    }
                    if let Some(payload) = line.strip_prefix("data:") {
                        data.push_str(payload.trim_start());
                    }
                }
                if !data.is_empty() {
                    return Some(Item::Event(serde_json::from_str(&data).unwrap()));
                }
                continue;
            }
            match tokio::time::timeout(patience, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.pending.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Ok(None)) => {
                    self.ended = true;
                    return None;
                }
                _ => return None,
            }
        }
    }

    /// The next event, skipping heartbeats.
    pub async fn event(&mut self, patience: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await? {
                Item::Event(event) => return Some(event),
                Item::Comment(_) => continue,
            }
        }
    }
}

const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_on_one_instance_reach_a_subscriber_on_another() {
    let Some(moto) = services::moto() else { return };
    let Some(redis) = services::redis() else { return };
    moto.create_bucket("feed");
    let options: String = moto.storage_options().iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();
    let storage = format!("[storage]\nurl = \"s3://feed\"\n[storage.options]\n{options}");
    let (setup_a, setup_b) = (Setup::new(), Setup::new());
    let a = setup_a.start(Some(&config(&setup_a, &storage, Some(&redis))), &[]);
    let b = setup_b.start(Some(&config(&setup_b, &storage, Some(&redis))), &[]);
    let (client_a, client_b) = (a.client(), b.client());
    let alice = [("Api-Key", ALICE)];
    let bucket = client_a.get("/v1/bucket", &alice).await.json()["bucket"].as_str().unwrap().to_string();

    let mut feed = Feed::start(
        &b.url,
        &[("Api-Key", ALICE)],
        &[format!("skills/{bucket}/team/"), format!("files/{bucket}/x.txt")],
    )
    .await;
    let skill = |d: &str| format!("---\nname: s\ndescription: {d}\n---\n").into_bytes();
    let url = format!("/v2/skills/{bucket}/team/s");
    let created = client_a.put_files(&url, &alice, &[("SKILL.md", &skill("one"))]).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let updated = client_a.put_files(&url, &alice, &[("SKILL.md", &skill("two"))]).await;
    assert_eq!(
        client_a.put_files(&format!("/v1/files/{bucket}/elsewhere.txt"), &alice, &[("f", b"no")]).await.status,
        200
    );
    assert_eq!(client_a.put_files(&format!("/v1/files/{bucket}/x.txt"), &alice, &[("f", b"x")]).await.status, 200);
    assert_eq!(client_a.delete(&url, &alice).await.status, 200);

    let mut seen = Vec::new();
    for _ in 0..4 {
        let event = feed.event(PATIENCE).await.expect("an event");
        seen.push((event["url"].as_str().unwrap().to_string(), event["action"].as_str().unwrap().to_string()));
        assert!(event["timestamp"].as_i64().unwrap() > 0, "{event}");
        match event["action"].as_str().unwrap() {
            "CREATE" if event["url"].as_str().unwrap().starts_with("skills/") => {
                assert_eq!(event["etag"], created.etag().as_str())
            }
            "UPDATE" => assert_eq!(event["etag"], updated.etag().as_str()),
            _ => {}
        }
    }
    let s = format!("skills/{bucket}/team/s/");
    let x = format!("files/{bucket}/x.txt");
    assert_eq!(
        seen,
        [(s.clone(), "CREATE".into()), (s.clone(), "UPDATE".into()), (x, "CREATE".into()), (s, "DELETE".into())]
            .map(|(u, a): (String, String)| (u, a)),
        "in order, and nothing from outside the watched URLs"
    );
    // Idle: heartbeats every second keep the stream alive.
    let heartbeat = feed.next(Duration::from_secs(3)).await;
    assert!(matches!(&heartbeat, Some(Item::Comment(text)) if text == "heartbeat"), "a heartbeat comment");
    drop(client_b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_share_ends_the_events_at_once() {
    let setup = Setup::new();
    let server = setup.start(Some(&config(&setup, "", None)), &[]);
    let client = server.client();
    let (alice, bob) = ([("Api-Key", ALICE)], [("Api-Key", BOB)]);
    let a = client.get("/v1/bucket", &alice).await.json()["bucket"].as_str().unwrap().to_string();
    let skill = b"---\nname: s\ndescription: d\n---\n";
    assert_eq!(
        client.put_files(&format!("/v2/skills/{a}/shared/s1"), &alice, &[("SKILL.md", skill)]).await.status,
        200
    );

    // Refused before any stream: no access, malformed, empty.
    let denied = Feed::open(&server.url, &[("Api-Key", BOB)], &[format!("skills/{a}/shared/")]).await;
    assert_eq!(denied.status(), 403);
    let client_raw = reqwest::Client::new();
    let post = |body: &'static str| {
        client_raw.post(format!("{}/v1/ops/resource/subscribe", server.url)).header("Api-Key", BOB).body(body).send()
    };
    assert_eq!(post("{not json").await.unwrap().status(), 400);
    assert_eq!(post("{\"resources\": []}").await.unwrap().status(), 400);

    let share = json!({"invitationType": "link", "resources": [{"url": format!("skills/{a}/shared/"), "permissions": ["READ"]}]});
    let invitation = client.post("/v1/ops/resource/share/create", &alice, &share.to_string()).await.json();
    let link = invitation["invitationLink"].as_str().unwrap();
    assert_eq!(client.get(&format!("{link}?accept=true"), &bob).await.status, 200);
    let mut feed = Feed::start(&server.url, &[("Api-Key", BOB)], &[format!("skills/{a}/shared/")]).await;
    assert_eq!(
        client.put_files(&format!("/v2/skills/{a}/shared/s2"), &alice, &[("SKILL.md", skill)]).await.status,
        200
    );
    let event = feed.event(PATIENCE).await.expect("the grantee sees changes while the share lasts");
    assert_eq!(event["url"], format!("skills/{a}/shared/s2/"));

    let revoke = json!({"resources": [{"url": format!("skills/{a}/shared/")}]});
    assert_eq!(client.post("/v1/ops/resource/share/revoke", &alice, &revoke.to_string()).await.status, 200);
    assert_eq!(
        client.put_files(&format!("/v2/skills/{a}/shared/s3"), &alice, &[("SKILL.md", skill)]).await.status,
        200
    );
    assert!(feed.event(Duration::from_secs(5)).await.is_none(), "no event after the revoke");
    assert!(feed.ended, "the stream ended: nothing is left that Bob may watch");
}

/// 1 000 idle subscriptions: what they cost the server, in RSS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_subscribers_cost_bounded_memory() {
    const SUBSCRIBERS: usize = 1000;
    let setup = Setup::new();
    let server = setup.start(Some(&config(&setup, "", None)), &[]);
    let client = server.client();
    let alice = [("Api-Key", ALICE)];
    let a = client.get("/v1/bucket", &alice).await.json()["bucket"].as_str().unwrap().to_string();
    let before = server.peak_rss_kib();
    let mut feeds = Vec::with_capacity(SUBSCRIBERS);
    for i in 0..SUBSCRIBERS {
        feeds.push(Feed::start(&server.url, &[("Api-Key", ALICE)], &[format!("files/{a}/f{i}.txt")]).await);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let with_all = server.peak_rss_kib();
    // They are live: one change reaches the one subscriber that watches it.
    assert_eq!(client.put_files(&format!("/v1/files/{a}/f7.txt"), &alice, &[("f", b"x")]).await.status, 200);
    let event = feeds[7].event(PATIENCE).await.expect("the watcher of f7 hears of it");
    assert_eq!(event["url"], format!("files/{a}/f7.txt"));
    let per_subscriber = (with_all.saturating_sub(before)) as f64 / SUBSCRIBERS as f64;
    eprintln!(
        "feed memory: peak RSS {before} KiB before, {with_all} KiB with {SUBSCRIBERS} idle subscribers ({per_subscriber:.1} KiB each)"
    );
    assert!(per_subscriber < 64.0, "{per_subscriber:.1} KiB per idle subscriber");
}

/// A stop ends the subscriptions instead of waiting out its drain bound for
/// streams that never end on their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_the_subscriptions() {
    let setup = Setup::new();
    let mut server = setup.start(Some(&config(&setup, "", None)), &[]);
    let client = server.client();
    let a = client.get("/v1/bucket", &[("Api-Key", ALICE)]).await.json()["bucket"].as_str().unwrap().to_string();
    let mut feed = Feed::start(&server.url, &[("Api-Key", ALICE)], &[format!("files/{a}/")]).await;
    // Well within the 20 s the stop would otherwise wait for the stream.
    let status = server.terminate(Duration::from_secs(5)).expect("the server stops without waiting for the feed");
    assert!(status.success(), "{status}");
    while feed.next(Duration::from_secs(5)).await.is_some() {}
    assert!(feed.ended, "the stream was ended, not cut");
}
