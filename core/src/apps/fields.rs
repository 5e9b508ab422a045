//! The fields a definition may hold, at each level: what `Application`
//! reads. The applications API refuses any other by name
//! (`blobs::application`); configuration tables through
//! the configuration schema (`apps::config`), which also refuses camelCase spellings there.

pub const APPLICATION: &[&str] = &[
    "name",
    "endpoint",
    "base_url",
    "display_name",
    "display_version",
    "description",
    "icon_url",
    "reference",
    "author",
    "description_keywords",
    "input_attachment_types",
    "max_input_attachments",
    "created_at",
    "updated_at",
    "user_roles",
    "forward_auth_token",
    "defaults",
    "responses_defaults",
    "application_type_schema_id",
    "application_properties",
    "interfaces",
    "mcp",
    "features",
    "resource_dependencies",
];
pub const INTERFACES: &[&str] = &[
    "chat_completions",
    "openai_chat_completions",
    "embeddings",
    "openai_embeddings",
    "responses",
    "openai_responses",
    "anthropic_messages",
];
pub const INTERFACE: &[&str] = &["endpoint", "base_url"];
pub const MCP: &[&str] = &["endpoint", "transport", "forward_per_request_key"];
pub const FEATURE_ENDPOINTS: &[&str] =
    &["rate_endpoint", "tokenize_endpoint", "truncate_prompt_endpoint", "configuration_endpoint"];
pub const FEATURE_FLAGS: &[&str] = &[
    "consent_required",
    "accessible_by_per_request_key",
    "system_prompt_supported",
    "tools_supported",
    "seed_supported",
    "url_attachments_supported",
    "folder_attachments_supported",
    "allow_resume",
    "content_parts_supported",
    "temperature_supported",
    "cache_supported",
    "auto_caching_supported",
    "parallel_tool_calls_supported",
    "assistant_attachments_in_request_supported",
    "max_tokens_supported",
    "max_completion_tokens_supported",
    "custom_temperature_supported",
    "skills_supported",
];
pub const FEATURE_LISTS: &[&str] = &["reasoning_efforts"];
