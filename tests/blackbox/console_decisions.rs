//! The admin console as a tool for daily work (issue 42), in Chromium against the real binary: the queue as a
//! table read in parallel, what a decision will do before it is made (rules that take access away, the
//! handler's warnings, names hiding characters), who decided (in the page, the API and the audit), and the
//! smaller things an admin trips on (confirmations that stay armed, expired and idle credentials, Markdown,
//! times, what a screen reader hears). Helpers are `console.rs`'s.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{Value, json};

use crate::console::{ADMIN, HS_SECRET, USER, browse, with_session};
use crate::support::JwtUser;

/// Eight pending publications (one with rules that shut `user` out of `public/team/`, one whose skill the
/// handler warns about and which holds a file name with bidi controls): the queue is a table of eight rows
/// read in parallel; the detail views show the consequences and the findings; the rules approval asks
/// twice, its question lapses; decisions keep who, when and why (page, API, audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_sees_what_a_decision_does_and_who_decided() {
    let Some((_driver, f, session)) = browse("decisions", false, (1280, 800)).await else { return };
    let fixture = f.clone();
    with_session(session, move |s| async move {
        let f = fixture;
        let alice = f.bucket(USER).await;
        let client = f.client();
        // public/team/ admits `user` and `admin` today, through a rule an earlier publication set; one skill
        // is published there.
        let live = format!("skills/{alice}/team/live-skill");
        f.put_skill(USER, &live, "live-skill", "print('live')\n").await;
        let body = json!({"name": "team rules", "targetFolder": "public/team/",
            "resources": [{"action": "ADD", "sourceUrl": live, "targetUrl": "skills/public/team/live-skill"}],
            "rules": [{"function": "EQUAL", "source": "roles", "targets": ["user", "admin"]}]});
        let created = client.post("/v1/ops/publication/create", &[USER], &body.to_string()).await;
        let url = created.json()["url"].as_str().unwrap().to_string();
        let approved = client.post("/v1/ops/publication/approve", &[ADMIN], &json!({"url": url}).to_string()).await;
        assert_eq!(approved.status, 200, "{}", approved.body);

        // Six plain ones, one the handler warns about (name ≠ folder) with a file whose name hides characters,
        // and one whose rules would leave only admins.
        for index in 0..6 {
            let source = format!("skills/{alice}/team/tool-{index}");
            f.put_skill(USER, &source, &format!("tool-{index}"), "print('tool')\n").await;
            f.publish(&[(&source, &format!("skills/public/team/tool-{index}"))]).await;
        }
        let skill = "---\nname: other-name\ndescription: Notes. Use when notes are needed.\n---\n# Notes\n\n\
            See [the wiki](https://en.wikipedia.org/wiki/Foo_(bar)), ![a diagram](img/flow.png) and \
            [the script](scripts/run.py).\n";
        let evil = "notes/\u{202E}evil\u{202D}txt.md";
        let files: [(&str, &[u8]); 3] =
            [("SKILL.md", skill.as_bytes()), ("scripts/run.py", b"print('from the script')\n"), (evil, b"hi\n")];
        let warned = format!("skills/{alice}/team/notes");
        let put = client.put_files(&format!("/v2/{warned}"), &[USER], &files).await;
        assert_eq!(put.status, 200, "{}", put.body);
        let warned_publication = f.publish(&[(&warned, "skills/public/team/notes")]).await;
        let strict = format!("skills/{alice}/team/admin-only");
        f.put_skill(USER, &strict, "admin-only", "print('x')\n").await;
        let body = json!({"name": "admins only", "targetFolder": "public/team/",
            "resources": [{"action": "ADD", "sourceUrl": strict, "targetUrl": "skills/public/team/admin-only"}],
            "rules": [{"function": "EQUAL", "source": "roles", "targets": ["admin"]}]});
        let created = client.post("/v1/ops/publication/create", &[USER], &body.to_string()).await;
        let rules_publication = created.json()["url"].as_str().unwrap().to_string();

        // The key is typed into a password field (a screen reader does not echo it).
        s.goto("").await;
        let kind = s.browser.execute("return document.querySelector('#credential').type;", vec![]).await.unwrap();
        assert_eq!(kind, json!("password"));
        s.sign_in(ADMIN.1).await;
        s.wait_text("table.queue", "admins only").await;
        assert_eq!(s.count("table.queue tbody tr").await, 8);
        let height = s.browser.execute("return document.documentElement.scrollHeight;", vec![]).await.unwrap();
        assert!(height.as_u64().unwrap() < 2500, "the queue is a table you can scan: {height} px");
        // Read in parallel: some of the queue's API requests overlapped in time.
        let overlap = "const api = performance.getEntriesByType('resource').filter((e) => e.name.includes('/v2/metadata/')); \
            return api.some((a) => api.some((b) => a !== b && b.startTime < a.responseEnd && b.startTime >= a.startTime));";
        assert_eq!(s.browser.execute(overlap, vec![]).await.unwrap(), json!(true), "requests one after another");
        let row = s.text("table.queue").await;
        assert!(row.contains("1 warning") && row.contains("1 name with hidden characters"), "{row}");
        // Times to the minute, in words a person reads (no milliseconds).
        let page = s.text("body").await;
        assert!(!regex_like_millis(&page), "{page}");
        s.assert_fits("the queue").await;
        s.shot("queue").await;

        // The warned one: the handler's warning, the hidden characters spelled out, the Markdown's links.
        s.goto(&format!("#publication?url={}", warned_publication.replace('/', "%2F"))).await;
        let card = format!("article.publication[data-url='{warned_publication}']");
        let findings = s.wait_text(&format!("{card} .findings"), "warnings").await;
        assert!(findings.contains("is named 'notes'") && findings.contains("U+202E"), "{findings}");
        assert_eq!(s.count(&format!("{card} a[href='https://en.wikipedia.org/wiki/Foo_(bar)']")).await, 1);
        assert!(s.text(&format!("{card} .image-ref")).await.contains("image: a diagram"));
        s.click(&format!("{card} a.file-link[data-path='scripts/run.py']")).await;
        s.wait_text(&format!("{card} .file-view"), "print('from the script')").await;
        // Changes are said in words as well as by colour and sign; the comment field names what it is for.
        assert!(s.count(&format!("{card} .diff .add .sr-only")).await > 0);
        let label = s.text(&format!("{card} label[for^='comment-']")).await;
        assert!(label.contains("alice") && label.contains("publish 1"), "{label}");
        s.shot("publication-findings").await;
        // Rejected with a comment.
        let comment = s.browser.find(Locator::Css(&format!("{card} input[id^='comment-']"))).await.unwrap();
        comment.send_keys("name it like its folder").await.unwrap();
        s.click(&format!("{card} button.reject")).await;
        s.wait_text(&format!("{card} .answer"), "cannot be undone").await;
        s.click(&format!("{card} button.reject")).await;
        s.wait_text(&format!("{card} .decision"), "Rejected by project:ops").await;

        // The rules one: now beside proposed, who loses access and what they lose.
        s.goto(&format!("#publication?url={}", rules_publication.replace('/', "%2F"))).await;
        let card = format!("article.publication[data-url='{rules_publication}']");
        let losers = s.wait_text(&format!("{card} .losers"), "roles = user").await;
        assert!(losers.contains("1 resource") && losers.contains("live-skill"), "{losers}");
        assert!(s.text(&format!("{card} .rules-now")).await.contains("user, admin"));
        s.shot_at("publication-rules", &format!("{card} .consequences")).await;
        // Approving asks first; the question lapses, and a later click asks again.
        s.click(&format!("{card} button.approve")).await;
        s.wait_text(&format!("{card} .answer"), "takes access away").await;
        tokio::time::sleep(Duration::from_secs(9)).await;
        s.wait_text(&format!("{card} .answer"), "Not confirmed in time").await;
        s.click(&format!("{card} button.approve")).await;
        s.wait_text(&format!("{card} .answer"), "takes access away").await;
        let get = json!({"url": rules_publication}).to_string();
        assert_eq!(client.post("/v1/ops/publication/get", &[USER], &get).await.json()["status"], "PENDING");
        s.click(&format!("{card} button.approve")).await;
        s.wait_text(&format!("{card} .decision"), "Approved by project:ops").await;

        // Who decided, through the API: on the record, in the decided list, and in the audit trail.
        let record = client.post("/v1/ops/publication/get", &[USER], &get).await.json();
        assert_eq!((record["status"].as_str(), record["decidedBy"].as_str()), (Some("APPROVED"), Some("project:ops")));
        assert!(record["decidedAt"].as_i64().unwrap() > 1_700_000_000_000, "{record}");
        let rejected = json!({"url": warned_publication}).to_string();
        let record = client.post("/v1/ops/publication/get", &[USER], &rejected).await.json();
        assert_eq!(record["comment"], "name it like its folder");
        let decided = json!({"url": "publications/public/", "decided": true}).to_string();
        let listed = client.post("/v1/ops/publication/list", &[ADMIN], &decided).await.json();
        let listed = listed["publications"].as_array().unwrap();
        assert_eq!(listed.len(), 3, "{listed:?}");
        assert!(listed.iter().all(|p| p["decidedBy"] == "project:ops" && p["decidedAt"].is_i64()), "{listed:?}");
        let queue = json!({"url": "publications/public/"}).to_string();
        let pending = client.post("/v1/ops/publication/list", &[ADMIN], &queue).await.json();
        assert_eq!(pending["publications"].as_array().unwrap().len(), 6);
        let refused = client.post("/v1/ops/publication/list", &[USER], &decided).await;
        assert_eq!(refused.status, 403, "only admins list the decided ones");
        let audit = std::fs::read_to_string(f.setup.path().join("audit.jsonl")).unwrap();
        let events: Vec<Value> = audit.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        let reject = events.iter().find(|e| e["event"] == "publication_reject").expect("the rejection audited");
        assert_eq!((&reject["user"], &reject["reason"]), (&json!("project:ops"), &json!("name it like its folder")));
        assert_eq!(events.iter().filter(|e| e["event"] == "publication_approve").count(), 2);

        // The queue page lists the decided ones with who, when and why.
        s.goto("#publications").await;
        let decided = s.wait_text("table.decided", "name it like its folder").await;
        assert!(decided.contains("project:ops") && decided.contains("REJECTED") && decided.contains("admins only"), "{decided}");
        assert_eq!(s.count("table.queue tbody tr").await, 6);
    })
    .await;
}

