//! Application definitions (`/v1/applications/…`): DIAL stores and returns
//! them in snake_case and accepts camelCase on input.
//!
//! [`normalize_application`] is the one entry point: it converts the keys of
//! known fields to snake_case and then validates the shape with
//! [`validate_application`], the one place later rules (resource
//! dependencies, interceptors, forced fields) are added.

use serde_json::{Map, Value};

/// Snake_case names of the application fields (and of the fields of its
/// nested objects) whose camelCase spelling is converted on input. Keys not
/// listed here are kept as sent.
const KNOWN_FIELDS: &[&str] = &[
    // Application
    "display_name",
    "display_version",
    "icon_url",
    "description_keywords",
    "user_roles",
    "forward_auth_token",
    "input_attachment_types",
    "max_input_attachments",
    "max_retry_attempts",
    "application_properties",
    "application_type_schema_id",
    "external_services",
    "resource_dependencies",
    "created_at",
    "updated_at",
    // features
    "rate_endpoint",
    "tokenize_endpoint",
    "truncate_prompt_endpoint",
    "configuration_endpoint",
    "system_prompt_supported",
    "tools_supported",
    "seed_supported",
    "url_attachments_supported",
    "folder_attachments_supported",
    "allow_resume",
    "accessible_by_per_request_key",
    "content_parts_supported",
    "temperature_supported",
    "addons_supported",
    "consent_required",
    "skills_supported",
    // function
    "author_bucket",
    "source_folder",
    "target_folder",
    "chat_completion",
    "truncate_prompt",
    // interfaces
    "anthropic_messages",
    "chat_completions",
    // mcp
    "forward_per_request_key",
    // resource_dependencies entries
    "link_id",
];

/// Fields whose values are free-form maps: their keys are data, not field
/// names, and are never converted.
const FREE_FORM_FIELDS: &[&str] = &["defaults", "env", "application_properties", "headers"];

/// Optional string fields of an application.
const STRING_FIELDS: &[&str] =
    &["display_name", "display_version", "icon_url", "description", "reference", "application_type_schema_id"];

/// Optional string-array fields of an application.
const STRING_ARRAY_FIELDS: &[&str] = &["user_roles", "input_attachment_types", "description_keywords"];

/// An application definition that cannot be stored: 400
/// `Invalid application: <issue>; <issue>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid application: {}", .0.join("; "))]
pub struct InvalidApplication(pub Vec<String>);

/// Converts known camelCase keys to snake_case (recursively, outside
/// free-form maps) and validates the result; returns what is stored.
pub fn normalize_application(definition: Value) -> Result<Value, InvalidApplication> {
    let normalized = to_snake_case_keys(definition);
    validate_application(&normalized)?;
    Ok(normalized)
}

/// `displayName` → `display_name` for every key in [`KNOWN_FIELDS`], at any
/// depth, except inside [`FREE_FORM_FIELDS`]. When both spellings are sent,
/// the snake_case one wins.
pub fn to_snake_case_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(convert_object(map)),
        Value::Array(items) => Value::Array(items.into_iter().map(to_snake_case_keys).collect()),
        other => other,
    }
}

fn convert_object(map: Map<String, Value>) -> Map<String, Value> {
    let mut converted = Map::with_capacity(map.len());
    let mut renamed = Vec::new();
    for (key, value) in map {
        let snake = known_snake_case(&key);
        let name = snake.clone().unwrap_or(key);
        let value = if FREE_FORM_FIELDS.contains(&name.as_str()) { value } else { to_snake_case_keys(value) };
        if snake.is_some() {
            renamed.push((name, value));
        } else {
            converted.insert(name, value);
        }
    }
    for (name, value) in renamed {
        converted.entry(name).or_insert(value);
    }
    converted
}

/// The snake_case field a camelCase key stands for, if it is a known one.
fn known_snake_case(key: &str) -> Option<String> {
    if !key.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let snake = camel_to_snake(key);
    KNOWN_FIELDS.contains(&snake.as_str()).then_some(snake)
}

