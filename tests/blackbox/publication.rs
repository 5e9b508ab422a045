//! DIAL's publication flow end to end: create (copy to review), approve
//! (copy to public, rules), reject, withdraw, DELETE actions, and the
//! public-folder rules deciding who reads and lists what.

use serde_json::{Value, json};

use crate::support::{Client, JwtUser as User, Reply, Server, Setup};

const HS_SECRET: &str = "publication-secret";
/// A project key holding the `team-a` role (keys have roles, not claims).
const TEAM_KEY: &str = "team-a-key";

struct Fixture {
    _setup: Setup,
    _server: Server,
    client: Client,
    alice: User,
    admin: User,
    teammate: User,
    outsider: User,
}

impl Fixture {
    async fn start() -> Self {
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\nroles_claim = \"roles\"\n\
             [keys.{TEAM_KEY}]\nproject = \"team-tool\"\nroles = [\"team-a\"]\n"
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
        let admin = User::new(&client, HS_SECRET, "root", &["admin"]).await;
        let teammate = User::new(&client, HS_SECRET, "bob", &["team-a"]).await;
        let outsider = User::new(&client, HS_SECRET, "carol", &["other"]).await;
        Self { _setup: setup, _server: server, client, alice, admin, teammate, outsider }
    }

    async fn post(&self, user: &User, op: &str, body: Value) -> Reply {
        let mut headers = user.auth().to_vec();
        headers.push(("Content-Type", "text/plain"));
        self.client.post(&format!("/v1/ops/publication/{op}"), &headers, &body.to_string()).await
    }

    async fn get(&self, user: &User, path: &str) -> Reply {
        self.client.get(path, &user.auth()).await
    }

    async fn put_skill(&self, user: &User, path: &str, name: &str) -> String {
        let skill_md = format!("---\nname: {name}\ndescription: Does {name} things.\n---\n# {name}\n");
        let files: [(&str, &[u8]); 2] = [("SKILL.md", skill_md.as_bytes()), ("run.py", b"print(1)\n")];
        let reply = self.client.put_files(&format!("/v2/skills/{}/{path}", user.bucket), &user.auth(), &files).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.etag()
    }

    async fn publish(&self, user: &User, resources: Value, rules: Value) -> Reply {
        self.post(
            user,
            "create",
            json!({"name": "tools", "targetFolder": "public/tools/", "resources": resources, "rules": rules}),
        )
        .await
    }
}

