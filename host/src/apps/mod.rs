//! Applications the host calls: from the configuration (`[applications.<name>]`)
//! and from `/v1/applications/{bucket}/{path}` resources (SPEC §8).
//!
//! A deployment id names one: the configuration name, or
//! `applications/{bucket}/{path}` for a stored definition (which the caller
//! must be able to read). Definitions are normalised and validated by the one
//! function the applications API uses ([`crate::blobs::application`]), then
//! read into the typed [`Application`] the proxy needs.

use std::collections::BTreeMap;
use std::sync::Arc;

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
}

/// The parts of an application definition the host acts on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Application {
    pub endpoint: Option<String>,
    pub display_name: Option<String>,
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

impl ConfigApps {
    /// Validates every `[applications.<name>]` table as the applications API
    /// validates a PUT; the first invalid one stops the start, named.
    /// `policy`: what configuration applications may declare (the operator
    /// writes them, so they may declare; the types are the host's).
    pub fn load(tables: &BTreeMap<String, Value>, policy: &DeclarationPolicy) -> Result<Self, String> {
        let mut apps = BTreeMap::new();
        for (name, table) in tables {
            let invalid = |why: String| format!("[applications.{name}]: {why}");
            if name.is_empty() || name.contains('/') || name.starts_with("applications") {
                return Err(invalid("the name must be one segment that does not start with `applications`".into()));
            }
            let text = serde_json::to_string(table).expect("a configuration value serializes");
            let raw: Box<serde_json::value::RawValue> =
                serde_json::from_str(&text).expect("what serde_json wrote parses back");
            let normalized = normalize_application(&raw, policy).map_err(|error| invalid(error.to_string()))?;
            let app = Application::from_stored(&normalized).map_err(invalid)?;
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
        let nobody =
            ConfigApps::load(&BTreeMap::from([("x".into(), json!({"endpoint": "e", "user_roles": []}))]), &policy);
        assert!(!nobody.unwrap().get("x").unwrap().admits(&["user".into()]));
        let error =
            ConfigApps::load(&BTreeMap::from([("bad".into(), json!({"display_name": "no endpoint"}))]), &policy);
        assert!(error.unwrap_err().starts_with("[applications.bad]: "));
    }

    #[test]
    fn app_ids_are_one_segment() {
        assert_eq!(app_id("echo"), "echo");
        let id = app_id("applications/B1/team/bot");
        assert!(id.starts_with("bot-") && id.len() == "bot-".len() + 12, "{id}");
        assert_ne!(id, app_id("applications/B2/team/bot"));
    }
}