fn camel_to_snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for (index, c) in key.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if index > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The shape every stored application must have (after key conversion):
/// a JSON object with a chat-completion `endpoint`, an `interfaces` object,
/// or an `mcp` object; optional fields, when present, of the right type.
pub fn validate_application(definition: &Value) -> Result<(), InvalidApplication> {
    let Some(app) = definition.as_object() else {
        return Err(InvalidApplication(vec!["the definition must be a JSON object".into()]));
    };
    let mut issues = Vec::new();
    let present = |name: &str| app.get(name).is_some_and(|v| !v.is_null());

    if !present("endpoint") && !present("interfaces") && !present("mcp") {
        issues.push("application endpoint, interfaces or mcp must be provided".into());
    }
    if let Some(endpoint) = app.get("endpoint").filter(|v| !v.is_null()) {
        check_endpoint("endpoint", endpoint, &mut issues);
    }
    for name in STRING_FIELDS {
        if let Some(value) = app.get(*name).filter(|v| !v.is_null() && !v.is_string()) {
            issues.push(format!("{name} must be a string, not {}", kind(value)));
        }
    }
    for name in STRING_ARRAY_FIELDS {
        if let Some(value) = app.get(*name).filter(|v| !v.is_null())
            && !value.as_array().is_some_and(|items| items.iter().all(Value::is_string))
        {
            issues.push(format!("{name} must be an array of strings"));
        }
    }
    if let Some(value) = app.get("max_input_attachments").filter(|v| !v.is_null())
        && value.as_u64().is_none()
    {
        issues.push("max_input_attachments must be a non-negative integer".into());
    }
    if let Some(value) = app.get("forward_auth_token").filter(|v| !v.is_null())
        && !value.is_boolean()
    {
        issues.push("forward_auth_token must be a boolean".into());
    }
    for name in ["defaults", "application_properties"] {
        if let Some(value) = app.get(name).filter(|v| !v.is_null())
            && !value.is_object()
        {
            issues.push(format!("{name} must be an object"));
        }
    }
    if let Some(features) = app.get("features").filter(|v| !v.is_null()) {
        check_features(features, &mut issues);
    }
    if let Some(interfaces) = app.get("interfaces").filter(|v| !v.is_null()) {
        check_interfaces(interfaces, &mut issues);
    }
    if let Some(mcp) = app.get("mcp").filter(|v| !v.is_null()) {
        check_mcp(mcp, &mut issues);
    }
    if let Some(value) = app.get("resource_dependencies").filter(|v| !v.is_null())
        && !value.is_array()
    {
        issues.push("resource_dependencies must be an array".into());
    }
    if issues.is_empty() { Ok(()) } else { Err(InvalidApplication(issues)) }
}

fn check_endpoint(name: &str, value: &Value, issues: &mut Vec<String>) {
    match value.as_str() {
        Some(endpoint) if !endpoint.trim().is_empty() => {}
        Some(_) => issues.push(format!("{name} must not be empty")),
        None => issues.push(format!("{name} must be a string, not {}", kind(value))),
    }
}

fn check_features(features: &Value, issues: &mut Vec<String>) {
    let Some(features) = features.as_object() else {
        issues.push("features must be an object".into());
        return;
    };
    for (name, value) in features {
        if value.is_null() {
            continue;
        }
        if name.ends_with("_endpoint") {
            if !value.is_string() {
                issues.push(format!("features.{name} must be a string"));
            }
        } else if (name.ends_with("_supported") || name.ends_with("_required") || name == "allow_resume")
            && !value.is_boolean()
        {
            issues.push(format!("features.{name} must be a boolean"));
        }
    }
}

fn check_interfaces(interfaces: &Value, issues: &mut Vec<String>) {
    let Some(interfaces) = interfaces.as_object() else {
        issues.push("interfaces must be an object".into());
        return;
    };
    if interfaces.is_empty() {
        issues.push("interfaces must name at least one interface".into());
    }
    for (name, interface) in interfaces {
        match interface.as_object().and_then(|i| i.get("endpoint")) {
            Some(endpoint) => check_endpoint(&format!("interfaces.{name}.endpoint"), endpoint, issues),
            None => issues.push(format!("interfaces.{name} must be an object with an endpoint")),
        }
    }
}