fn names(listing: &Value) -> Vec<String> {
    listing["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn a_published_skill_is_readable_by_those_the_rules_admit() {
    let f = Fixture::start().await;
    let a = &f.alice.bucket;
    let source_etag = f.put_skill(&f.alice, "team/pdf", "pdf").await;
    let source = format!("skills/{a}/team/pdf");

    let rules = json!([{"function": "EQUAL", "source": "roles", "targets": ["team-a"]}]);
    let reply = f
        .publish(
            &f.alice,
            // Both named as listings name resources (`…/pdf/`): the stored
            // target is the canonical `…/pdf` (checked below).
            json!([{"action": "ADD", "sourceUrl": format!("{source}/"), "targetUrl": "skills/public/tools/pdf/"}]),
            rules.clone(),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let publication = reply.json();
    assert_eq!(publication["status"], "PENDING");
    assert_eq!(publication["resourceTypes"], json!(["SKILL"]));
    let url = publication["url"].as_str().unwrap().to_string();
    assert!(url.starts_with(&format!("publications/{a}/")), "{url}");
    let review = publication["resources"][0]["reviewUrl"].as_str().unwrap().to_string();
    // As DIAL: `{type}/{review bucket}/{path below the target folder}`.
    let review_parts: Vec<&str> = review.split('/').collect();
    assert_eq!((review_parts[0], review_parts.len(), review_parts[2]), ("skills", 3, "pdf"), "{review}");

    // The review copy: readable by its author and admins, with the same etag.
    let copy = f.get(&f.alice, &format!("/v2/{review}")).await;
    assert_eq!(copy.status, 200, "{}", copy.body);
    assert_eq!(copy.etag(), source_etag);
    assert_eq!(f.get(&f.admin, &format!("/v2/{review}/files/run.py")).await.status, 200);
    assert_eq!(f.get(&f.teammate, &format!("/v2/{review}")).await.status, 403);
    assert_eq!(f.get(&f.teammate, "/v2/skills/public/tools/pdf").await.status, 404, "not public before approval");

    // Who sees the publication.
    let own = f.post(&f.alice, "list", json!({"url": format!("publications/{a}/")})).await.json();
    assert_eq!(own["publications"][0]["url"], url.as_str());
    assert!(own["publications"][0].get("resources").is_none(), "lists carry no resources");
    assert_eq!(f.post(&f.alice, "list", json!({"url": "publications/public/"})).await.status, 403);
    let queue = f.post(&f.admin, "list", json!({"url": "publications/public/"})).await.json();
    assert_eq!(queue["publications"].as_array().unwrap().len(), 1);
    let reply = f.post(&f.teammate, "get", json!({"url": url})).await;
    assert_eq!((reply.status, reply.body.clone()), (403, format!("Forbidden resource: {url}")));
    assert_eq!(
        f.post(&f.admin, "get", json!({"url": url})).await.json()["resources"][0]["targetUrl"],
        "skills/public/tools/pdf"
    );

    // Approval is for admins, once.
    assert_eq!(f.post(&f.alice, "approve", json!({"url": url})).await.status, 403);
    let approved = f.post(&f.admin, "approve", json!({"url": url})).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(approved.json()["status"], "APPROVED");
    let again = f.post(&f.admin, "approve", json!({"url": url})).await;
    assert_eq!((again.status, again.body.clone()), (404, format!("Publication is already finalized: {url}")));
    assert_eq!(f.get(&f.admin, &format!("/v2/{review}")).await.status, 404, "the review copy is gone");
    assert_eq!(
        f.post(&f.admin, "list", json!({"url": "publications/public/"})).await.json()["publications"],
        json!([])
    );

    // The public copy: same etag; the rules admit the team and admins only.
    let public = f.get(&f.teammate, "/v2/skills/public/tools/pdf").await;
    assert_eq!(public.status, 200, "{}", public.body);
    assert_eq!(public.etag(), source_etag);
    assert_eq!(f.get(&f.teammate, "/v2/skills/public/tools/pdf/files/SKILL.md").await.status, 200);
    assert_eq!(f.get(&f.admin, "/v2/skills/public/tools/pdf").await.status, 200);
    assert_eq!(f.get(&f.outsider, "/v2/skills/public/tools/pdf").await.status, 403);
    assert_eq!(f.get(&f.outsider, "/v2/skills/public/tools/pdf/files/SKILL.md").await.status, 403);
    // Roles rules apply to every caller: an API key with the role reads too.
    let key = [("Api-Key", TEAM_KEY)];
    assert_eq!(f.client.get("/v2/skills/public/tools/pdf", &key).await.status, 200);
    assert_eq!(f.client.get("/v2/metadata/skills/public/tools/", &key).await.status, 200);
    let metadata = f.get(&f.teammate, "/v2/metadata/skills/public/tools/pdf").await;
    assert_eq!(metadata.status, 200);
    assert_eq!(metadata.json()["metadata"]["name"], "pdf");

    // Listings hide what the rules hide.
    let root = f.get(&f.teammate, "/v2/metadata/skills/public/").await;
    assert_eq!(names(&root.json()), ["tools"]);
    let root = f.get(&f.outsider, "/v2/metadata/skills/public/").await;
    assert_eq!(root.status, 200);
    assert_eq!(names(&root.json()), Vec::<String>::new());
    assert_eq!(f.get(&f.outsider, "/v2/metadata/skills/public/tools/").await.status, 403);

    // Rules along the folder, for those who may read it.
    let listed = f.post(&f.teammate, "rule/list", json!({"url": "public/tools/"})).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json()["rules"]["public/tools/"], rules);
    assert_eq!(f.post(&f.outsider, "rule/list", json!({"url": "public/tools/"})).await.status, 403);

    // The source is untouched; nobody but admins writes in public.
    assert_eq!(f.get(&f.alice, &format!("/v2/{source}")).await.etag(), source_etag);
    assert_eq!(f.client.delete("/v2/skills/public/tools/pdf", &f.teammate.auth()).await.status, 403);

    // A DELETE action removes a public resource once approved.
    let reply =
        f.publish(&f.alice, json!([{"action": "DELETE", "targetUrl": "skills/public/tools/pdf"}]), json!([])).await;
    assert_eq!(reply.status, 403, "alice is not admitted to public/tools/ any more: {}", reply.body);
    let reply =
        f.publish(&f.teammate, json!([{"action": "DELETE", "targetUrl": "skills/public/tools/pdf"}]), json!([])).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let url = reply.json()["url"].as_str().unwrap().to_string();
    assert_eq!(f.post(&f.admin, "approve", json!({"url": url})).await.status, 200);
    assert_eq!(f.get(&f.admin, "/v2/skills/public/tools/pdf").await.status, 404);
}

#[tokio::test]
async fn reject_withdraw_and_validation() {
    let f = Fixture::start().await;
    let a = &f.alice.bucket;
    f.put_skill(&f.alice, "pdf", "pdf").await;
    let bobs = f.put_skill(&f.teammate, "secret", "secret").await;
    assert!(!bobs.is_empty());
    let source = format!("skills/{a}/pdf");
    let add = json!([{"action": "ADD", "sourceUrl": source, "targetUrl": "skills/public/tools/pdf"}]);

    // Reject: the review copy goes, the comment stays.
    let created = f.publish(&f.alice, add.clone(), json!([])).await.json();
    let url = created["url"].as_str().unwrap().to_string();
    let review = created["resources"][0]["reviewUrl"].as_str().unwrap().to_string();
    assert_eq!(f.post(&f.alice, "reject", json!({"url": url, "comment": "no"})).await.status, 403);
    let rejected = f.post(&f.admin, "reject", json!({"url": url, "comment": "not yet"})).await;
    assert_eq!(rejected.status, 200, "{}", rejected.body);
    assert_eq!(rejected.json()["status"], "REJECTED");
    assert_eq!(rejected.json()["comment"], "not yet");
    assert_eq!(f.get(&f.alice, &format!("/v2/{review}")).await.status, 404);
    assert_eq!(f.get(&f.admin, "/v2/skills/public/tools/pdf").await.status, 404);

    // Withdraw: the author deletes a pending publication.
    let created = f.publish(&f.alice, add.clone(), json!([])).await.json();
    let url = created["url"].as_str().unwrap().to_string();
    let review = created["resources"][0]["reviewUrl"].as_str().unwrap().to_string();
    assert_eq!(f.post(&f.teammate, "delete", json!({"url": url})).await.status, 403);
    assert_eq!(f.post(&f.alice, "delete", json!({"url": url})).await.status, 200);
    assert_eq!(f.get(&f.alice, &format!("/v2/{review}")).await.status, 404);
    assert_eq!(f.post(&f.alice, "get", json!({"url": url})).await.status, 404);

    // Publishing what the author cannot read.
    let foreign = json!([{"action": "ADD", "sourceUrl": format!("skills/{}/secret", f.teammate.bucket), "targetUrl": "skills/public/tools/secret"}]);
    assert_eq!(f.publish(&f.alice, foreign, json!([])).await.status, 403);

    // Validation.
    let bad = |body: Value| f.post(&f.alice, "create", body);
    let reply = bad(json!({"resources": add})).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "Publication \"targetFolder\" is missing"));
    let reply = bad(json!({"targetFolder": "public/", "rules": [{"function": "TRUE", "source": "roles"}]})).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "Rules are not allowed for root targetFolder"));
    let reply = bad(json!({"targetFolder": "public/tools/"})).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "Publication must have at least one resource or rule"));
    let reply = bad(json!({"targetFolder": "private/", "resources": add})).await;
    assert_eq!(reply.status, 400);
    let reply = bad(json!({"targetFolder": "public/tools/", "resources": [{"sourceUrl": source, "targetUrl": "skills/public/tools/x"}]})).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "Resource \"action\" is missing"));
    let reply = bad(json!({"targetFolder": "public/other/", "resources": add})).await;
    assert_eq!(reply.status, 400, "the target must be inside the target folder");
    let reply =
        bad(json!({"targetFolder": "public/tools/", "rules": [{"function": "EQUAL", "source": "roles"}]})).await;
    assert_eq!(reply.status, 400, "EQUAL needs targets");
    // A folder of skills is no source, whichever form names it: `…/grp/`
    // is the resource `grp` only when one lives there (as DIAL: 400, not 404).
    f.put_skill(&f.alice, "grp/one", "one").await;
    for folder in [format!("skills/{a}/grp/"), format!("skills/{a}/nothing/")] {
        let from_folder = json!([{"action": "ADD", "sourceUrl": folder, "targetUrl": "skills/public/tools/grp"}]);
        let reply = bad(json!({"targetFolder": "public/tools/", "resources": from_folder})).await;
        assert_eq!(
            (reply.status, reply.body.clone()),
            (400, format!("Source resource {folder} must be a private item")),
            "{folder}"
        );
    }
    // Someone else's folder: not readable, so nothing is said about it.
    let foreign = format!("skills/{}/", f.teammate.bucket);
    let from_foreign = json!([{"action": "ADD", "sourceUrl": foreign, "targetUrl": "skills/public/tools/grp"}]);
    assert_eq!(bad(json!({"targetFolder": "public/tools/", "resources": from_foreign})).await.status, 403);

    // A target that exists already.
    let created = f.publish(&f.alice, add.clone(), json!([])).await.json();
    assert_eq!(f.post(&f.admin, "approve", json!({"url": created["url"]})).await.status, 200);
    let reply = f.publish(&f.alice, add, json!([])).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "Target resource already exists: skills/public/tools/pdf"));
}

