//! Per-type quotas through the real binary: a bucket full of skills
//! refuses the next one with a 413 naming the quota (in DIAL's dialect and
//! in the hosted skills APIs'), concurrent creates on pooled connections
//! take the last slot once, a delete frees it, and `/metrics` shows the
//! quota and its refusals.

use crate::skills_api::multipart;
use crate::support::{Client, Server, Setup, sample, scrape};

const KEY: &str = "quota-key-0123456789";

fn skill_md(name: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: A skill counted against the quota.\n---\n# {name}\n").into_bytes()
}

struct Fixture {
    _setup: Setup,
    _server: Server,
    client: Client,
    bucket: String,
}

impl Fixture {
    async fn start() -> Self {
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[keys.{KEY}]\nproject = \"quotas\"\nroles = [\"user\"]\n\
             [handlers.types.skills.quota]\nmax_resources = 3\nmax_bytes = 1048576\n"
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let reply = client.get("/v1/bucket", &[("Api-Key", KEY)]).await;
        let bucket = reply.json()["bucket"].as_str().unwrap().to_string();
        Self { _setup: setup, _server: server, client, bucket }
    }

    async fn put(&self, name: &str) -> (u16, String) {
        let url = format!("/v2/skills/{}/{name}", self.bucket);
        let reply = self.client.put_files(&url, &[("Api-Key", KEY)], &[("SKILL.md", &skill_md(name))]).await;
        (reply.status, reply.body)
    }
}

#[tokio::test]
async fn a_full_bucket_refuses_the_next_skill_until_one_is_deleted() {
    let f = Fixture::start().await;
    assert_eq!(f.put("first").await.0, 200);
    // Eight creates at once for the two slots left: two get them.
    let names: Vec<String> = (0..8).map(|i| format!("racing-{i}")).collect();
    let outcomes = futures_util::future::join_all(names.iter().map(|name| f.put(name))).await;
    let created = outcomes.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(created, 2, "{outcomes:?}");
    for (status, body) in outcomes.iter().filter(|(status, _)| *status != 200) {
        assert_eq!(*status, 413, "{body}");
        assert!(body.contains("handlers.types.skills.quota.max_resources") && body.contains("of the 3"), "{body}");
    }
    // What was refused is not there.
    for (name, (status, _)) in names.iter().zip(&outcomes) {
        let read = f.client.get(&format!("/v2/metadata/skills/{}/{name}", f.bucket), &[("Api-Key", KEY)]).await;
        assert_eq!(read.status, if *status == 200 { 200 } else { 404 }, "{name}: {}", read.body);
    }

    // The hosted skills APIs answer in their own shape.
    let upload = ("files[]", "hosted/SKILL.md", skill_md("hosted"));
    let (content_type, body) = multipart(&[], &[upload]);
    let auth = format!("Bearer {KEY}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", content_type.as_str())];
    let reply = f.client.send_raw("POST", "/openai/v1/skills", &headers, vec![body.into()]).await;
    assert_eq!(reply.status, 413, "{}", reply.body);
    let message = reply.json()["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("quota.max_resources"), "{}", reply.body);

    let metrics = scrape(&f.client).await;
    let limit = [("group", "skills"), ("quota", "max_resources")];
    assert_eq!(sample(&metrics, "dial_host_type_quota_limit", &limit), 3.0, "{metrics}");
    assert_eq!(
        sample(&metrics, "dial_host_type_quota_limit", &[("group", "skills"), ("quota", "max_bytes")]),
        1048576.0
    );
    assert_eq!(sample(&metrics, "dial_host_type_quota_refusals_total", &limit), 7.0, "{metrics}");

    // A delete frees a slot.
    let deleted = f.client.delete(&format!("/v2/skills/{}/first", f.bucket), &[("Api-Key", KEY)]).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert_eq!(f.put("after-delete").await.0, 200);
    assert_eq!(f.put("one-too-many").await.0, 413);
}
