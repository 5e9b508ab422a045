//! A handler that is not built in: `examples/prompt-library`, built with
//! cargo as its author would, copied into `handlers.dir`, and served by the
//! real binary under `/v2/prompt-libraries/…`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support::{Client, Server, Setup, unzip};

const ADMIN: &str = "admin-key";
const OWNER: &str = "owner-key";
const COLLEAGUE: &str = "colleague-key";

pub(crate) const LIBRARY_TOML: &str = r#"name = "support-prompts"
description = "Prompts the support team uses."
version = "1.2.0"

[[prompts]]
id = "triage"
file = "prompts/triage.md"
variables = ["ticket", "product"]

[[prompts]]
id = "reply"
file = "prompts/reply.md"
variables = ["customer"]
"#;
pub(crate) const TRIAGE: &str = "You triage tickets for {{product}}.\n\nTicket:\n{{ ticket }}\n";
pub(crate) const REPLY: &str = "Write a kind reply to {{customer}}.\n";

/// Builds the example once per test run, the way its README says, into
/// `<target>/wasm-examples`; returns the component.
pub(crate) fn prompt_library_wasm() -> &'static Path {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host/ sits in the workspace");
        // CARGO_TARGET_TMPDIR is <target>/tmp.
        let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("<target>/tmp").join("wasm-examples");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .current_dir(workspace)
            .args(["build", "-p", "prompt-library-handler", "--target", "wasm32-wasip2", "--profile", "wasm-guest"])
            .arg("--target-dir")
            .arg(&target_dir);
        // Settings of the outer (host, test) build must not leak into the guest build.
        for var in [
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "CARGO_BUILD_TARGET",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_RUSTFLAGS",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_MAKEFLAGS",
            "CARGO_PRIMARY_PACKAGE",
        ] {
            build.env_remove(var);
        }
        let output = build.output().expect("run cargo to build the example handler");
        assert!(
            output.status.success(),
            "building examples/prompt-library for wasm32-wasip2 failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let wasm = target_dir.join("wasm32-wasip2/wasm-guest/prompt_library_handler.wasm");
        assert!(wasm.is_file(), "expected the component at {}", wasm.display());
        wasm
    })
}

struct Fixture {
    _setup: Setup,
    _server: Server,
    client: Client,
    bucket: String,
}

