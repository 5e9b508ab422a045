//! Applications the host calls: from the configuration (`[applications.<name>]`)
//! and from `/v1/applications/{bucket}/{path}` resources (SPEC §8).
//!
//! A deployment id names one: the configuration name, or
//! `applications/{bucket}/{path}` for a stored definition (which the caller
//! must be able to read). Definitions are normalised and validated by the one
//! function the applications API uses ([`crate::blobs::application`]), then
//! read into the typed [`Application`] the proxy needs. Every field a
//! definition may hold is either acted on here or shown by the listings;
//! anything else is refused when the definition is written, by name (a
//! field accepted and ignored fails silently).

pub mod definitions;
pub mod fields;
pub mod ids;

pub use definitions::StoredDefinitions;
pub use ids::{app_id, legacy_app_id, project_bucket_clash};

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::blobs::application::normalize_application;
use crate::dependencies::{DeclarationPolicy, Declared};

/// The APIs an application can be called through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /openai/deployments/{id}/chat/completions` → `endpoint` or `interfaces.chat_completions`.
    ChatCompletions,
    /// `POST /openai/deployments/{id}/completions` → the same as chat completions (DIAL's legacy family).
    Completions,
    /// `POST /openai/deployments/{id}/embeddings` → `interfaces.embeddings`, else `endpoint`.
    Embeddings,
    /// `POST /openai/deployments/{id}/responses` → `interfaces.responses`.
    Responses,
    /// `POST /anthropic/deployments/{id}/v1/messages` → `interfaces.anthropic_messages`.
    AnthropicMessages,
    /// `POST|GET|DELETE /v1/deployments/{id}/mcp` → `mcp.endpoint`.
    Mcp,
    /// `POST /v1/{id}/rate` → `features.rate_endpoint`.
    Rate,
    /// `POST /v1/deployments/{id}/tokenize` → `features.tokenize_endpoint`.
    Tokenize,
    /// `POST /v1/deployments/{id}/truncate_prompt` → `features.truncate_prompt_endpoint`.
    TruncatePrompt,
    /// `GET /v1/deployments/{id}/configuration` → `features.configuration_endpoint`.
    Configuration,
}

impl Api {
    /// Every API, in the order the banner names them.
    pub const ALL: [Api; 10] = [
        Self::ChatCompletions,
        Self::Completions,
        Self::Embeddings,
        Self::Responses,
        Self::AnthropicMessages,
        Self::Mcp,
        Self::Rate,
        Self::Tokenize,
        Self::TruncatePrompt,
        Self::Configuration,
    ];

    /// How messages name the API.
    pub fn name(self) -> &'static str {
        match self {
            Self::ChatCompletions => "chat completions",
            Self::Completions => "completions",
            Self::Embeddings => "embeddings",
            Self::Responses => "responses",
            Self::AnthropicMessages => "Anthropic messages",
            Self::Mcp => "MCP",
            Self::Rate => "rate",
            Self::Tokenize => "tokenize",
            Self::TruncatePrompt => "truncate_prompt",
            Self::Configuration => "configuration",
        }
    }

    /// The API as a metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::ChatCompletions => "chat_completions",
            Self::Completions => "completions",
            Self::Embeddings => "embeddings",
            Self::Responses => "responses",
            Self::AnthropicMessages => "anthropic_messages",
            Self::Mcp => "mcp",
            Self::Rate => "rate",
            Self::Tokenize => "tokenize",
            Self::TruncatePrompt => "truncate_prompt",
            Self::Configuration => "configuration",
        }
    }

    /// What follows the deployment id in the path the API is called at.
    pub fn path_suffix(self) -> &'static str {
        match self {
            Self::ChatCompletions => "/chat/completions",
            Self::Completions => "/completions",
            Self::Embeddings => "/embeddings",
            Self::Responses => "/responses",
            Self::AnthropicMessages => "/v1/messages",
            Self::Mcp => "/mcp",
            Self::Rate => "/rate",
            Self::Tokenize => "/tokenize",
            Self::TruncatePrompt => "/truncate_prompt",
            Self::Configuration => "/configuration",
        }
    }

    /// An LLM API: its body is a JSON request whose attachments the key is
    /// granted, and resource dependencies are resolved for it. The feature
    /// endpoints (rate, tokenize, truncate_prompt, configuration) get a key
    /// of the application's own reach only, as in DIAL Core, and MCP carries
    /// no attachments.
    pub fn is_llm(self) -> bool {
        matches!(
            self,
            Self::ChatCompletions | Self::Completions | Self::Embeddings | Self::Responses | Self::AnthropicMessages
        )
    }

    /// A feature endpoint of `features` (`rate_endpoint`, …).
    pub fn is_feature(self) -> bool {
        matches!(self, Self::Rate | Self::Tokenize | Self::TruncatePrompt | Self::Configuration)
    }
}

