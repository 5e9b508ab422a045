//! The consent documents and the audit trail (issue 38, items 9–11): a
//! user's consent document names the resources the application declares,
//! and a changed declaration asks again; a refused admin-consent attempt is
//! audited like a grant or a withdrawal; JSON log lines carry one key each.

use serde_json::{Value, json};

use crate::support::{Client, JwtUser as User, Server, Setup};

const HS_SECRET: &str = "consent-audit-secret";

struct Fixture {
    setup: Setup,
    server: Server,
    client: Client,
    alice: User,
    boss: User,
}

impl Fixture {
    async fn start() -> Self {
        let setup = Setup::new();
        let audit = setup.path().join("audit.jsonl");
        let config = setup.config(&format!(
            r#"[encryption]
secret = "s"
[identity]
hs256_secret = "{HS_SECRET}"
[log]
format = "json"
[audit]
file = "{audit}"
[applications.writer]
endpoint = "http://127.0.0.1:9/chat/completions"
resource_dependencies = [{{ kind = "dial.resourceLink", link_id = "notes", target = {{ path = "files/{{current-user}}/notes/" }}, access = ["READ", "WRITE"], required = true }}]
"#,
            audit = audit.display()
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
        let boss = User::new(&client, HS_SECRET, "boss", &["admin"]).await;
        Self { setup, server, client, alice, boss }
    }

    fn audit_lines(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.setup.path().join("audit.jsonl")).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).expect("an audit line is JSON")).collect()
    }
}

/// A stored application that asks its users' consent, declaring `targets`.
fn consenting(targets: &[(&str, &[&str])]) -> String {
    let records: Vec<Value> = targets
        .iter()
        .enumerate()
        .map(|(n, (path, access))| {
            json!({"kind": "dial.resourceLink", "linkId": format!("l{n}"), "target": {"path": path},
                   "access": access, "required": false})
        })
        .collect();
    json!({"endpoint": "http://127.0.0.1:9/chat/completions", "features": {"consentRequired": true},
           "resourceDependencies": records})
    .to_string()
}

/// Item 11: the document a user accepts names what the application will
/// reach (DIAL's `resources` section), an accepted one still says so, and
/// a declaration changed since asks again.
#[tokio::test]
async fn a_users_consent_names_the_declared_resources_and_binds_them() {
    let f = Fixture::start().await;
    let app = "/v1/applications/public/consenting";
    let declared = consenting(&[("files/{current-user}/notes/", &["READ", "WRITE"])]);
    assert_eq!(f.client.put_body(app, &f.boss.auth(), declared.as_bytes()).await.status, 200);
    let consent = "/v1/consent/applications/public/consenting";

    let asked = f.client.get(consent, &f.alice.auth()).await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let document = asked.json()["consent"].clone();
    assert_eq!(asked.json()["accepted"], false);
    assert_eq!(
        document["resources"],
        json!([{"url": "files/{current-user}/notes/", "access": ["READ", "WRITE"]}]),
        "{document}"
    );
    let accepted = f.client.post(consent, &f.alice.auth(), &json!({"consent": document}).to_string()).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    let now = f.client.get(consent, &f.alice.auth()).await.json();
    assert_eq!(now["accepted"], true, "{now}");
    assert_eq!(now["consent"], document, "an accepted consent still says what it covers: {now}");

    let widened = consenting(&[("files/{current-user}/", &["READ", "WRITE"])]);
    assert_eq!(f.client.put_body(app, &f.boss.auth(), widened.as_bytes()).await.status, 200);
    let again = f.client.get(consent, &f.alice.auth()).await.json();
    assert_eq!(again["accepted"], false, "a changed declaration asks again: {again}");
    assert_eq!(again["consent"]["resources"][0]["url"], "files/{current-user}/");
}

/// Items 9 and 10: a non-admin's refused attempts at an application's admin
/// consent are audit events (`outcome: denied`) as grants and withdrawals
/// are; every JSON log line, audit lines included, has each key once.
#[tokio::test]
async fn refused_admin_consent_is_audited_and_log_lines_have_one_key_each() {
    let f = Fixture::start().await;
    let path = "/v1/consent/writer/admin-consent";
    assert_eq!(f.client.post(path, &f.alice.auth(), "{}").await.status, 403);
    assert_eq!(f.client.delete(path, &f.alice.auth()).await.status, 403);
    assert_eq!(f.client.post(path, &f.boss.auth(), "{}").await.status, 200);
    let events: Vec<(String, String, String)> = f
        .audit_lines()
        .iter()
        .map(|line| {
            let text = |key: &str| line[key].as_str().unwrap_or_default().to_string();
            (text("event"), text("outcome"), text("user"))
        })
        .collect();
    assert_eq!(
        events,
        [
            ("admin_consent_grant".into(), "denied".into(), "alice".into()),
            ("admin_consent_withdraw".into(), "denied".into(), "alice".into()),
            ("admin_consent_grant".into(), "granted".into(), "boss".into()),
        ],
        "{events:?}"
    );

    let lines =
        f.server.logged_once(|lines| lines.iter().filter(|l| l.contains("resource dependency audit")).count() >= 3);
    let audit: Vec<&String> = lines.iter().filter(|line| line.contains("resource dependency audit")).collect();
    assert_eq!(audit.len(), 3, "{lines:?}");
    for line in lines.iter().filter(|line| line.starts_with('{')) {
        let TopLevelKeys(mut keys) = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let all = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), all, "a key twice in {line}");
    }
}

/// The keys of a JSON object as written, repeats included (a map type
/// would keep one of each).
struct TopLevelKeys(Vec<String>);

impl<'de> serde::Deserialize<'de> for TopLevelKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = TopLevelKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<TopLevelKeys, A::Error> {
                let mut keys = Vec::new();
                while let Some((key, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                    keys.push(key);
                }
                Ok(TopLevelKeys(keys))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}
