//! `GET /openapi.json` (issue 14): served without credentials, valid OpenAPI
//! 3.1 by the standard validator (`openapi-spec-validator`), and true to the
//! running server method by method: every documented operation is routed,
//! and every method the server routes on a documented path is documented.

use std::process::Command;

use serde_json::Value;

use crate::support::Setup;
use crate::upstream::clients_python;

const METHODS: [&str; 4] = ["GET", "PUT", "POST", "DELETE"];

/// A documented path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{group}", "skills")
        .replace("{bucket}", "some-bucket")
        .replace("{path}", "team/s")
        .replace("{deployment}", "app")
        .replace("{id}", "invitation")
}

#[tokio::test]
async fn the_document_is_valid_openapi_and_matches_what_the_server_routes() {
    let setup = Setup::new();
    let server = setup.start(None, &[]);
    let client = server.client();

    let reply = client.get("/openapi.json", &[]).await;
    assert_eq!(reply.status, 200, "no credentials needed: {}", reply.body);
    assert!(reply.headers["content-type"].to_str().unwrap().starts_with("application/json"));
    let doc: Value = reply.json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."), "{}", doc["openapi"]);

    // The standard validator accepts it.
    if let Some(python) = clients_python() {
        let file = setup.path().join("openapi.json");
        std::fs::write(&file, &reply.bytes).unwrap();
        let output = Command::new(python).args(["-m", "openapi_spec_validator"]).arg(&file).output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "openapi-spec-validator refused the document:\n{said}");
        assert!(said.contains("OK"), "{said}");
    }

    // Each documented path answers exactly its documented methods: the
    // others get 405 from the router, the documented ones never 405 nor
    // the fallback's "No route".
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 30, "{} paths", paths.len());
    for (path, item) in paths {
        let url = concrete(path);
        for method in METHODS {
            let documented = item.get(method.to_ascii_lowercase()).is_some();
            let reply = client.send_raw(method, &url, &[], Vec::new()).await;
            let routed = reply.status != 405 && !reply.body.starts_with("No route");
            assert_eq!(
                routed, documented,
                "{method} {path} ({url}): documented {documented}, answered {} {}",
                reply.status, reply.body
            );
        }
    }
}
