//! The admin console (`GET /admin`, issue 30) in a real browser: Debian's Chromium, headless, driven
//! through Debian's chromedriver by WebDriver (fantoccini), against the real binary. The console has no
//! powers of its own, so each test checks what the browser did through the API as well: the approved skill
//! is under `public`, the consented application's call succeeds, the restored version is current.
//!
//! Each page is saved as a screenshot in `target/console-screenshots/` (the README's pictures in
//! `docs/console/` are these files, copied with `UPDATE_SCREENSHOTS=1`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::services::{ChromeDriver, chromedriver};
use crate::support::{Client, JwtUser, Server, Setup, unzip};
use crate::upstream::MockApp;

pub(crate) const ADMIN: (&str, &str) = ("Api-Key", "console-admin-key-0001");
pub(crate) const USER: (&str, &str) = ("Api-Key", "console-user-key-0001");
pub(crate) const HS_SECRET: &str = "console-secret";
/// How long the page may take to show what a step waits for.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);
/// WebDriver's key codes for Tab and Enter.
const TAB: &str = "\u{E004}";
const ENTER: &str = "\u{E007}";

/// A Chromium session at 1280×800 downloading into `downloads`.
pub(crate) struct Session {
    /// Names this test's failure screenshot.
    test: &'static str,
    pub(crate) browser: Browser,
    base: String,
    downloads: PathBuf,
}

fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots")
}