/// Public folders (issue 42, item 8): every folder that holds something with its rules and counts; a folder's
/// page shows the rules along it, mends its own with the consequences first (the change on record as a
/// decided publication), unpublishes a skill and restores it from the folder's deleted ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_browses_and_mends_public_folders() {
    let Some((_driver, f, session)) = browse("public", false, (1280, 800)).await else { return };
    let fixture = f.clone();
    with_session(session, move |s| async move {
        let f = fixture;
        let alice = f.bucket(USER).await;
        let client = f.client();
        // public/team/ holds a and b and admits `user` and `admin`; public/team/sub/ holds c.
        let mut resources = Vec::new();
        for name in ["a", "b", "sub/c"] {
            let source = format!("skills/{alice}/{}", name.replace('/', "-"));
            f.put_skill(USER, &source, &name.replace("sub/", ""), "print('x')\n").await;
            resources
                .push(json!({"action": "ADD", "sourceUrl": source, "targetUrl": format!("skills/public/team/{name}")}));
        }
        let body = json!({"name": "team", "targetFolder": "public/team/", "resources": resources,
            "rules": [{"function": "EQUAL", "source": "roles", "targets": ["user", "admin"]}]});
        let created = client.post("/v1/ops/publication/create", &[USER], &body.to_string()).await;
        let url = created.json()["url"].as_str().unwrap().to_string();
        let approved = client.post("/v1/ops/publication/approve", &[ADMIN], &json!({"url": url}).to_string()).await;
        assert_eq!(approved.status, 200, "{}", approved.body);
        let etag_b = client.get("/v2/skills/public/team/b", &[USER]).await.etag();

        // Every folder that holds something, its rules, what is in it and below.
        s.sign_in(ADMIN.1).await;
        s.click("#nav a[data-view='public']").await;
        let folders = s.wait_text("table.public-folders", "public/team/sub/").await;
        assert!(
            folders.contains("roles EQUAL user, admin") && folders.contains("none of its own (public/team/ apply)"),
            "{folders}"
        );
        let team = "table.public-folders tbody tr:nth-child(2)";
        assert_eq!(s.text(&format!("{team} td:nth-child(1)")).await, "public/team/");
        assert_eq!(s.text(&format!("{team} td:nth-child(3)")).await, "2", "published in it");
        assert_eq!(s.text(&format!("{team} td:nth-child(4)")).await, "3", "in it and below");

        // A folder's page: the rules along it, what is published in it, the folders in it.
        s.browser.find(Locator::LinkText("public/team/")).await.unwrap().click().await.unwrap();
        s.wait_text(".public-folder .rules-own", "user, admin").await;
        let published = s.text("table.published").await;
        assert!(
            published.contains("skills/public/team/a") && published.contains("skills/public/team/b"),
            "{published}"
        );
        assert!(s.text("ul.subfolders").await.contains("public/team/sub/"));
        assert!(s.text(".public-folder").await.contains("Nothing deleted here can still be restored"));

        // Mending the rules: who loses access is shown before, the question names them, and an edit after the
        // question withdraws it (what is applied is what was asked about).
        let targets = s.browser.find(Locator::Css("#rule-targets-1")).await.unwrap();
        targets.clear().await.unwrap();
        targets.send_keys("admin").await.unwrap();
        s.click("button.check-rules").await;
        let losers = s.wait_text(".rules-check .losers", "roles = user").await;
        assert!(losers.contains("3 resources"), "{losers}");
        s.click("button.apply-rules").await;
        s.wait_text("#public-answer", "takes access away: roles = user").await;
        targets.send_keys(", auditor").await.unwrap();
        s.wait_text("#public-answer", "Not confirmed").await;
        assert_eq!(client.get("/v2/skills/public/team/a", &[USER]).await.status, 200, "nothing applied yet");
        s.click("button.apply-rules").await;
        s.wait_text("#public-answer", "takes access away").await;
        s.click("button.apply-rules").await;
        s.wait_text("#public-answer", "Applied").await;
        let own = s.wait_text(".public-folder .rules-own", "admin, auditor").await;
        assert!(!own.contains("user"), "{own}");
        assert_eq!(client.get("/v2/skills/public/team/a", &[USER]).await.status, 403, "user no longer reads it");
        let rules =
            client.post("/v1/ops/publication/rule/list", &[ADMIN], &json!({"url": "public/team/"}).to_string()).await;
        assert_eq!(rules.json()["rules"]["public/team/"][0]["targets"], json!(["admin", "auditor"]));

        // Unpublishing asks first, then removes the skill from public; the deleted one is restored as it was.
        let unpublish = "button.unpublish[data-url='skills/public/team/b']";
        s.click(unpublish).await;
        s.wait_text("#public-answer", "until the grace period ends").await;
        s.click(unpublish).await;
        s.wait_text("#public-answer", "Unpublished").await;
        assert_eq!(client.get("/v2/skills/public/team/b", &[ADMIN]).await.status, 404);
        let deleted = s.wait_text("table.deleted", "skills/public/team/b").await;
        assert!(deleted.contains("alice") || deleted.contains("user"), "who last wrote it: {deleted}");
        assert!(!s.text("table.published").await.contains("team/b"));
        s.shot_at("public-folder", "#published-here").await;
        s.click("button.restore-deleted").await;
        s.wait_text("#public-answer", "Restored").await;
        s.wait_text("table.published", "skills/public/team/b").await;
        let restored = client.get("/v2/skills/public/team/b", &[ADMIN]).await;
        assert_eq!((restored.status, restored.etag()), (200, etag_b));

        // Both changes are on record: decided publications with the console's admin as the decider.
        let decided = json!({"url": "publications/public/", "decided": true}).to_string();
        let listed = client.post("/v1/ops/publication/list", &[ADMIN], &decided).await.json();
        let names: Vec<&str> =
            listed["publications"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
        assert!(names.contains(&"Rules of public/team/") && names.contains(&"Unpublish b"), "{names:?}");

        // public/ itself takes no rules; a folder outside public is refused in words.
        s.goto("#public-folder?folder=public%2F").await;
        s.wait_text(".public-folder", "sets no rules on public/ itself").await;
        assert_eq!(s.count(".rules-editor").await, 0);
        s.goto("#public-folder?folder=files%2Fx%2F").await;
        s.wait_text("#view-public-folder .error", "Not a public folder").await;
        // Only admins: the API refuses the deleted list of public to a user.
        assert_eq!(client.get("/v2/deleted/skills/public/team/", &[USER]).await.status, 403);
    })
    .await;
}