#[tokio::test]
async fn v1_files_and_prompts_are_published_through_review() {
    let f = Fixture::start().await;
    let a = &f.alice.bucket;
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"%PDF-1.4 report".to_vec())
            .file_name("report.pdf")
            .mime_str("application/pdf")
            .unwrap(),
    );
    let upload = reqwest::Client::new()
        .put(format!("{}/v1/files/{a}/docs/report.pdf", f._server.url))
        .header("Authorization", &f.alice.token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 200);
    let mut headers = f.alice.auth().to_vec();
    headers.push(("Content-Type", "text/plain"));
    assert_eq!(
        f.client.put_body(&format!("/v1/prompts/{a}/hello"), &headers, br#"{"content":"Hi"}"#).await.status,
        200
    );

    let reply = f
        .publish(
            &f.alice,
            json!([
                {"action": "ADD", "sourceUrl": format!("files/{a}/docs/report.pdf"), "targetUrl": "files/public/tools/report.pdf"},
                {"action": "ADD", "sourceUrl": format!("prompts/{a}/hello"), "targetUrl": "prompts/public/tools/hello"}
            ]),
            json!([]),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let publication = reply.json();
    assert_eq!(publication["resourceTypes"], json!(["FILE", "PROMPT"]));
    let review = publication["resources"][0]["reviewUrl"].as_str().unwrap().to_string();
    let copy = f.get(&f.alice, &format!("/v1/{review}")).await;
    assert_eq!((copy.status, copy.body.as_str()), (200, "%PDF-1.4 report"));
    assert_eq!(f.get(&f.outsider, &format!("/v1/{review}")).await.status, 403);

    let approved = f.post(&f.admin, "approve", json!({"url": publication["url"]})).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    let file = f.get(&f.outsider, "/v1/files/public/tools/report.pdf").await;
    assert_eq!((file.status, file.body.as_str()), (200, "%PDF-1.4 report"), "no rules: everyone reads");
    assert_eq!(file.headers["content-type"], "application/pdf");
    let prompt = f.get(&f.outsider, "/v1/prompts/public/tools/hello").await;
    assert_eq!((prompt.status, prompt.body.as_str()), (200, r#"{"content":"Hi"}"#));
    assert_eq!(f.get(&f.alice, &format!("/v1/{review}")).await.status, 404, "review copies are removed");
    assert_eq!(f.get(&f.alice, &format!("/v1/files/{a}/docs/report.pdf")).await.status, 200, "the source stays");
    assert_eq!(f.client.put_body("/v1/prompts/public/tools/hello", &headers, b"{}").await.status, 403);
}

#[tokio::test]
async fn rules_apply_to_folders_named_with_escapes() {
    let f = Fixture::start().await;
    f.put_skill(&f.alice, "pdf", "pdf").await;
    let body = json!({
        "targetFolder": "public/my team/",
        "resources": [{"action": "ADD", "sourceUrl": format!("skills/{}/pdf", f.alice.bucket), "targetUrl": "skills/public/my%20team/pdf"}],
        "rules": [{"function": "FALSE", "source": "roles"}]
    });
    let created = f.post(&f.alice, "create", body).await;
    assert_eq!(created.status, 200, "{}", created.body);
    assert_eq!(created.json()["targetFolder"], "public/my%20team/", "stored in canonical form");
    assert_eq!(f.post(&f.admin, "approve", json!({"url": created.json()["url"]})).await.status, 200);
    assert_eq!(f.get(&f.admin, "/v2/skills/public/my%20team/pdf").await.status, 200);
    assert_eq!(f.get(&f.teammate, "/v2/skills/public/my%20team/pdf").await.status, 403, "FALSE admits nobody");
    let rules = f.post(&f.admin, "rule/list", json!({"url": "public/my team/"})).await.json();
    assert_eq!(rules["rules"]["public/my%20team/"][0]["function"], "FALSE");
}

/// Approve is all or nothing: when one copy cannot be made (its target
/// exists), the copies already made are undone, the rules are not stored,
/// and the publication stays pending — ready to be approved again once the
/// obstacle is gone, or withdrawn (which removes its review copies).
#[tokio::test]
async fn an_approve_that_cannot_finish_changes_nothing() {
    let f = Fixture::start().await;
    let a = &f.alice.bucket;
    f.put_skill(&f.alice, "pdf", "pdf").await;
    f.put_skill(&f.alice, "csv", "csv").await;
    let resources = json!([
        {"action": "ADD", "sourceUrl": format!("skills/{a}/pdf"), "targetUrl": "skills/public/tools/pdf"},
        {"action": "ADD", "sourceUrl": format!("skills/{a}/csv"), "targetUrl": "skills/public/tools/csv"},
    ]);
    let rules = json!([{"function": "EQUAL", "source": "roles", "targets": ["team-a"]}]);
    let created = f.publish(&f.alice, resources, rules).await.json();
    let url = created["url"].as_str().unwrap().to_string();

    // The second target appears meanwhile (admins write public directly).
    let skill_md = "---\nname: csv\ndescription: The admin's own.\n---\n";
    let files: [(&str, &[u8]); 1] = [("SKILL.md", skill_md.as_bytes())];
    let theirs = f.client.put_files("/v2/skills/public/tools/csv", &f.admin.auth(), &files).await;
    assert_eq!(theirs.status, 200, "{}", theirs.body);

    let approve = f.post(&f.admin, "approve", json!({"url": url})).await;
    assert_eq!(approve.status, 412, "{}", approve.body);
    assert_eq!(f.post(&f.admin, "get", json!({"url": url})).await.json()["status"], "PENDING");
    assert_eq!(f.get(&f.admin, "/v2/skills/public/tools/pdf").await.status, 404, "the first copy is undone");
    assert_eq!(f.get(&f.admin, "/v2/skills/public/tools/csv").await.etag(), theirs.etag(), "theirs is untouched");
    let listed = f.post(&f.admin, "rule/list", json!({"url": "public/tools/"})).await.json();
    assert!(listed["rules"].get("public/tools/").is_none(), "no rules stored: {listed}");
    assert_eq!(f.get(&f.outsider, "/v2/metadata/skills/public/tools/").await.status, 200, "no rule hides it yet");

    // Once the obstacle is gone the same publication approves whole.
    assert_eq!(f.client.delete("/v2/skills/public/tools/csv", &f.admin.auth()).await.status, 200);
    let approve = f.post(&f.admin, "approve", json!({"url": url})).await;
    assert_eq!(approve.status, 200, "{}", approve.body);
    assert_eq!(f.get(&f.teammate, "/v2/skills/public/tools/pdf").await.status, 200);
    assert_eq!(f.get(&f.teammate, "/v2/skills/public/tools/csv").await.status, 200);
    assert_eq!(f.get(&f.outsider, "/v2/skills/public/tools/csv").await.status, 403, "the rules now apply");

    // A failed approve followed by a withdrawal leaves no review copy behind.
    f.put_skill(&f.alice, "tsv", "tsv").await;
    let resources =
        json!([{"action": "ADD", "sourceUrl": format!("skills/{a}/tsv"), "targetUrl": "skills/public/misc/tsv"}]);
    let body = json!({"targetFolder": "public/misc/", "resources": resources});
    let created = f.post(&f.alice, "create", body).await.json();
    let url = created["url"].as_str().unwrap().to_string();
    let review = created["resources"][0]["reviewUrl"].as_str().unwrap().to_string();
    let files: [(&str, &[u8]); 1] = [("SKILL.md", b"---\nname: tsv\ndescription: x\n---\n")];
    assert_eq!(f.client.put_files("/v2/skills/public/misc/tsv", &f.admin.auth(), &files).await.status, 200);
    assert_eq!(f.post(&f.admin, "approve", json!({"url": url})).await.status, 412);
    assert_eq!(f.post(&f.alice, "delete", json!({"url": url})).await.status, 200);
    assert_eq!(f.get(&f.alice, &format!("/v2/{review}")).await.status, 404, "withdrawn: the review copy is gone");
    assert_eq!(f.post(&f.admin, "approve", json!({"url": url})).await.status, 404);
}

/// A page of a public listing never ends on, and its token never names,
/// something the rules hide from the caller (v2 and v1, flat and recursive).
#[tokio::test]
async fn listing_tokens_never_name_hidden_items() {
    let f = Fixture::start().await;
    let a = &f.alice.bucket;
    f.put_skill(&f.alice, "plan", "plan").await;
    f.put_skill(&f.alice, "tool", "tool").await;
    let prompt = |name: &str| format!("/v1/prompts/{a}/{name}");
    for name in ["plan", "tool"] {
        assert_eq!(f.client.put_body(&prompt(name), &f.alice.auth(), b"{}").await.status, 200);
    }
    let hr_only = json!([{"function": "EQUAL", "source": "roles", "targets": ["hr"]}]);
    for (folder, name, rules) in [("a-secret", "plan", hr_only), ("z-open", "tool", json!([]))] {
        let resources = json!([
            {"action": "ADD", "sourceUrl": format!("skills/{a}/{name}"), "targetUrl": format!("skills/public/{folder}/{name}")},
            {"action": "ADD", "sourceUrl": format!("prompts/{a}/{name}"), "targetUrl": format!("prompts/public/{folder}/{name}")},
        ]);
        let body = json!({"targetFolder": format!("public/{folder}/"), "resources": resources, "rules": rules});
        let created = f.post(&f.alice, "create", body).await;
        assert_eq!(created.status, 200, "{}", created.body);
        let url = created.json()["url"].as_str().unwrap().to_string();
        assert_eq!(f.post(&f.admin, "approve", json!({"url": url})).await.status, 200);
    }
    for listing in [
        "/v2/metadata/skills/public/?limit=1",
        "/v2/metadata/skills/public/?limit=1&recursive=true",
        "/v1/metadata/prompts/public/?limit=1",
        "/v1/metadata/prompts/public/?limit=1&recursive=true",
    ] {
        let mut shown = String::new();
        let mut url = listing.to_string();
        for _ in 0..10 {
            let page = f.get(&f.outsider, &url).await;
            assert_eq!(page.status, 200, "{url}: {}", page.body);
            let page = page.json();
            shown.push_str(&serde_json::to_string(&page["items"]).unwrap());
            assert!(page["items"].as_array().is_some_and(|items| !items.is_empty()), "{url}: an empty page: {page}");
            let Some(token) = page.get("nextToken").and_then(|t| t.as_str()) else { break };
            let decoded = String::from_utf8(bs58::decode(token).into_vec().unwrap_or_default()).unwrap_or_default();
            assert!(!decoded.contains("a-secret"), "{url}: the token names a hidden item: {decoded}");
            url = format!("{listing}&token={token}");
        }
        assert!(shown.contains("z-open") && !shown.contains("a-secret"), "{listing}: {shown}");
    }
}

/// A publication is decided once, whatever races it: an approval, a
/// rejection and the author's withdrawal sent together leave exactly one
/// of them standing, and the public copy exists exactly when the approval
/// won (its copies are undone when it lost the swap).
#[tokio::test]
async fn racing_decisions_leave_exactly_one_standing() {
    let f = Fixture::start().await;
    let a = &f.alice.bucket;
    let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
    for round in 0..8 {
        let name = format!("race{round}");
        f.put_skill(&f.alice, &name, &name).await;
        let target = format!("skills/public/tools/{name}");
        let resources = json!([{"action": "ADD", "sourceUrl": format!("skills/{a}/{name}"), "targetUrl": target}]);
        let created = f.publish(&f.alice, resources, json!([])).await;
        assert_eq!(created.status, 200, "{}", created.body);
        let url = created.json()["url"].as_str().unwrap().to_string();
        let body = json!({"url": url});
        let (approve, reject, withdraw) = tokio::join!(
            f.post(&f.admin, "approve", body.clone()),
            f.post(&f.admin, "reject", body.clone()),
            f.post(&f.alice, "delete", body.clone()),
        );
        let won: Vec<&str> = [("approve", &approve), ("reject", &reject), ("withdraw", &withdraw)]
            .into_iter()
            .filter(|(_, reply)| reply.status == 200)
            .map(|(name, _)| name)
            .collect();
        // A withdrawal after a decision succeeds too (it removes the record);
        // approve and reject never both win.
        let decisions: Vec<&&str> = won.iter().filter(|name| **name != "withdraw").collect();
        assert!(decisions.len() <= 1, "round {round}: {won:?}");
        for (name, reply) in [("approve", &approve), ("reject", &reject)] {
            assert!(matches!(reply.status, 200 | 404), "round {round}: {name} {} {}", reply.status, reply.body);
        }
        let public = f.get(&f.admin, &format!("/v2/{target}")).await.status;
        let approved = approve.status == 200;
        assert_eq!(public, if approved { 200 } else { 404 }, "round {round}: {won:?}");
        *outcomes.entry(decisions.first().map_or("withdraw", |name| **name)).or_default() += 1;
    }
    assert!(outcomes.values().sum::<usize>() == 8, "{outcomes:?}");
}
