//! `GET /openapi.json`: the OpenAPI 3.1 document, derived from the
//! `#[utoipa::path]` attributes on the route handlers themselves, so a route
//! and its documentation change together. The router's table
//! ([`super::routes_table`]) and this document are checked against each
//! other in this module's tests and, method by method against the running
//! server, in `tests/blackbox/openapi.rs`.
//!
//! Handlers answer typed bodies where they can, and those types are their
//! schemas. The few shapes still built as JSON values (DIAL's listing JSON,
//! publication summaries) and bodies read as streams are described by the
//! schema types below; errors are plain text everywhere
//! (see [`super::error`]), so every operation gets one `default` response
//! saying so instead of each repeating it.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, OpenApi as Document, PathItem, RefOr, Response};
use utoipa::{Modify, OpenApi, PartialSchema};

use super::hosted_skills::{anthropic, openai};
use super::{
    consent, console, deployments, feed, oauth, permissions, publication, resource_ops, routes, sharing, skills_index,
    skills_mcp, v1, v2,
};

/// Paths one handler serves besides the one its attribute documents:
/// `(documented, also, suffix of the copies' operation ids)`. A copy keeps
/// the path parameters its own path names.
const ALSO_SERVED: [(&str, &str, &str); 7] = [
    ("/v1/files/{bucket}/{path}", "/v1/prompts/{bucket}/{path}", "prompts"),
    ("/v1/files/{bucket}/{path}", "/v1/conversations/{bucket}/{path}", "conversations"),
    ("/v1/files/{bucket}/{path}", "/v1/applications/{bucket}/{path}", "applications"),
    ("/openai/deployments/{deployment}/chat/completions", "/openai/deployments/{deployment}/responses", "responses"),
    // A resource's files: the `…/files/` root is the listing of `{dir}` with none.
    ("/v2/metadata/{group}/{bucket}/{path}/files/{dir}", "/v2/metadata/{group}/{bucket}/{path}/files", "root"),
    (
        "/openai/deployments/{deployment}/chat/completions",
        "/openai/deployments/{deployment}/completions",
        "completions",
    ),
    ("/openai/deployments/{deployment}/chat/completions", "/openai/deployments/{deployment}/embeddings", "embeddings"),
];

#[derive(OpenApi)]
#[openapi(
    info(
        title = "dial-host",
        description = "DIAL Core's resource API (v1 blobs, sharing, publication, per-request keys, consent) \
                       and folder-shaped v2 resources whose types are WebAssembly handlers."
    ),
    paths(
        document,
        routes::health,
        console::page,
        routes::ready,
        routes::metrics,
        routes::bucket,
        routes::list_handlers,
        routes::reload_handlers,
        routes::list_types,
        sharing::create,
        sharing::list,
        sharing::discard,
        sharing::revoke,
        sharing::copy,
        sharing::list_invitations,
        sharing::get_invitation,
        sharing::delete_invitation,
        resource_ops::copy,
        resource_ops::move_resource,
        feed::subscribe,
        publication::create,
        publication::list,
        publication::get,
        publication::delete,
        publication::approve,
        publication::reject,
        publication::list_rules,
        v1::metadata,
        v1::get_item,
        v1::put_item,
        v1::delete_item,
        deployments::openai,
        deployments::anthropic,
        deployments::mcp,
        deployments::list_deployments,
        deployments::list_applications,
        deployments::get_deployment,
        deployments::get_application,
        deployments::tokenize,
        deployments::truncate_prompt,
        deployments::configuration,
        deployments::rate,
        deployments::deployment_names,
        anthropic::create,
        anthropic::list,
        anthropic::retrieve,
        anthropic::delete,
        anthropic::create_version,
        anthropic::list_versions,
        anthropic::retrieve_version,
        anthropic::delete_version,
        anthropic::version_content,
        openai::create,
        openai::list,
        openai::retrieve,
        openai::update,
        openai::delete,
        openai::content,
        openai::create_version,
        openai::list_versions,
        openai::retrieve_version,
        openai::delete_version,
        openai::version_content,
        routes::user_info,
        permissions::grant,
        permissions::revoke,
        permissions::list,
        consent::user_get,
        consent::user_post,
        consent::admin_get,
        consent::admin_post,
        consent::admin_delete,
        v2::metadata,
        v2::versions,
        v2::deleted,
        v2::restore,
        v2::get,
        v2::put,
        v2::delete,
        v2::get_file,
        v2::put_file,
        v2::delete_file,
        v2::list_files,
        skills_index::well_known,
        skills_mcp::mcp,
        oauth::protected_resource,
    ),
    security(("api_key" = []), ("bearer" = [])),
    modifiers(&Conventions),
    tags(
        (name = "service", description = "Health, readiness, metrics, this document, handler administration"),
        (name = "v1", description = "DIAL's single-blob resources: files, prompts, conversations, applications"),
        (name = "v2", description = "Folder resources (a skill: SKILL.md and any files), typed by WebAssembly handlers"),
        (name = "sharing", description = "Invitations and shared access"),
        (name = "publication", description = "Publishing resources to the public bucket, reviewed by admins"),
        (name = "resources", description = "Copy, move and the change feed, for every kind of resource"),
        (name = "deployments", description = "Applications called through the host with per-request keys"),
        (name = "consent", description = "Users' and admins' consent to applications' resource dependencies"),
        (name = "skills", description = "Skills for agents: the agentskills.io well-known index of the public skills"),
    )
)]
struct ApiDoc;

