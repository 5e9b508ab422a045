//! Applications the host calls: from the configuration (`[applications.<name>]`)
//! and from `/v1/applications/{bucket}/{path}` resources (SPEC §8).
//!
//! A deployment id names one: the configuration name, or
//! `applications/{bucket}/{path}` for a stored definition (which the caller
//! must be able to read). Definitions are normalised and validated by the one
//! function the applications API uses ([`crate::blobs::application`]), then
//! read into the typed [`Application`] the proxy needs.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::blobs::application::normalize_application;
use crate::dependencies::{DeclarationPolicy, Declared};

/// The APIs an application can be called through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /openai/deployments/{id}/chat/completions` → `endpoint`.
    ChatCompletions,
    /// `POST /openai/deployments/{id}/responses` → `interfaces.responses.endpoint`.
    Responses,
    /// `POST /anthropic/deployments/{id}/v1/messages` → `interfaces.anthropic_messages.endpoint`.
    AnthropicMessages,
    /// `POST|GET|DELETE /v1/deployments/{id}/mcp` → `mcp.endpoint`.
    Mcp,
}

impl Api {
    /// How messages name the API.
    pub fn name(self) -> &'static str {
        match self {
            Self::ChatCompletions => "chat completions",
            Self::Responses => "responses",
            Self::AnthropicMessages => "Anthropic messages",
            Self::Mcp => "MCP",
        }
    }

    /// The API as a metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::ChatCompletions => "chat_completions",
            Self::Responses => "responses",
            Self::AnthropicMessages => "anthropic_messages",
            Self::Mcp => "mcp",
        }
    }
}