/// Where one API of an application is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream<'a> {
    /// A complete URL (`endpoint`, `interfaces.<api>.endpoint`, a feature
    /// endpoint): the request goes there, with the caller's query string.
    Url(&'a str),
    /// DIAL Core's `base_url` (an interface's, or the definition's): the
    /// request goes to it followed by the path the caller used
    /// (`/openai/deployments/<id>/chat/completions`) and its query string.
    Base(&'a str),
}

impl Upstream<'_> {
    /// The URL the call goes to, for a request at `path` (still
    /// percent-encoded) with `query`.
    pub fn url(&self, path: &str, query: Option<&str>) -> Result<url::Url, url::ParseError> {
        let mut url = match self {
            Self::Url(endpoint) => url::Url::parse(endpoint)?,
            Self::Base(base) => url::Url::parse(&format!("{}{path}", base.trim_end_matches('/')))?,
        };
        if let Some(query) = query {
            url.set_query(Some(query));
        }
        Ok(url)
    }
}

/// The parts of an application definition the host acts on or lists.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Application {
    pub endpoint: Option<String>,
    /// DIAL Core's deployment-level base URL: serves an interface declared
    /// without a URL of its own.
    pub base_url: Option<String>,
    pub display_name: Option<String>,
    pub display_version: Option<String>,
    pub description: Option<String>,
    pub icon_url: Option<String>,
    pub reference: Option<String>,
    pub author: Option<String>,
    pub description_keywords: Option<Vec<String>>,
    pub input_attachment_types: Option<Vec<String>>,
    pub max_input_attachments: Option<u64>,
    /// Epoch milliseconds, as DIAL stores them.
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    /// `None`: everyone may call it; empty: nobody (config applications).
    pub user_roles: Option<Vec<String>>,
    /// The caller's `Authorization` (a user's token) goes to the application
    /// (configuration applications only: a stored one may not ask for it).
    pub forward_auth_token: bool,
    /// Merged into a chat completions, completions or embeddings request
    /// where the client left a field unset ([`crate::proxy::defaults`]).
    pub defaults: Option<Box<RawValue>>,
    /// The same for a Responses request.
    pub responses_defaults: Option<Box<RawValue>>,
    /// Sent as `X-DIAL-APPLICATION-ID` / `X-DIAL-APPLICATION-PROPERTIES`
    /// and listed by `GET /openai/applications/{id}`.
    pub application_type_schema_id: Option<String>,
    pub application_properties: Option<Box<RawValue>>,
    pub interfaces: Interfaces,
    pub mcp: Option<McpSettings>,
    pub features: Features,
    /// The user resources it declares it needs (validated when written).
    pub resource_dependencies: Vec<Declared>,
}

/// `interfaces`: DIAL's keys and DIAL Core's newer spellings of them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Interfaces {
    #[serde(alias = "openai_chat_completions")]
    pub chat_completions: Option<Interface>,
    #[serde(alias = "openai_embeddings")]
    pub embeddings: Option<Interface>,
    #[serde(alias = "openai_responses")]
    pub responses: Option<Interface>,
    pub anthropic_messages: Option<Interface>,
}

/// One interface: a complete `endpoint`, or DIAL Core's `base_url` the
/// request path is appended to (the definition's `base_url` when neither).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Interface {
    pub endpoint: Option<String>,
    pub base_url: Option<String>,
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