/// What every operation shares: the two ways to authenticate, plain-text
/// errors, and the paths a handler serves besides its documented one.
struct Conventions;

impl Modify for Conventions {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme("api_key", SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("Api-Key"))));
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build()),
        );

        // Ids are the handlers' names, which repeat across modules (`get`,
        // `delete`): qualified by the tag, they are unique.
        for item in doc.paths.paths.values_mut() {
            for operation in operations(item) {
                let tag = operation.tags.as_ref().and_then(|tags| tags.first()).cloned().unwrap_or_default();
                operation.operation_id = operation.operation_id.take().map(|id| format!("{tag}_{id}"));
            }
        }
        for (documented, also, suffix) in ALSO_SERVED {
            let mut item = doc.paths.paths.get(documented).cloned().expect("ALSO_SERVED names documented paths");
            for operation in operations(&mut item) {
                operation.operation_id = operation.operation_id.take().map(|id| format!("{id}_{suffix}"));
                if let Some(parameters) = operation.parameters.as_mut() {
                    parameters.retain(|parameter| {
                        parameter.parameter_in != ParameterIn::Path || also.contains(&format!("{{{}}}", parameter.name))
                    });
                }
            }
            doc.paths.paths.insert(also.to_string(), item);
        }

        // One handler serving several methods gets one id per method.
        for item in doc.paths.paths.values_mut() {
            let shared: Vec<bool> = {
                let ids: Vec<Option<String>> = operations(item).map(|o| o.operation_id.clone()).collect();
                ids.iter().map(|id| ids.iter().filter(|other| *other == id).count() > 1).collect()
            };
            for ((method, operation), shared) in methods(item).zip(shared) {
                if shared {
                    operation.operation_id = operation.operation_id.take().map(|id| format!("{id}_{method}"));
                }
            }
        }

        // A handler serving several methods documents one request body; only
        // the methods that carry one keep it (MCP's GET and DELETE send none).
        for item in doc.paths.paths.values_mut() {
            for operation in [&mut item.get, &mut item.delete].into_iter().flatten() {
                operation.request_body = None;
            }
        }

        let error = Response::builder()
            .description("An error: its status, and a plain-text message naming the problem")
            .content("text/plain", Content::new(Some(String::schema())))
            .build();
        for item in doc.paths.paths.values_mut() {
            for operation in operations(item) {
                operation.responses.responses.entry("default".into()).or_insert_with(|| RefOr::T(error.clone()));
            }
        }
    }
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    methods(item).map(|(_, operation)| operation)
}