/// The parts of an application definition the host acts on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Application {
    pub endpoint: Option<String>,
    pub display_name: Option<String>,
    pub display_version: Option<String>,
    pub description: Option<String>,
    pub icon_url: Option<String>,
    /// `None`: everyone may call it; empty: nobody (config applications).
    pub user_roles: Option<Vec<String>>,
    pub interfaces: Interfaces,
    pub mcp: Option<McpSettings>,
    pub features: Features,
    /// The user resources it declares it needs (validated when written).
    pub resource_dependencies: Vec<Declared>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Interfaces {
    pub responses: Option<Endpoint>,
    pub anthropic_messages: Option<Endpoint>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Endpoint {
    pub endpoint: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct McpSettings {
    pub endpoint: Option<String>,
    pub transport: Option<String>,
    /// Whether the MCP server gets the per-request key (`Api-Key`).
    pub forward_per_request_key: bool,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self { endpoint: None, transport: None, forward_per_request_key: true }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Features {
    pub consent_required: Option<bool>,
}

impl Application {
    /// Reads a definition as stored (already normalised and validated).
    pub fn from_stored(json: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(json).map_err(|error| format!("the stored definition cannot be read: {error}"))
    }

    /// The upstream URL of `api`, if the application offers it.
    pub fn endpoint_for(&self, api: Api) -> Option<&str> {
        let endpoint = match api {
            Api::ChatCompletions => self.endpoint.as_deref(),
            Api::Responses => self.interfaces.responses.as_ref().and_then(|e| e.endpoint.as_deref()),
            Api::AnthropicMessages => self.interfaces.anthropic_messages.as_ref().and_then(|e| e.endpoint.as_deref()),
            Api::Mcp => self.mcp.as_ref().and_then(|mcp| mcp.endpoint.as_deref()),
        };
        endpoint.filter(|e| !e.is_empty())
    }

    /// Whether the MCP server is handed the per-request key.
    pub fn forwards_key(&self, api: Api) -> bool {
        api != Api::Mcp || self.mcp.as_ref().is_none_or(|mcp| mcp.forward_per_request_key)
    }

    /// One line for the start banner and `check-config`: the APIs it is
    /// called through, who may call it, what it declares.
    pub fn summary(&self) -> String {
        let apis: Vec<&str> = [Api::ChatCompletions, Api::Responses, Api::AnthropicMessages, Api::Mcp]
            .into_iter()
            .filter(|api| self.endpoint_for(*api).is_some())
            .map(Api::name)
            .collect();
        let mut line = apis.join(", ");
        match &self.user_roles {
            Some(roles) if roles.is_empty() => line.push_str("; callable by nobody (user_roles = [])"),
            Some(roles) => line.push_str(&format!("; roles {}", roles.join(", "))),
            None => {}
        }
        if !self.resource_dependencies.is_empty() {
            line.push_str(&format!("; {} resource dependencies", self.resource_dependencies.len()));
        }
        if self.features.consent_required == Some(true) {
            line.push_str("; asks users' consent");
        }
        line
    }

    /// Whether a caller holding `roles` may call it (`user_roles`: `None` →
    /// everyone, an empty list → nobody).
    pub fn admits(&self, roles: &[String]) -> bool {
        self.user_roles.as_ref().is_none_or(|allowed| roles.iter().any(|role| allowed.contains(role)))
    }
}

/// The applications the configuration defines, checked at load.
#[derive(Debug, Clone, Default)]
pub struct ConfigApps {
    apps: BTreeMap<String, Arc<Application>>,
}

/// The keys an `[applications.<name>]` table may hold, at every level: what
/// the host acts on, and the descriptive fields DIAL shows. Anything else is
/// an error naming it, because a key accepted and ignored fails silently — a
/// misspelt `user_roles` would open an admin-only application to everyone.
mod config_schema {
    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read for its shape only
    pub struct Table {
        endpoint: Option<String>,
        display_name: Option<String>,
        display_version: Option<String>,
        description: Option<String>,
        icon_url: Option<String>,
        description_keywords: Option<Vec<String>>,
        user_roles: Option<Vec<String>>,
        interfaces: Option<Interfaces>,
        mcp: Option<Mcp>,
        features: Option<Features>,
        resource_dependencies: Option<Value>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Interfaces {
        responses: Option<Endpoint>,
        anthropic_messages: Option<Endpoint>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Endpoint {
        endpoint: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Mcp {
        endpoint: String,
        transport: Option<String>,
        forward_per_request_key: Option<bool>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Features {
        consent_required: Option<bool>,
    }
}

/// An endpoint a configuration application names: an absolute http(s) URL.
fn check_endpoint(field: &str, endpoint: Option<&str>) -> Result<(), String> {
    let Some(endpoint) = endpoint else { return Ok(()) };
    match url::Url::parse(endpoint) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(()),
        _ => Err(format!("{field} must be an absolute http(s) URL, not '{endpoint}'")),
    }
}

impl ConfigApps {
    /// Validates every `[applications.<name>]` table: its keys
    /// ([`config_schema`]), its endpoints (absolute http(s) URLs), then as
    /// the applications API validates a PUT; the first invalid one stops the
    /// start, named. `policy`: what configuration applications may declare
    /// (the operator writes them, so they may declare; the types are the
    /// host's).
    pub fn load(tables: &BTreeMap<String, Value>, policy: &DeclarationPolicy) -> Result<Self, String> {
        let mut apps = BTreeMap::new();
        for (name, table) in tables {
            let invalid = |why: String| format!("[applications.{name}]: {why}");
            if name.is_empty() || name.contains('/') || name.starts_with("applications") {
                return Err(invalid("the name must be one segment that does not start with `applications`".into()));
            }
            serde_json::from_value::<config_schema::Table>(table.clone())
                .map_err(|error| invalid(error.to_string()))?;
            let text = serde_json::to_string(table).expect("a configuration value serializes");
            let raw: Box<serde_json::value::RawValue> =
                serde_json::from_str(&text).expect("what serde_json wrote parses back");
            let normalized = normalize_application(&raw, policy).map_err(|error| invalid(error.to_string()))?;
            let app = Application::from_stored(&normalized).map_err(invalid)?;
            for (field, api) in [
                ("endpoint", Api::ChatCompletions),
                ("interfaces.responses.endpoint", Api::Responses),
                ("interfaces.anthropic_messages.endpoint", Api::AnthropicMessages),
                ("mcp.endpoint", Api::Mcp),
            ] {
                check_endpoint(field, app.endpoint_for(api)).map_err(invalid)?;
            }
            apps.insert(name.clone(), Arc::new(app));
        }
        Ok(Self { apps })
    }

    pub fn get(&self, name: &str) -> Option<Arc<Application>> {
        self.apps.get(name).cloned()
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.apps.keys()
    }

    /// Every configured application, by name.
    pub fn all(&self) -> impl Iterator<Item = (&String, &Arc<Application>)> {
        self.apps.iter()
    }
}

/// Stored definitions already parsed, by URL, each with the etag it was
/// parsed at: a call reads the definition only when it changed (a
/// conditional read), so many calls to an application with a large
/// definition do not each parse it. Bounded: when full, it starts over.
#[derive(Default)]
pub struct StoredDefinitions {
    parsed: Mutex<HashMap<String, (String, Arc<Application>)>>,
}

/// Definitions [`StoredDefinitions`] keeps at most.
const KEPT_DEFINITIONS: usize = 1024;

impl StoredDefinitions {
    /// The etag and definition last parsed for `url`.
    pub fn get(&self, url: &str) -> Option<(String, Arc<Application>)> {
        self.parsed.lock().unwrap_or_else(PoisonError::into_inner).get(url).cloned()
    }

    pub fn insert(&self, url: String, etag: String, application: Arc<Application>) {
        let mut parsed = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        if parsed.len() >= KEPT_DEFINITIONS && !parsed.contains_key(&url) {
            parsed.clear();
        }
        parsed.insert(url, (etag, application));
    }
}

/// An application's id as one path segment — its own bucket is
/// `Keys/<id>/`, its appdata folder `appdata/<id>/`: a configuration
/// application's name; for a stored one, the last segment of its URL and a
/// short hash of the whole URL (two users' apps of the same name stay apart).
pub fn app_id(deployment: &str) -> String {
    if !deployment.contains('/') {
        return deployment.to_string();
    }
    let name = deployment.rsplit('/').find(|s| !s.is_empty()).unwrap_or("app");
    let digest = Sha256::digest(deployment.as_bytes());
    let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{name}-{short}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_applications_are_validated_and_typed() {
        let tables = BTreeMap::from([
            ("echo".to_string(), json!({"endpoint": "http://a/chat", "user_roles": ["user"]})),
            (
                "tools".to_string(),
                json!({"mcp": {"endpoint": "http://m/mcp", "forward_per_request_key": false},
                       "interfaces": {"responses": {"endpoint": "http://r"}}}),
            ),
        ]);
        let apps = ConfigApps::load(&tables, &DeclarationPolicy::default()).unwrap();
        let echo = apps.get("echo").unwrap();
        assert_eq!(echo.endpoint_for(Api::ChatCompletions), Some("http://a/chat"));
        assert_eq!(echo.endpoint_for(Api::Mcp), None);
        assert!(echo.admits(&["user".into()]) && !echo.admits(&["other".into()]));
        let tools = apps.get("tools").unwrap();
        assert_eq!(tools.endpoint_for(Api::Responses), Some("http://r"));
        assert!(!tools.forwards_key(Api::Mcp) && tools.forwards_key(Api::Responses));
        assert!(tools.admits(&[]), "no user_roles: everyone");

        let policy = DeclarationPolicy::default();
        let nobody = ConfigApps::load(
            &BTreeMap::from([("x".into(), json!({"endpoint": "http://e", "user_roles": []}))]),
            &policy,
        );
        assert!(!nobody.unwrap().get("x").unwrap().admits(&["user".into()]));
        let error =
            ConfigApps::load(&BTreeMap::from([("bad".into(), json!({"display_name": "no endpoint"}))]), &policy);
        assert!(error.unwrap_err().starts_with("[applications.bad]: "));
    }

    #[test]
    fn config_applications_refuse_unknown_keys_and_relative_endpoints() {
        let policy = DeclarationPolicy::default();
        let load = |table: Value| ConfigApps::load(&BTreeMap::from([("app".to_string(), table)]), &policy);
        for (table, named) in [
            (json!({"endpoint": "http://a/chat", "user_role": ["admin"]}), "user_role"),
            (json!({"endpoint": "http://a/chat", "resource_dependecies": []}), "resource_dependecies"),
            (json!({"mcp": {"endpoint": "http://m", "forward_key": false}}), "forward_key"),
            (json!({"endpoint": "http://a", "interfaces": {"responses": {"endpiont": "http://r"}}}), "endpiont"),
            (json!({"endpoint": "http://a", "features": {"consentRequired": true}}), "consentRequired"),
            (json!({"endpoint": "/chat/completions"}), "endpoint must be an absolute http(s) URL"),
            (json!({"endpoint": "ftp://a/chat"}), "endpoint must be an absolute http(s) URL"),
            (json!({"mcp": {"endpoint": "localhost:9000/mcp"}}), "mcp.endpoint must be"),
        ] {
            let error = load(table.clone()).err().unwrap_or_else(|| panic!("{table} loaded"));
            assert!(error.starts_with("[applications.app]: ") && error.contains(named), "{table}: {error}");
        }
        assert!(load(json!({"endpoint": "https://a.example/chat", "display_name": "A", "description": "d"})).is_ok());
    }

    #[test]
    fn app_ids_are_one_segment() {
        assert_eq!(app_id("echo"), "echo");
        let id = app_id("applications/B1/team/bot");
        assert!(id.starts_with("bot-") && id.len() == "bot-".len() + 12, "{id}");
        assert_ne!(id, app_id("applications/B2/team/bot"));
    }
}