/// `features`: the endpoints the host routes to, what it enforces
/// (`consent_required`, `accessible_by_per_request_key`), and the flags it
/// reports to clients (listings) and to the application
/// (`X-DIAL-DEPLOYMENT-FEATURES`), as DIAL Core's `FeaturesData`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Features {
    pub rate_endpoint: Option<String>,
    pub tokenize_endpoint: Option<String>,
    pub truncate_prompt_endpoint: Option<String>,
    pub configuration_endpoint: Option<String>,
    pub consent_required: Option<bool>,
    pub accessible_by_per_request_key: Option<bool>,
    pub system_prompt_supported: Option<bool>,
    pub tools_supported: Option<bool>,
    pub seed_supported: Option<bool>,
    pub url_attachments_supported: Option<bool>,
    pub folder_attachments_supported: Option<bool>,
    pub allow_resume: Option<bool>,
    pub content_parts_supported: Option<bool>,
    pub temperature_supported: Option<bool>,
    pub cache_supported: Option<bool>,
    pub auto_caching_supported: Option<bool>,
    pub parallel_tool_calls_supported: Option<bool>,
    pub assistant_attachments_in_request_supported: Option<bool>,
    pub max_tokens_supported: Option<bool>,
    pub max_completion_tokens_supported: Option<bool>,
    pub custom_temperature_supported: Option<bool>,
    /// Whether a user may pick skills per message for it (DIAL Chat shows
    /// its skills menu only then); the host takes them either way.
    pub skills_supported: Option<bool>,
    pub reasoning_efforts: Option<Vec<String>>,
}

impl Application {
    /// Reads a definition as stored (already normalised and validated).
    pub fn from_stored(json: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(json).map_err(|error| format!("the stored definition cannot be read: {error}"))
    }