impl Session {
    pub(crate) async fn open(
        test: &'static str,
        driver: &ChromeDriver,
        server: &Server,
        downloads: &Path,
        size: (u32, u32),
    ) -> Self {
        let (width, height) = size;
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": driver.chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--disable-extensions", format!("--window-size={width},{height}")],
                "prefs": {"download.default_directory": downloads, "download.prompt_for_download": false},
            },
        });
        let Value::Object(capabilities) = capabilities else { unreachable!() };
        let browser = ClientBuilder::rustls()
            .expect("a WebDriver client")
            .capabilities(capabilities)
            .connect(&driver.url)
            .await
            .expect("a Chromium session from chromedriver");
        Self { test, browser, base: server.url.clone(), downloads: downloads.to_path_buf() }
    }

    pub(crate) async fn goto(&self, fragment: &str) {
        self.browser.goto(&format!("{}/admin{fragment}", self.base)).await.expect("navigating");
    }

    /// The page's text under `css` as shown (empty when nothing matches or it is not rendered).
    pub(crate) async fn text(&self, css: &str) -> String {
        let script =
            "const e = document.querySelector(arguments[0]); return e && e.checkVisibility() ? e.innerText : '';";
        let value = self.browser.execute(script, vec![json!(css)]).await.expect("running a script");
        value.as_str().unwrap_or_default().to_string()
    }

    pub(crate) async fn count(&self, css: &str) -> usize {
        let script = "return document.querySelectorAll(arguments[0]).length;";
        self.browser.execute(script, vec![json!(css)]).await.expect("running a script").as_u64().unwrap() as usize
    }

    /// Waits until the text under `css` contains `needle`; the text.
    pub(crate) async fn wait_text(&self, css: &str, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let text = self.text(css).await;
            if text.contains(needle) {
                return text;
            }
            if tokio::time::Instant::now() > deadline {
                self.shot(&format!("failure-{}", self.test)).await;
                let page = self.text("body").await;
                panic!("{css} never showed {needle:?}; it shows {text:?}; the page:\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn click(&self, css: &str) {
        let element = self.browser.wait().at_most(PATIENCE).for_element(Locator::Css(css)).await;
        element.unwrap_or_else(|error| panic!("no {css}: {error}")).click().await.expect("clicking");
    }

    pub(crate) async fn sign_in(&self, credential: &str) {
        self.goto("").await;
        let field = self.browser.wait().at_most(PATIENCE).for_element(Locator::Css("#credential")).await.unwrap();
        field.send_keys(credential).await.unwrap();
        self.click("#signin-button").await;
        self.wait_text("#who", "Sign out").await;
    }

    /// Scrolls `css` to the top of the window, then [`Session::shot`].
    pub(crate) async fn shot_at(&self, name: &str, css: &str) {
        let script = "document.querySelector(arguments[0]).scrollIntoView({block: 'start'});";
        self.browser.execute(script, vec![json!(css)]).await.expect("scrolling");
        self.shot(name).await;
    }

    /// Saves the page as `target/console-screenshots/<name>.png` (and in `docs/console/` with
    /// `UPDATE_SCREENSHOTS=1`).
    pub(crate) async fn shot(&self, name: &str) {
        let png = self.browser.screenshot().await.expect("a screenshot");
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
        if std::env::var("UPDATE_SCREENSHOTS").is_ok_and(|update| update == "1") {
            let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/console");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(format!("{name}.png")), &png).unwrap();
        }
    }

    /// The one file the browser downloaded, once complete: its name and bytes.
    pub(crate) async fn downloaded(&self) -> (String, Vec<u8>) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let names: Vec<String> = std::fs::read_dir(&self.downloads)
                .unwrap()
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            if let [name] = names.as_slice()
                && !name.ends_with(".crdownload")
            {
                return (name.clone(), std::fs::read(self.downloads.join(name)).unwrap());
            }
            assert!(tokio::time::Instant::now() < deadline, "no complete download: {names:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The page is as wide as the window: nothing to scroll sideways (tables scroll inside their box).
    pub(crate) async fn assert_fits(&self, what: &str) {
        let widths = "return [document.documentElement.scrollWidth, window.innerWidth];";
        let widths = self.browser.execute(widths, vec![]).await.unwrap();
        let (page, window) = (widths[0].as_u64().unwrap(), widths[1].as_u64().unwrap());
        assert!(page <= window, "{what}: the page is {page}px wide in a {window}px window");
    }
}

/// Runs `steps` with a session, closing the browser whatever happens (a panic included, then re-raised).
pub(crate) async fn with_session<F>(session: Session, steps: impl FnOnce(std::sync::Arc<Session>) -> F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let session = std::sync::Arc::new(session);
    let outcome = tokio::spawn(steps(session.clone())).await;
    let _ = session.browser.clone().close().await;
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

pub(crate) struct Fixture {
    pub(crate) setup: Setup,
    pub(crate) server: Server,
    pub(crate) handlers: PathBuf,
    mock: Option<MockApp>,
}

impl Fixture {
    pub(crate) async fn start(with_app: bool) -> Self {
        let mock =
            if with_app { Some(MockApp::start(None).expect("the mock application (Python clients)")) } else { None };
        let setup = Setup::new();
        let handlers = setup.path().join("handlers");
        std::fs::create_dir(&handlers).unwrap();
        let config = setup.config(&format!(
            r#"[encryption]
secret = "console"
[identity]
hs256_secret = "{HS_SECRET}"
leeway_seconds = 0
[audit]
file = "{audit}"
[proxy]
allowed_destinations = ["127.0.0.1"]
[handlers]
dir = "{handlers}"
[keys.{admin}]
project = "ops"
roles = ["admin"]
[keys.{user}]
project = "alice"
roles = ["user"]
[applications."odd app #1"]
endpoint = "http://127.0.0.1:9/chat/completions"
display_name = "Odd one"
resource_dependencies = [{{kind = "dial.resourceLink", linkId = "n", target = {{path = "files/{{current-user}}/n/"}}, access = ["READ"], required = true}}]
"#,
            handlers = handlers.display(),
            audit = setup.path().join("audit.jsonl").display(),
            admin = ADMIN.1,
            user = USER.1,
        ));
        let server = setup.start(Some(&config), &[]);
        if let Some(mock) = &mock {
            mock.set_host_url(&server.url).await;
        }
        Self { setup, server, handlers, mock }
    }

    pub(crate) fn client(&self) -> Client {
        self.server.client()
    }

    pub(crate) async fn bucket(&self, key: (&str, &str)) -> String {
        self.client().get("/v1/bucket", &[key]).await.json()["bucket"].as_str().unwrap().to_string()
    }

    pub(crate) async fn put_skill(&self, key: (&str, &str), url: &str, name: &str, script: &str) -> String {
        // Markup a page must show as text, never run: an image with a handler, a script, a javascript: link.
        let skill = format!(
            "---\nname: {name}\ndescription: Tools for {name}. Use when a task needs {name}.\n---\n# {name}\n\n\
             Run `scripts/run.py` to **extract** text.\n\n- first step\n- second step\n\n\
             <img src=x onerror=\"window.__pwned=1\"> <script>window.__pwned=2</script>\n\n\
             [a link](javascript:window.__pwned=3) and [the docs](https://example.com/docs)\n"
        );
        let files: [(&str, &[u8]); 2] = [("SKILL.md", skill.as_bytes()), ("scripts/run.py", script.as_bytes())];
        let reply = self.client().put_files(&format!("/v2/{url}"), &[key], &files).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.etag()
    }

    /// `(source, target)` pairs published to `public/team/` by the user; the publication's URL.
    pub(crate) async fn publish(&self, resources: &[(&str, &str)]) -> String {
        let resources: Vec<Value> = resources
            .iter()
            .map(|(source, target)| json!({"action": "ADD", "sourceUrl": source, "targetUrl": target}))
            .collect();
        let body = json!({"name": format!("publish {}", resources.len()), "targetFolder": "public/team/",
            "resources": resources});
        let reply = self.client().post("/v1/ops/publication/create", &[USER], &body.to_string()).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json()["url"].as_str().unwrap().to_string()
    }

    pub(crate) async fn put_app(&self, url: &str, notes_folder: &str) {
        let endpoint = format!("{}/chat/completions", self.mock.as_ref().unwrap().url());
        let definition = json!({"endpoint": endpoint, "displayName": "Notes",
            "resourceDependencies": [{"kind": "dial.resourceLink", "linkId": "notes",
                "target": {"path": format!("files/{{current-user}}/{notes_folder}/")},
                "access": ["READ", "WRITE"], "required": true}]});
        let reply = self.client().put_body(&format!("/v1/{url}"), &[ADMIN], definition.to_string().as_bytes()).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }

    /// The user calls `app` asking it to write `file` with its per-request key: the call's status.
    pub(crate) async fn call_app(&self, app: &str, file: &str) -> u16 {
        let body = json!({"messages": [{"role": "user", "content": format!("write:{file}")}]});
        let path = format!("/openai/deployments/{app}/chat/completions");
        self.client().post(&path, &[USER, ("Content-Type", "application/json")], &body.to_string()).await.status
    }
}

/// A server (with the mock application when `with_app`) and a Chromium session on it at `size`, downloading
/// into the fixture's directory; `None` when Chromium is not installed (outside CI). The driver must outlive
/// the session.
pub(crate) async fn browse(
    test: &'static str,
    with_app: bool,
    size: (u32, u32),
) -> Option<(ChromeDriver, std::sync::Arc<Fixture>, Session)> {
    let driver = chromedriver()?;
    let f = Fixture::start(with_app).await;
    let downloads = f.setup.path().join("downloads");
    std::fs::create_dir(&downloads).unwrap();
    let session = Session::open(test, &driver, &f.server, &downloads, size).await;
    Some((driver, std::sync::Arc::new(f), session))
}

/// An admin signs in with a key, approves one publication (its skill and file are then in `public`), sees
/// the next one's diff against what `public` holds now, is refused approving it and rejects it; grants
/// consent to a declaring application (its call then succeeds), sees the stale diff after the declaration
/// changes, withdraws, and is refused a grant of a declaration changed under the page; reloads the handlers
/// with a new type and with a broken file; compares, restores and downloads an older version of a skill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_decides_publications_consent_handlers_and_versions_in_the_browser() {
    let Some((_driver, f, session)) = browse("admin", true, (1280, 800)).await else { return };
    let fixture = f.clone();
    with_session(session, move |s| async move {
        let f = fixture;
        let alice = f.bucket(USER).await;
        let ops = f.bucket(ADMIN).await;
        // Two publications of the same skill at two moments, both pending: the review copies keep each.
        // The first also publishes a v1 file.
        let source = format!("skills/{alice}/team/pdf-tools");
        f.put_skill(USER, &source, "pdf-tools", "print('first')\n").await;
        let notes = format!("files/{alice}/team/notes.txt");
        let put = f.client().put_files(&format!("/v1/{notes}"), &[USER], &[("notes.txt", b"team notes\n")]).await;
        assert_eq!(put.status, 200, "{}", put.body);
        let first =
            f.publish(&[(&source, "skills/public/team/pdf-tools"), (&notes, "files/public/team/notes.txt")]).await;
        f.put_skill(USER, &source, "pdf-tools", "print('second')\nprint('third')\n").await;
        let second = f.publish(&[(&source, "skills/public/team/pdf-tools")]).await;
        let (first_card, second_card) =
            (format!("article.publication[data-url='{first}']"), format!("article.publication[data-url='{second}']"));

        // Sign in; the publication queue is the first page: one row per publication, each opening at its own
        // address.
        s.sign_in(ADMIN.1).await;
        assert!(s.text("#role-badge").await.contains("admin"));
        let queue = s.wait_text("table.queue", "publish 1").await;
        assert!(queue.contains("publish 2") && queue.contains("alice"), "{queue}");
        s.browser.find(Locator::LinkText("publish 2")).await.unwrap().click().await.unwrap();
        let card = s.wait_text(&first_card, "New at the target").await;
        let address = s.browser.current_url().await.unwrap();
        assert_eq!(address.fragment(), Some(format!("publication?url={}", first.replace('/', "%2F")).as_str()));
        assert!(card.contains("pdf-tools") && card.contains("skills/public/team/pdf-tools"), "{card}");
        // SKILL.md rendered: its frontmatter as a list, its body as HTML.
        assert_eq!(s.count(&format!("{first_card} .markdown dl.front dt")).await, 2);
        assert!(s.text(&format!("{first_card} .markdown strong")).await.contains("extract"));
        assert_eq!(s.count(&format!("{first_card} .markdown li")).await, 2);
        // The hostile markup is shown as text; nothing of it ran or became an element.
        let markdown = s.text(&format!("{first_card} .markdown")).await;
        assert!(
            markdown.contains("<img src=x onerror=\"window.__pwned=1\">") && markdown.contains("<script>"),
            "{markdown}"
        );
        let ran = "return [document.querySelectorAll('img').length, document.querySelectorAll('script').length, \
                   document.querySelectorAll('a[href^=\"javascript\"]').length, window.__pwned === undefined];";
        assert_eq!(s.browser.execute(ran, vec![]).await.unwrap(), json!([0, 1, 0, true]));
        assert_eq!(s.count(&format!("{first_card} .markdown a[href='https://example.com/docs']")).await, 1);
        // The v1 file: new at the target, its text shown.
        assert!(s.text(&first_card).await.contains("+ team notes"), "the v1 file's lines");
        s.assert_fits("a publication").await;
        s.click(&format!("{first_card} button.approve")).await;
        let approved = s.wait_text(&format!("{first_card} .answer"), "Approved").await;
        assert!(approved.contains("files/public/team/notes.txt"), "{approved}");
        // The card is the publication as it is now: decided, and by whom.
        let decision = s.wait_text(&format!("{first_card} .decision"), "Approved by").await;
        assert!(decision.contains("project:ops"), "{decision}");
        assert_eq!(
            s.count(&format!("{first_card} button.reject")).await,
            0,
            "a decided publication offers no more decisions"
        );
        let public = f.client().get("/v2/skills/public/team/pdf-tools/files/scripts/run.py", &[USER]).await;
        assert_eq!((public.status, public.body.as_str()), (200, "print('first')\n"), "approved into public");
        let file = f.client().get("/v1/files/public/team/notes.txt", &[USER]).await;
        assert_eq!((file.status, file.body.as_str()), (200, "team notes\n"));

        // The second one, opened from the queue after the first was approved (no reload of the page): compared
        // with what public holds now, not with the empty target it had when the queue was first read.
        s.click("a.back").await;
        s.wait_text("table.decided", "publish 2").await;
        let pending = s.text("table.queue").await;
        assert!(
            pending.contains("publish 1") && !pending.contains("publish 2"),
            "decided publications leave the queue"
        );
        s.browser.find(Locator::LinkText("publish 1")).await.unwrap().click().await.unwrap();
        s.wait_text(&format!("{second_card} .target-state"), "Something is at the target now").await;
        let diff = s.wait_text(&format!("{second_card} .diff"), "second").await;
        assert!(diff.contains("- print('first')") && diff.contains("+ print('second')"), "{diff}");
        assert!(s.text(&format!("{second_card} table.files-compared")).await.contains("changed"));
        s.shot_at("publication-diff", &format!("{second_card} details.review")).await;
        s.click(&format!("{second_card} button.approve")).await;
        let refused = s.wait_text(&format!("{second_card} .answer"), "412").await;
        assert!(refused.contains("already exists"), "{refused}");
        assert!(
            s.text(&second_card).await.contains("approving will be refused (412)"),
            "the review says so beforehand"
        );
        // Rejecting cannot be undone: the first click asks, the second rejects.
        s.click(&format!("{second_card} button.reject")).await;
        s.wait_text(&format!("{second_card} .answer"), "cannot be undone").await;
        let pending = f.client().post("/v1/ops/publication/get", &[USER], &json!({"url": second}).to_string()).await;
        assert_eq!(pending.json()["status"], "PENDING", "one click decides nothing");
        s.click(&format!("{second_card} button.reject")).await;
        s.wait_text(&format!("{second_card} .answer"), "Rejected").await;
        let status = f.client().post("/v1/ops/publication/get", &[USER], &json!({"url": second}).to_string()).await;
        assert_eq!(status.json()["status"], "REJECTED");
        let public = f.client().get("/v2/skills/public/team/pdf-tools/files/scripts/run.py", &[USER]).await;
        assert_eq!(public.body, "print('first')\n", "a rejected publication changes nothing in public");

        // Consent: a stored application declaring a required dependency; refused until granted.
        let app = "applications/public/notes-app";
        f.put_app(app, "notes").await;
        let note = format!("files/{alice}/notes/from-app.txt");
        assert_eq!(f.call_app(app, &note).await, 403, "no consent yet");
        s.goto("#applications").await;
        let card = format!("article.application[data-id='{app}']");
        let state = format!("{card} .consent-state");
        assert_eq!(s.wait_text(&state, "none").await, "none");
        let shown = s.text(&format!("{card} table.declaration")).await;
        assert!(shown.contains("files/{current-user}/notes/") && shown.contains("READ, WRITE"), "{shown}");
        // Where the data goes, beside what is asked.
        let summary = s.text(&format!("{card} .app-summary")).await;
        let host = f.mock.as_ref().unwrap().url().trim_start_matches("http://").split('/').next().unwrap().to_string();
        assert!(summary.contains("Notes") && summary.contains(&host) && summary.contains("public"), "{summary}");
        assert!(summary.contains("everyone"), "{summary}");
        // A configured application whose id has a space and a `#`: its card, not a 404 for `odd app `.
        let odd = s.wait_text("article.application[data-id='odd%20app%20%231']", "Admin consent").await;
        assert!(odd.contains("Odd one") && odd.contains("configuration") && odd.contains("127.0.0.1:9"), "{odd}");
        s.click(&format!("{card} button.grant")).await;
        assert_eq!(s.wait_text(&state, "live").await, "live");
        assert!(s.text(&card).await.contains("granted by project:ops"));
        assert_eq!(f.call_app(app, &note).await, 200, "the call succeeds once consented");
        assert_eq!(f.client().get(&format!("/v1/{note}"), &[USER]).await.status, 200, "the app wrote with its key");
        s.shot("applications").await;

        // The declaration changes: stale on the next refresh (no reload of the page), with what changed since
        // the approval.
        f.put_app(app, "drafts").await;
        s.click("button.refresh").await;
        let stale = s.wait_text(&format!("{card} table.stale-diff"), "changed").await;
        assert!(
            stale.contains("files/{current-user}/notes/") && stale.contains("files/{current-user}/drafts/"),
            "{stale}"
        );
        assert_eq!(s.text(&state).await, "stale");
        assert_eq!(f.call_app(app, &format!("files/{alice}/drafts/x.txt")).await, 403, "stale consent grants nothing");
        s.assert_fits("the applications").await;
        s.shot("applications-stale").await;
        // Withdrawn from the page (asked twice): no record left.
        s.click(&format!("{card} button.withdraw")).await;
        s.wait_text(&format!("{card} .answer"), "Confirm").await;
        s.click(&format!("{card} button.withdraw")).await;
        assert_eq!(s.wait_text(&state, "none").await, "none");
        let after = f.client().get(&format!("/v1/consent/{app}/admin-consent"), &[ADMIN]).await.json();
        assert_eq!(after, json!({"consented": false}));
        // The declaration changes again while the page shows the old one: the grant names what was shown,
        // so the API refuses it and the card shows what the application declares now.
        f.put_app(app, "archive").await;
        s.click(&format!("{card} button.grant")).await;
        let refused = s.wait_text(&card, "412").await;
        assert!(refused.contains("changed since the one reviewed"), "{refused}");
        assert!(s.text(&format!("{card} table.declaration")).await.contains("files/{current-user}/archive/"));
        assert_eq!(s.text(&state).await, "none");
        let after = f.client().get(&format!("/v1/consent/{app}/admin-consent"), &[ADMIN]).await.json();
        assert_eq!(after, json!({"consented": false}), "nothing was granted");

        // Handlers: a new type appears in the directory; reload shows it loaded.
        s.goto("#handlers").await;
        s.wait_text("table.handlers", "skills").await;
        let wasm = Path::new(dial_host::handlers::GUEST_WASM_DIR).join("handler_1_0.wasm");
        std::fs::copy(wasm, f.handlers.join("notes.wasm")).unwrap();
        // The first click previews (nothing changes), the second reloads.
        s.click("button.reload").await;
        s.wait_text("#reload-answer", "Preview, nothing changed yet: notes loaded").await;
        assert!(
            !f.client().get("/v1/ops/handlers", &[ADMIN]).await.body.contains("\"notes\""),
            "a preview loads nothing"
        );
        s.click("button.reload").await;
        s.wait_text("#reload-answer", "Reloaded: notes loaded").await;
        assert_eq!(s.text("#reload-answer .reload-report .change").await, "loaded");
        assert_eq!(s.count("#reload-answer table.failed").await, 0);
        assert!(s.text("table.handlers").await.contains("notes"), "the table shows what serves now");
        let listed = f.client().get("/v1/ops/handlers", &[ADMIN]).await.json();
        assert!(listed.as_array().unwrap().iter().any(|h| h["group"] == "notes"), "{listed}");
        s.shot("handlers").await;
        // A file that is no component: 422, named with its error; the rest keeps serving.
        std::fs::write(f.handlers.join("broken.wasm"), b"\0asm broken").unwrap();
        s.click("button.reload").await;
        s.wait_text("#reload-answer", "1 file failed").await;
        s.click("button.reload").await;
        let failed = s.wait_text("#reload-answer", "422").await;
        assert!(s.text("#reload-answer table.failed").await.contains("broken.wasm"), "{failed}");
        // A type whose file left the directory: the preview and the reload say it is no longer served.
        std::fs::remove_file(f.handlers.join("broken.wasm")).unwrap();
        std::fs::remove_file(f.handlers.join("notes.wasm")).unwrap();
        s.click("button.reload").await;
        s.wait_text("#reload-answer", "“notes” no longer served").await;
        s.click("button.reload").await;
        let removed = s.wait_text("#reload-answer", "Reloaded: “notes” no longer served").await;
        assert!(!removed.contains("no failures"), "{removed}");
        assert!(!s.text("table.handlers").await.contains("notes"));
        let audit = std::fs::read_to_string(f.setup.path().join("audit.jsonl")).unwrap();
        let reloads: Vec<Value> = audit
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|event| event["event"] == "handlers_reload")
            .collect();
        assert_eq!(reloads.len(), 3, "each reload audited, previews not: {audit}");
        assert_eq!(reloads[2]["user"], "project:ops");
        assert_eq!(reloads[2]["targets"], json!(["notes:removed"]));

        // History: two versions of a skill in a folder whose name needs encoding; compare, restore the
        // first, download it.
        let report_url = format!("skills/{ops}/q4%20r%C3%A9ports/report");
        f.put_skill(ADMIN, &report_url, "report", "print('v1')\n").await;
        f.put_skill(ADMIN, &report_url, "report", "print('v2')\n").await;
        let versions = f.client().get(&format!("/v2/versions/{report_url}"), &[ADMIN]).await.json();
        let first = versions["versions"][1]["version"].as_str().unwrap().to_string();
        s.goto("#history").await;
        s.click("ul.own-resources a[href*='report']").await;
        s.wait_text("table.versions", &first).await;
        s.click("button.compare").await;
        let compared = s.wait_text("#comparison", "print('v2')").await;
        assert!(compared.contains("- print('v1')") && compared.contains("+ print('v2')"), "{compared}");
        s.shot_at("history", "table.versions").await;
        // Someone commits while the table is shown: the restore is refused, the table shows the new version,
        // and the message says what happened in words.
        f.put_skill(ADMIN, &report_url, "report", "print('v3')\n").await;
        s.click(&format!("button.restore[data-version='{first}']")).await;
        s.wait_text("#history-answer", "oldest version is dropped").await;
        s.click(&format!("button.restore[data-version='{first}']")).await;
        let refused = s.wait_text("#history-answer", "Not restored").await;
        assert!(refused.contains("changed since this page read its history") && !refused.contains("etag"), "{refused}");
        assert_eq!(s.count("table.versions tbody tr").await, 3, "the table shows the version committed meanwhile");
        s.click(&format!("button.restore[data-version='{first}']")).await;
        s.wait_text("#history-answer", "oldest version is dropped").await;
        s.click(&format!("button.restore[data-version='{first}']")).await;
        s.wait_text("#history-answer", "Restored").await;
        let current = f.client().get(&format!("/v2/{report_url}/files/scripts/run.py"), &[ADMIN]).await;
        assert_eq!(current.body, "print('v1')\n", "the restored version is current");
        assert_eq!(s.count("table.versions tbody tr").await, 4, "restoring is a new version");
        s.click(&format!("button.download[data-version='{first}']")).await;
        let (name, zip) = s.downloaded().await;
        assert_eq!(name, format!("report-{first}.zip"));
        let files = unzip(&zip);
        let script = files.iter().find(|(name, _)| name.ends_with("scripts/run.py")).expect("run.py in the zip");
        assert_eq!(script.1, b"print('v1')\n");

        // Typed as people write it (a space, an accent: encoded on the way), and a path that would leave
        // the resource API: refused in the page with the form kept.
        for (typed, shows) in [
            (format!("skills/{ops}/q4 réports/report"), first.clone()),
            (format!("skills/{ops}/../../v1/ops/handlers"), "no empty, \".\" or \"..\" segment".to_string()),
        ] {
            s.goto("#history").await;
            s.wait_text("#view-history", "Your resources").await;
            let field = s.browser.find(Locator::Css("#resource-url")).await.unwrap();
            field.clear().await.unwrap();
            field.send_keys(&format!("{typed}\n")).await.unwrap();
            s.wait_text("#view-history", &shows).await;
            assert_eq!(s.count("#resource-url").await, 1, "the form stays");
        }
    })
    .await;
}

/// A user's JWT signs in too, sees no admin section or action, and the API refuses the admin routes
/// whatever the page shows. On a phone-width window the page still reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_admin_sees_no_admin_actions_and_the_api_refuses_them() {
    let Some((_driver, f, session)) = browse("non-admin", false, (390, 844)).await else { return };
    let carol = JwtUser::new(&f.client(), HS_SECRET, "carol", &["user"]).await;
    let fixture = f.clone();
    with_session(session, move |s| async move {
        let f = fixture;
        // A pending publication of alice's that carol's page must not offer to decide.
        let alice = f.bucket(USER).await;
        let source = format!("skills/{alice}/team/csv-tools");
        f.put_skill(USER, &source, "csv-tools", "print('csv')\n").await;
        let pending = f.publish(&[(&source, "skills/public/team/csv-tools")]).await;

        let token = carol.token.strip_prefix("Bearer ").unwrap();
        s.sign_in(token).await;
        assert!(s.text("#who").await.contains("carol"));
        assert!(s.text("#role-badge").await.contains("not an admin"));
        s.wait_text("#not-admin", "not an admin").await;
        s.wait_text("#view-publications", "You have no publications").await;
        s.shot("non-admin").await;
        for hidden in ["#nav a[data-view='applications']", "#nav a[data-view='handlers']"] {
            let shown = s.browser.execute("return !document.querySelector(arguments[0]).hidden;", vec![json!(hidden)]);
            assert_eq!(shown.await.unwrap(), json!(false), "{hidden} is hidden from a non-admin");
        }
        // Keyboard only: from the top of the page, Tab reaches the skip link, the sections this credential
        // has, and sign-out, in that order; Enter on a focused link follows it.
        // (Focus starts at the skip link, the page's first focusable element.)
        let first =
            "const first = document.querySelector('a[href], button, input'); first.focus(); return first.className;";
        assert_eq!(s.browser.execute(first, vec![]).await.unwrap(), json!("skip"));
        let mut reached = vec![
            s.browser
                .execute("return document.activeElement.textContent.trim();", vec![])
                .await
                .unwrap()
                .as_str()
                .unwrap()
                .to_string(),
        ];
        for _ in 0..3 {
            s.browser.active_element().await.unwrap().send_keys(TAB).await.unwrap();
            let focused = s.browser.execute("return document.activeElement.textContent.trim();", vec![]).await;
            reached.push(focused.unwrap().as_str().unwrap().to_string());
        }
        assert_eq!(reached, ["Skip to content", "Publications", "History", "Sign out"]);
        s.browser.execute("document.querySelector(\"#nav a[data-view='history']\").focus();", vec![]).await.unwrap();
        s.browser.active_element().await.unwrap().send_keys(ENTER).await.unwrap();
        s.wait_text("#view-history", "Your resources").await;

        for page in ["#handlers", "#applications"] {
            s.goto(page).await;
            s.wait_text("#view", "Only admins").await;
            for action in ["button.approve", "button.reject", "button.grant", "button.withdraw", "button.reload"] {
                assert_eq!(s.count(action).await, 0, "{action} on {page}");
            }
        }
        // The page holds no data and asks no credential; it runs its own inlined script and style only,
        // admitted by their hashes ('self' would admit a user's upload served from this origin).
        let page = f.client().get("/admin", &[]).await;
        assert_eq!(page.status, 200);
        let policy = page.headers.get("content-security-policy").unwrap().to_str().unwrap().to_string();
        assert!(policy.contains("script-src 'sha256-") && policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("script-src 'self'") && !policy.contains("default-src *"), "{policy}");
        assert_eq!(f.client().get("/admin/console.js", &[]).await.status, 404, "nothing else is served under /admin");

        // The API refuses the same actions to the same credential.
        let auth = carol.auth();
        let client = f.client();
        let approve = client.post("/v1/ops/publication/approve", &auth, &json!({"url": pending}).to_string()).await;
        assert_eq!(approve.status, 403, "{}", approve.body);
        assert_eq!(client.post("/v1/ops/handlers/reload", &auth, "").await.status, 403);
        assert_eq!(client.post("/v1/consent/anything/admin-consent", &auth, "{}").await.status, 403);
        assert_eq!(client.get("/v1/ops/handlers", &auth).await.status, 403);

        // The author herself, with her key: her pending publication, reviewed, and no decision to take.
        s.click("#signout").await;
        s.sign_in(USER.1).await;
        let card = format!("article.publication[data-url='{pending}']");
        s.wait_text("table.queue", "PENDING").await;
        s.browser.find(Locator::LinkText("publish 1")).await.unwrap().click().await.unwrap();
        s.wait_text(&card, "New at the target").await;
        assert_eq!(
            s.count(&format!("{card} button.approve, {card} button.reject")).await,
            0,
            "no decision for an author"
        );
        s.assert_fits("the publications at phone width").await;
        s.shot("author").await;
        // What she may do, she can: withdraw it (asked twice).
        s.click(&format!("{card} button.withdraw-publication")).await;
        s.wait_text(&format!("{card} .answer"), "Confirm").await;
        s.click(&format!("{card} button.withdraw-publication")).await;
        s.wait_text(&format!("{card} .answer"), "Withdrawn").await;
        let gone = f.client().post("/v1/ops/publication/get", &[USER], &json!({"url": pending}).to_string()).await;
        assert_eq!(gone.status, 404, "{}", gone.body);

        // A wrong credential is refused with the API's message, and nothing is kept.
        s.click("#signout").await;
        s.wait_text("#signin", "Admin API key or JWT").await;
        let field = s.browser.wait().at_most(PATIENCE).for_element(Locator::Css("#credential")).await.unwrap();
        field.send_keys("not-a-key").await.unwrap();
        s.click("#signin-button").await;
        let refused = s.wait_text("#message", "401").await;
        assert!(refused.contains("GET /v1/user/info"), "{refused}");
        let kept = s.browser.execute("return sessionStorage.length;", vec![]).await.unwrap();
        assert_eq!(kept, json!(0));
        let cookies = s.browser.execute("return document.cookie;", vec![]).await.unwrap();
        assert_eq!(cookies, json!(""));
    })
    .await;
}