fn methods(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut utoipa::openapi::path::Operation)> {
    [
        ("get", &mut item.get),
        ("put", &mut item.put),
        ("post", &mut item.post),
        ("delete", &mut item.delete),
        ("patch", &mut item.patch),
        ("head", &mut item.head),
    ]
    .into_iter()
    .filter_map(|(method, operation)| Some((method, operation.as_mut()?)))
}

/// Built once, served as the same bytes every time.
static DOCUMENT: LazyLock<String> =
    LazyLock::new(|| ApiDoc::openapi().to_json().expect("the OpenAPI document serialises"));

/// `GET /openapi.json`: this document; no credentials needed.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    security(()),
    responses((status = 200, description = "The OpenAPI 3.1 document of every route", body = Object))
)]
pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT.as_str())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// The static prefix of a router template with a wildcard tail, or the
    /// whole template with its parameters blanked.
    enum Template {
        Exact(String),
        Prefix(String),
    }

    fn parse(template: &str) -> Template {
        match template.split_once("{*") {
            Some((prefix, _)) => Template::Prefix(prefix.to_string()),
            None => Template::Exact(blank_parameters(template)),
        }
    }

    fn blank_parameters(path: &str) -> String {
        let mut out = String::new();
        let mut inside = false;
        for c in path.chars() {
            match c {
                '{' => (inside, out) = (true, out + "{}"),
                '}' => inside = false,
                c if !inside => out.push(c),
                _ => {}
            }
        }
        out
    }

    /// The template serving a documented path: the same path, else the
    /// wildcard route with the longest prefix of it (as the router picks).
    fn serving<'a>(path: &str, templates: &'a [&'static str]) -> Option<&'a str> {
        let blank = blank_parameters(path);
        templates.iter().copied().find(|t| matches!(parse(t), Template::Exact(e) if e == blank)).or_else(|| {
            templates
                .iter()
                .copied()
                .filter_map(|t| match parse(t) {
                    Template::Prefix(prefix) if path.starts_with(&prefix) => Some((prefix.len(), t)),
                    _ => None,
                })
                .max_by_key(|(length, _)| *length)
                .map(|(_, t)| t)
        })
    }

    fn document() -> Value {
        serde_json::from_str(&DOCUMENT).unwrap()
    }

    #[test]
    fn every_route_is_documented_and_every_documented_path_is_routed() {
        let templates: Vec<&'static str> = super::super::routes_table().into_iter().map(|(t, _)| t).collect();
        let paths: Vec<String> = document()["paths"].as_object().unwrap().keys().cloned().collect();
        let mut served = std::collections::BTreeSet::new();
        for path in &paths {
            let template = serving(path, &templates).unwrap_or_else(|| panic!("{path} is documented, not routed"));
            served.insert(template);
        }
        let undocumented: Vec<&&str> = templates.iter().filter(|t| !served.contains(**t)).collect();
        assert!(undocumented.is_empty(), "routes without documentation: {undocumented:?}");
    }

    /// The names of the types deriving `ToSchema` in `source`: the type's own
    /// name, or the one `#[schema(as = …)]` gives it.
    fn schema_names(source: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut pending = false;
        let mut renamed: Option<String> = None;
        for line in source.lines().map(str::trim) {
            if line.starts_with("#[derive(") && line.contains("ToSchema") {
                (pending, renamed) = (true, None);
            } else if pending && let Some(rest) = line.strip_prefix("#[schema(as = ") {
                renamed = rest.split([')', ',']).next().map(|name| name.trim().to_string());
            } else if pending && let Some(item) = ["struct ", "enum "].iter().find_map(|k| line.split_once(k)) {
                let name = item.1.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or_default();
                names.push(renamed.take().unwrap_or_else(|| name.to_string()));
                pending = false;
            }
        }
        names
    }

    #[test]
    fn no_two_schema_types_share_a_name() {
        // utoipa keys components by the type's bare name: a second type of
        // the same name silently replaces the first in the document (the
        // health check once answered with the publication-status enum).
        fn walk(dir: &std::path::Path, found: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let source = std::fs::read_to_string(&path).unwrap();
                    found.extend(schema_names(&source).into_iter().map(|n| (n, path.display().to_string())));
                }
            }
        }
        let mut found = Vec::new();
        // Schema types live in this crate and in the core (domain types that derive their schema).
        for src in ["src", "../core/src", "../runtime/src"] {
            walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(src), &mut found);
        }
        assert!(found.len() > 20, "the scan found only {found:?}");
        let mut seen = std::collections::BTreeMap::new();
        for (name, file) in &found {
            if let Some(first) = seen.insert(name, file) {
                panic!("two schema types named {name}: in {first} and in {file}");
            }
        }
        // And every component is one of those types: none named after a
        // generic container by utoipa (a `BTreeMap` alias once was).
        for component in document()["components"]["schemas"].as_object().unwrap().keys() {
            assert!(seen.contains_key(component), "component {component} is no schema type's name");
        }
    }

    #[test]
    fn the_scan_sees_derives_and_renames() {
        let source = "#[derive(Serialize, utoipa::ToSchema)]\n#[serde(rename_all = \"camelCase\")]\npub struct A {\n}\n\
                      #[derive(ToSchema)]\n#[schema(as = B)]\nstruct Inner;\n#[derive(Debug)]\nenum C {}\n\
                      #[derive(ToSchema)]\npub(crate) enum D { X }\n";
        assert_eq!(schema_names(source), ["A", "B", "D"]);
    }

    /// A client generated from the document reaches a resource's files: one
    /// file's GET (of a version too), PUT and DELETE, and the listing of its
    /// files, each its own path; and every path declares exactly the path
    /// parameters its template names.
    #[test]
    fn a_resources_files_are_their_own_paths() {
        let doc = &document();
        let file = &doc["paths"]["/v2/{group}/{bucket}/{path}/files/{file}"];
        let methods: Vec<&String> = file.as_object().expect("one file is documented").keys().collect();
        assert_eq!(methods, ["get", "put", "delete"]);
        let names = |operation: &Value| -> Vec<String> {
            operation["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert!(names(&file["get"]).contains(&"version".to_string()), "{}", file["get"]);
        for listing in
            ["/v2/metadata/{group}/{bucket}/{path}/files", "/v2/metadata/{group}/{bucket}/{path}/files/{dir}"]
        {
            let get = &doc["paths"][listing]["get"];
            for query in ["limit", "token", "recursive"] {
                assert!(names(get).contains(&query.to_string()), "{listing}: {get}");
            }
        }
        for (path, item) in doc["paths"].as_object().unwrap() {
            let templated: Vec<&str> = path.split(['{', '}']).skip(1).step_by(2).collect();
            for (method, operation) in item.as_object().unwrap() {
                let declared: Vec<&str> = operation["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "path")
                    .map(|p| p["name"].as_str().unwrap())
                    .collect();
                assert_eq!(declared, templated, "{method} {path}");
            }
        }
    }

    #[test]
    fn the_document_is_openapi_3_1_with_unique_operation_ids_and_errors_everywhere() {
        let doc = &document();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let mut ids = std::collections::BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let id = operation["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no id"));
                assert!(ids.insert(id.to_string()), "{id} twice");
                assert!(operation["responses"]["default"].is_object(), "{method} {path}");
                if method == "get" || method == "delete" {
                    assert!(operation.get("requestBody").is_none(), "{method} {path} documents a request body");
                }
            }
        }
        for (documented, also, _) in ALSO_SERVED {
            assert_eq!(
                doc["paths"][documented].as_object().unwrap().len(),
                doc["paths"][also].as_object().unwrap().len()
            );
        }
    }
}