    /// Where `api` is served, if the application offers it. An interface
    /// the definition declares wins; `endpoint` serves DIAL's chat
    /// completions family (completions and embeddings too) where none is.
    pub fn endpoint_for(&self, api: Api) -> Option<Upstream<'_>> {
        fn url(endpoint: Option<&String>) -> Option<Upstream<'_>> {
            endpoint.filter(|e| !e.is_empty()).map(|e| Upstream::Url(e.as_str()))
        }
        let features = &self.features;
        match api {
            Api::ChatCompletions | Api::Completions => {
                self.interface(self.interfaces.chat_completions.as_ref()).or_else(|| url(self.endpoint.as_ref()))
            }
            Api::Embeddings => {
                self.interface(self.interfaces.embeddings.as_ref()).or_else(|| url(self.endpoint.as_ref()))
            }
            Api::Responses => self.interface(self.interfaces.responses.as_ref()),
            Api::AnthropicMessages => self.interface(self.interfaces.anthropic_messages.as_ref()),
            Api::Mcp => url(self.mcp.as_ref().and_then(|mcp| mcp.endpoint.as_ref())),
            Api::Rate => url(features.rate_endpoint.as_ref()),
            Api::Tokenize => url(features.tokenize_endpoint.as_ref()),
            Api::TruncatePrompt => url(features.truncate_prompt_endpoint.as_ref()),
            Api::Configuration => url(features.configuration_endpoint.as_ref()),
        }
    }

    /// A declared interface's upstream: its `endpoint`, its `base_url`, or
    /// the definition's `base_url`.
    fn interface<'a>(&'a self, interface: Option<&'a Interface>) -> Option<Upstream<'a>> {
        let interface = interface?;
        let present = |value: &'a Option<String>| value.as_deref().filter(|v| !v.is_empty());
        present(&interface.endpoint)
            .map(Upstream::Url)
            .or_else(|| present(&interface.base_url).or_else(|| present(&self.base_url)).map(Upstream::Base))
    }

    /// Every URL the definition names, with the field that names it (a
    /// configuration application's must be absolute http(s) URLs).
    pub fn urls(&self) -> Vec<(String, &str)> {
        let mut urls = Vec::new();
        fn add<'a>(urls: &mut Vec<(String, &'a str)>, field: String, value: &'a Option<String>) {
            if let Some(value) = value {
                urls.push((field, value.as_str()));
            }
        }
        add(&mut urls, "endpoint".into(), &self.endpoint);
        add(&mut urls, "base_url".into(), &self.base_url);
        let interfaces = &self.interfaces;
        for (name, interface) in [
            ("chat_completions", &interfaces.chat_completions),
            ("embeddings", &interfaces.embeddings),
            ("responses", &interfaces.responses),
            ("anthropic_messages", &interfaces.anthropic_messages),
        ] {
            if let Some(interface) = interface {
                add(&mut urls, format!("interfaces.{name}.endpoint"), &interface.endpoint);
                add(&mut urls, format!("interfaces.{name}.base_url"), &interface.base_url);
            }
        }
        if let Some(mcp) = &self.mcp {
            add(&mut urls, "mcp.endpoint".into(), &mcp.endpoint);
        }
        let features = &self.features;
        for (name, value) in [
            ("rate_endpoint", &features.rate_endpoint),
            ("tokenize_endpoint", &features.tokenize_endpoint),
            ("truncate_prompt_endpoint", &features.truncate_prompt_endpoint),
            ("configuration_endpoint", &features.configuration_endpoint),
        ] {
            add(&mut urls, format!("features.{name}"), value);
        }
        urls
    }

    /// Whether the MCP server is handed the per-request key.
    pub fn forwards_key(&self, api: Api) -> bool {
        api != Api::Mcp || self.mcp.as_ref().is_none_or(|mcp| mcp.forward_per_request_key)
    }

    /// Whether an application calling with its per-request key may call it
    /// (`features.accessible_by_per_request_key`, true unless set false).
    pub fn accessible_by_per_request_key(&self) -> bool {
        self.features.accessible_by_per_request_key != Some(false)
    }

    /// The defaults merged into a request to `api`, if any.
    pub fn defaults_for(&self, api: Api) -> Option<&RawValue> {
        match api {
            Api::ChatCompletions | Api::Completions | Api::Embeddings => self.defaults.as_deref(),
            Api::Responses => self.responses_defaults.as_deref(),
            _ => None,
        }
    }

    /// Whether the application is told its id (and properties): it has a
    /// schema or properties to look up (DIAL Core sends the id only with a
    /// schema; the host also sends it for properties alone, which aidial-sdk
    /// needs to look them up).
    pub fn announces_itself(&self) -> bool {
        self.application_type_schema_id.is_some() || self.application_properties.is_some()
    }

    /// DIAL's `features` object, as listings show it and
    /// `X-DIAL-DEPLOYMENT-FEATURES` carries it.
    pub fn features_data(&self) -> FeaturesData {
        let f = &self.features;
        let flag = |value: Option<bool>, default: bool| value.unwrap_or(default);
        FeaturesData {
            rate: f.rate_endpoint.is_some(),
            tokenize: f.tokenize_endpoint.is_some(),
            truncate_prompt: f.truncate_prompt_endpoint.is_some(),
            configuration: f.configuration_endpoint.is_some(),
            system_prompt: flag(f.system_prompt_supported, true),
            tools: flag(f.tools_supported, false),
            seed: flag(f.seed_supported, false),
            url_attachments: flag(f.url_attachments_supported, false),
            folder_attachments: flag(f.folder_attachments_supported, false),
            allow_resume: flag(f.allow_resume, true),
            accessible_by_per_request_key: flag(f.accessible_by_per_request_key, true),
            content_parts: flag(f.content_parts_supported, false),
            temperature: flag(f.temperature_supported, true),
            cache: flag(f.cache_supported, false),
            auto_caching: flag(f.auto_caching_supported, false),
            parallel_tool_calls: flag(f.parallel_tool_calls_supported, true),
            assistant_attachments_in_request: flag(f.assistant_attachments_in_request_supported, false),
            mcp: self.endpoint_for(Api::Mcp).is_some(),
            chat_completion: self.endpoint_for(Api::ChatCompletions).is_some(),
            responses_api: self.endpoint_for(Api::Responses).is_some(),
            max_tokens_supported: flag(f.max_tokens_supported, true),
            max_completion_tokens_supported: flag(f.max_completion_tokens_supported, false),
            custom_temperature_supported: flag(f.custom_temperature_supported, true),
            reasoning_efforts: f.reasoning_efforts.clone().unwrap_or_default(),
            consent_required: flag(f.consent_required, false),
            skills_supported: flag(f.skills_supported, false),
        }
    }

    /// One line for the start banner and `check-config`: the APIs it is
    /// called through, who may call it, what it declares.
    pub fn summary(&self) -> String {
        let apis: Vec<&str> = Api::ALL
            .into_iter()
            .filter(|api| *api != Api::Completions && self.endpoint_for(*api).is_some())
            .filter(|api| *api != Api::Embeddings || self.interfaces.embeddings.is_some())
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
        if self.forward_auth_token {
            line.push_str("; gets the user's token");
        }
        line
    }

    /// Whether a caller holding `roles` may call it (`user_roles`: `None` →
    /// everyone, an empty list → nobody).
    pub fn admits(&self, roles: &[String]) -> bool {
        self.user_roles.as_ref().is_none_or(|allowed| roles.iter().any(|role| allowed.contains(role)))
    }
}