/// `12:34:56.789`-like text: a time shown with milliseconds.
fn regex_like_millis(text: &str) -> bool {
    text.as_bytes().windows(12).any(|w| {
        let digit = |i: usize| w[i].is_ascii_digit();
        digit(0)
            && digit(1)
            && w[2] == b':'
            && digit(3)
            && digit(4)
            && w[5] == b':'
            && digit(6)
            && digit(7)
            && w[8] == b'.'
            && digit(9)
            && digit(10)
            && digit(11)
    })
}

/// A JWT that expires while the page is open: the next action signs out with the reason, and signing in
/// again comes back to the same view. An API key left alone is signed out too. A non-admin's own resources
/// include every folder type's. "Loading…" is announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_idle_credentials_sign_out_and_come_back() {
    let Some((_driver, f, session)) = browse("credentials", false, (1280, 800)).await else { return };
    let fixture = f.clone();
    with_session(session, move |s| async move {
        let f = fixture;
        // A second folder type, served from the handlers directory; dora has a resource of each type.
        std::fs::copy(crate::example_handler::prompt_library_wasm(), f.handlers.join("prompt-library.wasm")).unwrap();
        assert_eq!(f.client().post("/v1/ops/handlers/reload", &[ADMIN], "").await.status, 200);
        let dora = JwtUser::new(&f.client(), HS_SECRET, "dora", &["user"]).await;
        let (bucket, auth) = (dora.bucket.clone(), dora.auth());
        let library = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/prompt-library/support-prompts");
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for path in crate::support::files_below(&library) {
            let name = path.strip_prefix(&library).unwrap().to_string_lossy().into_owned();
            files.push((name, std::fs::read(&path).unwrap()));
        }
        let parts: Vec<(&str, &[u8])> = files.iter().map(|(name, bytes)| (name.as_str(), bytes.as_slice())).collect();
        let put = f.client().put_files(&format!("/v2/prompt-libraries/{bucket}/support-prompts"), &auth, &parts).await;
        assert_eq!(put.status, 200, "{}", put.body);
        f.put_skill(auth[0], &format!("skills/{bucket}/mine"), "mine", "print(1)\n").await;
        let body = json!({"name": "support prompts", "targetFolder": "public/team/", "resources": [{"action": "ADD",
            "sourceUrl": format!("prompt-libraries/{bucket}/support-prompts"),
            "targetUrl": "prompt-libraries/public/team/support-prompts"}]});
        let created = f.client().post("/v1/ops/publication/create", &auth, &body.to_string()).await;
        assert_eq!(created.status, 200, "{}", created.body);
        let library_publication = created.json()["url"].as_str().unwrap().to_string();

        // A session of dora's whose token expires in a few seconds.
        let token = short_lived_jwt("dora", 8);
        let expires = tokio::time::Instant::now() + Duration::from_secs(8);

        // "Loading…" is a status a screen reader announces.
        s.sign_in(&token).await;
        s.goto("#history").await;
        let listed = s.wait_text("ul.own-resources", "support-prompts").await;
        assert!(listed.contains("skills/") && listed.contains("prompt-libraries/"), "{listed}");
        let watch = "window.__loading = []; new MutationObserver((changes) => changes.forEach((c) => c.addedNodes.forEach((n) => { \
            if (n.classList && n.classList.contains('loading')) window.__loading.push(n.getAttribute('role')); }))) \
            .observe(document.body, {subtree: true, childList: true}); location.hash = '#publications';";
        s.browser.execute(watch, vec![]).await.unwrap();
        s.wait_text("table.queue", "support prompts").await;
        assert_eq!(s.browser.execute("return window.__loading;", vec![]).await.unwrap(), json!(["status"]));

        // The token expires; the next action (a refresh of the view) signs out, saying why, and signing in
        // again comes back here.
        s.goto("#history").await;
        s.wait_text("ul.own-resources", "support-prompts").await;
        tokio::time::sleep_until(expires + Duration::from_secs(1)).await;
        s.click("#nav a[data-view='publications']").await;
        let message = s.wait_text("#message", "401").await;
        assert!(message.contains("GET") || message.contains("POST"), "{message}");
        assert_eq!(s.count("#signin:not([hidden])").await, 1, "signed out");
        let address = s.browser.current_url().await.unwrap();
        assert_eq!(address.fragment(), Some("publications"), "the view is kept");
        let field = s.browser.find(Locator::Css("#credential")).await.unwrap();
        field.send_keys(ADMIN.1).await.unwrap();
        s.click("#signin-button").await;
        s.wait_text("#view-publications", "Pending").await;
        assert_eq!(s.browser.current_url().await.unwrap().fragment(), Some("publications"));

        // A prompt library's card: what its handler read from `library.toml`; its README shown as a README.
        s.goto(&format!("#publication?url={}", library_publication.replace('/', "%2F"))).await;
        let card = format!("article.publication[data-url='{library_publication}']");
        let read = s.wait_text(&format!("{card} table.definition-metadata"), "support-prompts").await;
        assert!(read.contains("name"), "{read}");
        let definition = s.text(&format!("{card} .definition")).await;
        assert!(definition.contains("the README, rendered: not read by the handler"), "{definition}");

        // An API key left alone is signed out (the limit shortened for the test; it can only be shortened).
        s.browser.execute("sessionStorage.setItem('dial-host.console.idle-seconds', '3');", vec![]).await.unwrap();
        let message = s.wait_text("#message", "without activity").await;
        assert!(message.contains("3 seconds"), "{message}");
        assert_eq!(s.browser.execute("return sessionStorage.getItem('dial-host.console.credential');", vec![]).await.unwrap(),
            Value::Null);
    })
    .await;
}

/// A JWT for `sub` with the `user` role that expires in `seconds` (the server allows no leeway in these tests).
fn short_lived_jwt(sub: &str, seconds: u64) -> String {
    use jsonwebtoken::{EncodingKey, Header, encode};
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let claims = json!({"sub": sub, "roles": ["user"], "exp": now + seconds});
    let key = EncodingKey::from_secret(HS_SECRET.as_bytes()).unwrap();
    encode(&Header::default(), &claims, &key).unwrap()
}