fn check_mcp(mcp: &Value, issues: &mut Vec<String>) {
    let Some(mcp) = mcp.as_object() else {
        issues.push("mcp must be an object".into());
        return;
    };
    match mcp.get("endpoint") {
        Some(endpoint) => check_endpoint("mcp.endpoint", endpoint, issues),
        None => issues.push("mcp.endpoint must be provided".into()),
    }
    if let Some(transport) = mcp.get("transport").filter(|v| !v.is_null())
        && !transport.is_string()
    {
        issues.push("mcp.transport must be a string".into());
    }
    if let Some(forward) = mcp.get("forward_per_request_key").filter(|v| !v.is_null())
        && !forward.is_boolean()
    {
        issues.push("mcp.forward_per_request_key must be a boolean".into());
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn camel_case_in_snake_case_out() {
        let input = json!({
            "displayName": "My app",
            "displayVersion": "1.0",
            "iconUrl": "https://x/icon.png",
            "endpoint": "http://app/chat",
            "userRoles": ["a"],
            "inputAttachmentTypes": ["image/png"],
            "maxInputAttachments": 2,
            "features": {"systemPromptSupported": true, "rateEndpoint": "http://app/rate", "consentRequired": false},
            "mcp": {"endpoint": "http://app/mcp", "transport": "http", "forwardPerRequestKey": false},
            "interfaces": {"anthropicMessages": {"endpoint": "http://app/messages"}, "responses": {"endpoint": "http://app/r"}},
            "resourceDependencies": [{"kind": "dial.resourceLink", "linkId": "l1", "target": {"path": "files/b/x"}, "access": ["READ"], "required": true}],
            "defaults": {"maxTokens": 5, "nested": {"displayName": "kept"}},
            "applicationProperties": {"someKey": 1},
            "customField": {"innerCamel": 1},
        });
        let output = normalize_application(input).unwrap();
        assert_eq!(
            output,
            json!({
                "display_name": "My app",
                "display_version": "1.0",
                "icon_url": "https://x/icon.png",
                "endpoint": "http://app/chat",
                "user_roles": ["a"],
                "input_attachment_types": ["image/png"],
                "max_input_attachments": 2,
                "features": {"system_prompt_supported": true, "rate_endpoint": "http://app/rate", "consent_required": false},
                "mcp": {"endpoint": "http://app/mcp", "transport": "http", "forward_per_request_key": false},
                "interfaces": {"anthropic_messages": {"endpoint": "http://app/messages"}, "responses": {"endpoint": "http://app/r"}},
                "resource_dependencies": [{"kind": "dial.resourceLink", "link_id": "l1", "target": {"path": "files/b/x"}, "access": ["READ"], "required": true}],
                "defaults": {"maxTokens": 5, "nested": {"displayName": "kept"}},
                "application_properties": {"someKey": 1},
                "customField": {"innerCamel": 1},
            })
        );
    }

    #[test]
    fn snake_case_input_is_kept_and_wins_over_camel_case() {
        let input = json!({"endpoint": "http://a", "display_name": "snake", "displayName": "camel"});
        assert_eq!(normalize_application(input).unwrap(), json!({"endpoint": "http://a", "display_name": "snake"}));
        let snake = json!({"endpoint": "http://a", "display_name": "x", "features": {"tools_supported": true}});
        assert_eq!(normalize_application(snake.clone()).unwrap(), snake);
    }

    #[test]
    fn key_conversion() {
        assert_eq!(camel_to_snake("displayName"), "display_name");
        assert_eq!(camel_to_snake("accessibleByPerRequestKey"), "accessible_by_per_request_key");
        assert_eq!(known_snake_case("forwardPerRequestKey").as_deref(), Some("forward_per_request_key"));
        assert_eq!(known_snake_case("somethingElse"), None);
        assert_eq!(known_snake_case("display_name"), None);
    }

    #[test]
    fn accepted_shapes() {
        assert!(normalize_application(json!({"endpoint": "http://a"})).is_ok());
        assert!(normalize_application(json!({"interfaces": {"responses": {"endpoint": "http://a"}}})).is_ok());
        assert!(normalize_application(json!({"mcp": {"endpoint": "http://a/mcp"}})).is_ok());
    }

    #[test]
    fn rejected_shapes() {
        let issues = |value: Value| normalize_application(value).unwrap_err().0;
        assert_eq!(issues(json!([1, 2])), ["the definition must be a JSON object"]);
        assert_eq!(issues(json!("x")), ["the definition must be a JSON object"]);
        assert_eq!(issues(json!({"displayName": "x"})), ["application endpoint, interfaces or mcp must be provided"]);
        assert_eq!(issues(json!({"endpoint": 5})), ["endpoint must be a string, not a number"]);
        assert_eq!(issues(json!({"endpoint": ""})), ["endpoint must not be empty"]);
        assert_eq!(
            issues(json!({"endpoint": "http://a", "displayName": 1, "userRoles": "admin"})),
            ["display_name must be a string, not a number", "user_roles must be an array of strings"]
        );
        assert_eq!(issues(json!({"mcp": {"transport": "http"}})), ["mcp.endpoint must be provided"]);
        assert_eq!(
            issues(json!({"interfaces": {"responses": "http://a"}})),
            ["interfaces.responses must be an object with an endpoint"]
        );
        assert_eq!(
            issues(json!({"endpoint": "http://a", "features": {"toolsSupported": "yes"}})),
            ["features.tools_supported must be a boolean"]
        );
        assert_eq!(
            issues(json!({"endpoint": "http://a", "resourceDependencies": {}})),
            ["resource_dependencies must be an array"]
        );
        let message = InvalidApplication(vec!["a".into(), "b".into()]).to_string();
        assert_eq!(message, "Invalid application: a; b");
    }
}