/// DIAL Core's `FeaturesData`: what a deployment supports, with DIAL's
/// defaults for what the definition leaves unset.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct FeaturesData {
    pub rate: bool,
    pub tokenize: bool,
    pub truncate_prompt: bool,
    pub configuration: bool,
    pub system_prompt: bool,
    pub tools: bool,
    pub seed: bool,
    pub url_attachments: bool,
    pub folder_attachments: bool,
    pub allow_resume: bool,
    pub accessible_by_per_request_key: bool,
    pub content_parts: bool,
    pub temperature: bool,
    pub cache: bool,
    pub auto_caching: bool,
    pub parallel_tool_calls: bool,
    pub assistant_attachments_in_request: bool,
    pub mcp: bool,
    pub chat_completion: bool,
    pub responses_api: bool,
    pub max_tokens_supported: bool,
    pub max_completion_tokens_supported: bool,
    pub custom_temperature_supported: bool,
    pub reasoning_efforts: Vec<String>,
    /// The host's: calls need the user's consent first.
    pub consent_required: bool,
    /// Skills may be picked per message (`custom_content.skills`).
    pub skills_supported: bool,
}

/// The applications the configuration defines, checked at load.
#[derive(Debug, Clone, Default)]
pub struct ConfigApps {
    apps: BTreeMap<String, Arc<Application>>,
}