impl Fixture {
    /// A server with the example in its `handlers.dir`.
    async fn start() -> Self {
        let setup = Setup::new();
        let dir = setup.path().join("handlers");
        std::fs::create_dir(&dir).unwrap();
        std::fs::copy(prompt_library_wasm(), dir.join("prompt-library.wasm")).unwrap();
        let config = setup.config(&format!(
            r#"
            [encryption]
            secret = "s"
            [keys.{ADMIN}]
            project = "ops"
            roles = ["admin"]
            [keys.{OWNER}]
            project = "owner"
            roles = ["user"]
            [keys.{COLLEAGUE}]
            project = "colleague"
            roles = ["user"]
            [handlers]
            dir = "{}"
            "#,
            dir.display()
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let bucket =
            client.get("/v1/bucket", &[("Api-Key", OWNER)]).await.json()["bucket"].as_str().unwrap().to_string();
        Self { _setup: setup, _server: server, client, bucket }
    }

    fn url(&self, path: &str) -> String {
        format!("/v2/prompt-libraries/{}/{path}", self.bucket)
    }

    async fn put(&self, path: &str, files: &[(&str, &[u8])]) -> crate::support::Reply {
        self.client.put_files(&self.url(path), &[("Api-Key", OWNER)], files).await
    }

    async fn get(&self, path: &str) -> crate::support::Reply {
        self.client.get(path, &[("Api-Key", OWNER)]).await
    }
}

#[tokio::test]
async fn the_prompt_library_example_is_loaded_from_handlers_dir_and_serves_its_type() {
    let f = Fixture::start().await;

    // The admin listing shows the handler, from its file, with its own limits.
    let reply = f.client.get("/v1/ops/handlers", &[("Api-Key", ADMIN)]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let handlers = reply.json();
    let library = handlers
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["group"] == "prompt-libraries")
        .unwrap_or_else(|| panic!("prompt-libraries is not listed: {handlers}"));
    assert_eq!(library["typeName"], "prompt-library");
    assert_eq!(library["displayName"], "Prompt library");
    assert_eq!(library["source"]["kind"], "file");
    assert_eq!(library["limits"]["maxFiles"], 500);
    assert_eq!(library["limits"]["maxFileBytes"], 1 << 20);

    // A valid library: stored, with the handler's metadata and no warnings.
    let files: &[(&str, &[u8])] = &[
        ("library.toml", LIBRARY_TOML.as_bytes()),
        ("prompts/triage.md", TRIAGE.as_bytes()),
        ("prompts/reply.md", REPLY.as_bytes()),
        ("README.md", b"# Support prompts\n"),
    ];
    let put = f.put("support-prompts", files).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let body = put.json();
    assert_eq!(body["resourceType"], "PROMPT_LIBRARY");
    assert_eq!(body["metadata"]["name"], "support-prompts");
    assert_eq!(body["metadata"]["version"], "1.2.0");
    assert_eq!(body["metadata"]["prompts"], "2");
    assert_eq!(body["metadata"]["ids"], "triage, reply");
    assert!(body.get("warnings").is_none(), "{body}");
    let etag = put.etag();

    // The ZIP holds exactly the uploaded files.
    let zip = f.get(&f.url("support-prompts")).await;
    assert_eq!(zip.status, 200, "{}", zip.body);
    assert_eq!(zip.etag(), etag);
    let mut expected: Vec<(String, Vec<u8>)> = files.iter().map(|(p, c)| (p.to_string(), c.to_vec())).collect();
    expected.sort();
    assert_eq!(unzip(&zip.bytes), expected);

    // One file.
    let triage = f.get(&f.url("support-prompts/files/prompts/triage.md")).await;
    assert_eq!((triage.status, triage.body.as_str()), (200, TRIAGE));

    // The bucket root lists the library with its cached metadata.
    let listing = f.get(&format!("/v2/metadata/prompt-libraries/{}/", f.bucket)).await;
    assert_eq!(listing.status, 200, "{}", listing.body);
    let listing = listing.json();
    let items = listing["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listing}");
    assert_eq!(items[0]["name"], "support-prompts");
    assert_eq!(items[0]["nodeType"], "ITEM");
    assert_eq!(items[0]["resourceType"], "PROMPT_LIBRARY");
    assert_eq!(items[0]["metadata"]["prompts"], "2");
    assert_eq!(items[0]["metadata"]["description"], "Prompts the support team uses.");

    // A template using a variable its prompt does not declare: 400 naming
    // the file, and nothing stored.
    let broken_triage = "Ticket from {{customer}}:\n{{ticket}} about {{product}}\n";
    let invalid = f
        .put(
            "broken",
            &[
                ("library.toml", LIBRARY_TOML.as_bytes()),
                ("prompts/triage.md", broken_triage.as_bytes()),
                ("prompts/reply.md", REPLY.as_bytes()),
            ],
        )
        .await;
    assert_eq!(invalid.status, 400, "{}", invalid.body);
    assert!(invalid.body.contains("prompts/triage.md") && invalid.body.contains("{{customer}}"), "{}", invalid.body);
    assert_eq!(f.get(&f.url("broken")).await.status, 404);

    // The manifest cannot be deleted on its own.
    let delete = f.client.delete(&f.url("support-prompts/files/library.toml"), &[("Api-Key", OWNER)]).await;
    assert_eq!(delete.status, 400, "{}", delete.body);
    assert!(delete.body.contains("library.toml cannot be deleted"), "{}", delete.body);
    assert_eq!(f.get(&f.url("support-prompts")).await.etag(), etag, "the library is unchanged");

    // Sharing works for the new type with no host change: the colleague
    // reads the library once the invitation is accepted, and not before.
    let colleague = [("Api-Key", COLLEAGUE)];
    assert_eq!(f.client.get(&f.url("support-prompts"), &colleague).await.status, 403);
    let share = serde_json::json!({"resources": [{"url": format!("prompt-libraries/{}/support-prompts", f.bucket)}]});
    let reply = f.client.post("/v1/ops/resource/share/create", &[("Api-Key", OWNER)], &share.to_string()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let link = reply.json()["invitationLink"].as_str().unwrap().to_string();
    let shared = serde_json::json!({"resourceTypes": ["PROMPT_LIBRARY"], "with": "others"});
    let listed = f.client.post("/v1/ops/resource/share/list", &[("Api-Key", OWNER)], &shared.to_string()).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let invitation = f.client.get(&format!("{link}?accept=true"), &colleague).await;
    assert_eq!(invitation.status, 200, "{}", invitation.body);
    let read = f.client.get(&f.url("support-prompts/files/prompts/reply.md"), &colleague).await;
    assert_eq!((read.status, read.body.as_str()), (200, REPLY));
    let limits = f.client.get("/v1/invitations", &[("Api-Key", OWNER)]).await.json();
    assert_eq!(limits["invitations"][0]["maxAcceptedUsers"], 10, "a handler type gets the default share limit");

    // Publication too: review copy, approval, public copy with the same etag.
    let publish = serde_json::json!({
        "targetFolder": "public/support/",
        "resources": [{
            "action": "ADD",
            "sourceUrl": format!("prompt-libraries/{}/support-prompts", f.bucket),
            "targetUrl": "prompt-libraries/public/support/support-prompts"
        }]
    });
    let created = f.client.post("/v1/ops/publication/create", &[("Api-Key", OWNER)], &publish.to_string()).await;
    assert_eq!(created.status, 200, "{}", created.body);
    assert_eq!(created.json()["resourceTypes"], serde_json::json!(["PROMPT_LIBRARY"]));
    let approve = serde_json::json!({"url": created.json()["url"]});
    let approved = f.client.post("/v1/ops/publication/approve", &[("Api-Key", ADMIN)], &approve.to_string()).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    let public = f.client.get("/v2/prompt-libraries/public/support/support-prompts", &colleague).await;
    assert_eq!(public.status, 200, "{}", public.body);
    assert_eq!(public.etag(), etag);
}