/// The keys an `[applications.<name>]` table may hold, at every level: the
/// definition's fields ([`fields`]) in snake_case, typed. Anything else is an
/// error naming it, because a key accepted and ignored fails silently — a
/// misspelt `user_roles` would open an admin-only application to everyone.
mod config_schema {
    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read for its shape only
    pub struct Table {
        name: Option<String>,
        endpoint: Option<String>,
        base_url: Option<String>,
        display_name: Option<String>,
        display_version: Option<String>,
        description: Option<String>,
        icon_url: Option<String>,
        reference: Option<String>,
        author: Option<String>,
        description_keywords: Option<Vec<String>>,
        input_attachment_types: Option<Vec<String>>,
        max_input_attachments: Option<u64>,
        created_at: Option<i64>,
        updated_at: Option<i64>,
        user_roles: Option<Vec<String>>,
        forward_auth_token: Option<bool>,
        defaults: Option<serde_json::Map<String, Value>>,
        responses_defaults: Option<serde_json::Map<String, Value>>,
        application_type_schema_id: Option<String>,
        application_properties: Option<serde_json::Map<String, Value>>,
        interfaces: Option<Interfaces>,
        mcp: Option<Mcp>,
        features: Option<Features>,
        resource_dependencies: Option<Value>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Interfaces {
        chat_completions: Option<Interface>,
        openai_chat_completions: Option<Interface>,
        embeddings: Option<Interface>,
        openai_embeddings: Option<Interface>,
        responses: Option<Interface>,
        openai_responses: Option<Interface>,
        anthropic_messages: Option<Interface>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Interface {
        endpoint: Option<String>,
        base_url: Option<String>,
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
        rate_endpoint: Option<String>,
        tokenize_endpoint: Option<String>,
        truncate_prompt_endpoint: Option<String>,
        configuration_endpoint: Option<String>,
        consent_required: Option<bool>,
        accessible_by_per_request_key: Option<bool>,
        system_prompt_supported: Option<bool>,
        tools_supported: Option<bool>,
        seed_supported: Option<bool>,
        url_attachments_supported: Option<bool>,
        folder_attachments_supported: Option<bool>,
        allow_resume: Option<bool>,
        content_parts_supported: Option<bool>,
        temperature_supported: Option<bool>,
        cache_supported: Option<bool>,
        auto_caching_supported: Option<bool>,
        parallel_tool_calls_supported: Option<bool>,
        assistant_attachments_in_request_supported: Option<bool>,
        max_tokens_supported: Option<bool>,
        max_completion_tokens_supported: Option<bool>,
        custom_temperature_supported: Option<bool>,
        /// DIAL Core reads `skillsSupported` in its configuration too.
        #[serde(alias = "skillsSupported")]
        skills_supported: Option<bool>,
        reasoning_efforts: Option<Vec<String>>,
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
            for (field, url) in app.urls() {
                check_endpoint(&field, Some(url)).map_err(invalid)?;
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
        assert_eq!(echo.endpoint_for(Api::ChatCompletions), Some(Upstream::Url("http://a/chat")));
        assert_eq!(echo.endpoint_for(Api::Mcp), None);
        assert!(echo.admits(&["user".into()]) && !echo.admits(&["other".into()]));
        let tools = apps.get("tools").unwrap();
        assert_eq!(tools.endpoint_for(Api::Responses), Some(Upstream::Url("http://r")));
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

    /// DIAL Core's `interfaces`: a `base_url` takes the path the caller used;
    /// `endpoint` serves the chat completions family where no interface is
    /// declared; the feature endpoints are routed; the keys of a table that
    /// the host would ignore are refused by name.
    #[test]
    fn interfaces_features_and_fields() {
        let policy = DeclarationPolicy::default();
        let load = |table: Value| ConfigApps::load(&BTreeMap::from([("app".to_string(), table)]), &policy);
        let apps = load(json!({
            "endpoint": "http://legacy/chat",
            "interfaces": {"chat_completions": {"base_url": "http://sdk:5000/"}, "openai_responses": {"endpoint": "http://r"}},
            "features": {"rate_endpoint": "http://sdk:5000/rate", "configuration_endpoint": "http://sdk:5000/conf",
                         "tools_supported": true, "accessible_by_per_request_key": false},
            "application_properties": {"k": "v"},
        }))
        .unwrap();
        let app = apps.get("app").unwrap();
        let chat = app.endpoint_for(Api::ChatCompletions).unwrap();
        assert_eq!(chat, Upstream::Base("http://sdk:5000/"));
        let url = chat.url("/openai/deployments/app/chat/completions", Some("api-version=1")).unwrap();
        assert_eq!(url.as_str(), "http://sdk:5000/openai/deployments/app/chat/completions?api-version=1");
        assert_eq!(app.endpoint_for(Api::Completions), Some(Upstream::Base("http://sdk:5000/")));
        assert_eq!(app.endpoint_for(Api::Embeddings), Some(Upstream::Url("http://legacy/chat")), "endpoint's family");
        assert_eq!(app.endpoint_for(Api::Responses), Some(Upstream::Url("http://r")), "DIAL Core's key");
        assert_eq!(app.endpoint_for(Api::Rate), Some(Upstream::Url("http://sdk:5000/rate")));
        assert_eq!(app.endpoint_for(Api::Tokenize), None);
        assert!(!app.accessible_by_per_request_key() && app.announces_itself());
        let features = app.features_data();
        assert!(features.rate && features.configuration && !features.tokenize && features.tools);
        assert!(features.chat_completion && features.responses_api && !features.mcp);
        assert!(!features.accessible_by_per_request_key);

        for (table, named) in [
            (json!({"endpoint": "http://a", "function": {}}), "unknown field `function`"),
            (
                json!({"interfaces": {"chat_completions": {"base_url": "sdk:5000"}}}),
                "interfaces.chat_completions.base_url must be",
            ),
            (json!({"endpoint": "http://a", "features": {"rate_endpoint": "/rate"}}), "features.rate_endpoint must be"),
            (json!({"endpoint": "http://a", "defaults": 1}), "expected a map"),
        ] {
            let error = load(table.clone()).err().unwrap_or_else(|| panic!("{table} loaded"));
            assert!(error.contains(named), "{table}: {error}");
        }
        let forwarding = ConfigApps::load(
            &BTreeMap::from([("f".to_string(), json!({"endpoint": "http://a", "forward_auth_token": true}))]),
            &DeclarationPolicy { may_forward_auth_token: true, ..DeclarationPolicy::default() },
        );
        assert!(forwarding.unwrap().get("f").unwrap().forward_auth_token);
    }
}
