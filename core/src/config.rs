//! Configuration: one TOML file plus `DIAL_HOST_*` environment overrides.
//!
//! Every setting has a default, so no file at all is the embedded default:
//! local disk under `./data`, in-process everything, generated keys. Nested
//! keys are overridden with `__`, e.g. `DIAL_HOST_SERVER__LISTEN=0.0.0.0:8080`
//! or `DIAL_HOST_HANDLERS__CPU_DEADLINE_MS=50`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

pub use crate::handlers::config::{HandlersConfig, TypeQuota, TypeSettings};

/// Prefix of the environment variables that override the file.
pub const ENV_PREFIX: &str = "DIAL_HOST_";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    /// Directory for local state: generated secrets, the compiled-handler
    /// cache and, in the embedded default, the stored resources.
    pub data_dir: PathBuf,
    pub storage: StorageConfig,
    pub encryption: EncryptionConfig,
    /// Project API keys: `[keys."<secret>"] project = "...", roles = [...]`.
    pub keys: BTreeMap<String, ProjectKey>,
    pub identity: IdentityConfig,
    pub access: AccessConfig,
    pub sharing: SharingConfig,
    pub handlers: HandlersConfig,
    pub folders: FoldersConfig,
    pub resources: ResourcesConfig,
    pub redis: RedisConfig,
    pub locks: LockConfig,
    pub log: LogConfig,
    pub telemetry: TelemetryConfig,
    /// Applications defined here: `[applications.<name>]` with the fields of
    /// the JSON definition in snake_case. The deployment id is `<name>`.
    pub applications: BTreeMap<String, serde_json::Value>,
    pub proxy: ProxyConfig,
    pub per_request_key: PerRequestKeyConfig,
    pub audit: AuditConfig,
    pub feed: FeedConfig,
    pub listings: ListingsConfig,
    pub skills_api: SkillsApiConfig,
    /// The file this configuration was loaded from (none: the embedded
    /// default and the environment); a handler reload re-reads it for the
    /// `oci://` sources.
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

/// Anthropic's and OpenAI's skills APIs (SPEC §12).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SkillsApiConfig {
    /// A name or description the hosted services would refuse ("My Skill",
    /// a reserved word, an XML tag): `warn` (the default) accepts it with a
    /// warning in the answer; `refuse` answers 400, for teams that sync
    /// skills both ways.
    pub vendor_names: VendorNames,
}

/// `skills_api.vendor_names`: what the skills APIs do with a name or
/// description the hosted services would refuse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VendorNames {
    /// Accept it, with a warning in the answer (the default).
    #[default]
    Warn,
    /// Refuse the upload with a 400 naming the rule.
    Refuse,
}

/// What listings keep between requests.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListingsConfig {
    /// Entries each listing cache keeps (v1 items' metadata, v2 markers, by
    /// location and etag); least recently used go first. 0 keeps none.
    pub cache_entries: usize,
    /// MiB each listing cache may hold (estimated from what it keeps: a v2
    /// marker weighs about twice its JSON); least recently used go first.
    pub cache_mib: usize,
}

impl Default for ListingsConfig {
    fn default() -> Self {
        Self {
            cache_entries: crate::listing_cache::DEFAULT_LISTING_CACHE_ENTRIES,
            cache_mib: crate::listing_cache::DEFAULT_LISTING_CACHE_MIB,
        }
    }
}

impl ListingsConfig {
    /// An empty cache with these bounds.
    pub fn new_cache<T: Clone>(&self) -> crate::listing_cache::EtagCache<T> {
        crate::listing_cache::EtagCache::new(self.cache_entries, self.cache_mib.saturating_mul(1 << 20))
    }
}

/// The change feed (`POST /v1/ops/resource/subscribe`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeedConfig {
    /// Seconds between SSE comment heartbeats on an idle subscription.
    pub heartbeat_seconds: u64,
    /// Subscriptions one caller (a user, a project key, an application's
    /// key) may hold open at once on one instance; more are 429.
    pub max_subscriptions_per_caller: usize,
}

impl Default for FeedConfig {
    fn default() -> Self {
        Self { heartbeat_seconds: 15, max_subscriptions_per_caller: 16 }
    }
}

/// The resource-dependency audit trail (always on the tracing target
/// `DIAL_RESOURCE_DEPS_AUDIT`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Also append each event, one JSON object per line, to this file.
    pub file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            server: ServerConfig::default(),
            data_dir: PathBuf::from("data"),
            storage: StorageConfig::default(),
            encryption: EncryptionConfig::default(),
            keys: BTreeMap::new(),
            identity: IdentityConfig::default(),
            access: AccessConfig::default(),
            sharing: SharingConfig::default(),
            handlers: HandlersConfig::default(),
            folders: FoldersConfig::default(),
            resources: ResourcesConfig::default(),
            redis: RedisConfig::default(),
            locks: LockConfig::default(),
            log: LogConfig::default(),
            telemetry: TelemetryConfig::default(),
            applications: BTreeMap::new(),
            proxy: ProxyConfig::default(),
            per_request_key: PerRequestKeyConfig::default(),
            audit: AuditConfig::default(),
            feed: FeedConfig::default(),
            listings: ListingsConfig::default(),
            skills_api: SkillsApiConfig::default(),
            file: None,
        }
    }
}

/// Calls to applications (`/openai/deployments/…` and the other mint sites).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// How long connecting to an application may take (then 502).
    pub connect_timeout_ms: u64,
    /// How long an application may stay silent — before its response
    /// starts, or between two chunks of it (then 504, or the stream ends).
    pub read_timeout_ms: u64,
    /// Largest request body forwarded (then 413). Bodies of the LLM APIs are
    /// read whole before the call, to find their attachments.
    pub max_request_bytes: u64,
    /// Idle connections kept per application host.
    pub pool_max_idle_per_host: usize,
    /// Where stored applications (`applications/{bucket}/…`) may be called
    /// although the address is loopback, private, link-local, CGNAT,
    /// unspecified or multicast: host names (`mcp.internal`), addresses
    /// (`10.0.0.7`) or CIDRs (`10.20.0.0/16`). Configuration applications
    /// may name any http(s) URL.
    pub allowed_destinations: Vec<String>,
    /// Resource links (attachments) one call may carry; more are 400.
    pub max_attachments: usize,
    /// The largest stored application definition a call reads and parses
    /// (a larger one fails the call, named); well below
    /// `resources.max_size`, which bounds what may be stored.
    pub max_definition_bytes: u64,
    /// What the parsed stored definitions may hold in memory, estimated
    /// (least recently used go first).
    pub definition_cache_mib: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            connect_timeout_ms: 10_000,
            read_timeout_ms: 300_000,
            max_request_bytes: 16 << 20,
            pool_max_idle_per_host: 32,
            allowed_destinations: Vec::new(),
            max_attachments: 1000,
            max_definition_bytes: 4 << 20,
            definition_cache_mib: 64,
        }
    }
}

/// The keys handed to applications for one call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerRequestKeyConfig {
    /// The longest a key lives, should its call never end. A key minted for
    /// an application calling on expires no later than the caller's.
    pub ttl_seconds: u64,
    /// Applications a chain of calls may pass through (the root call's
    /// application is the first); a call deeper than this is 403.
    pub max_chain_depth: usize,
    /// With Redis: how long a key outlives an instance that died without
    /// revoking it. The key is held this long at a time and renewed at a
    /// third of it while its call lives (never past `ttl_seconds`).
    pub lease_seconds: u64,
}

impl Default for PerRequestKeyConfig {
    fn default() -> Self {
        Self { ttl_seconds: 1800, max_chain_depth: 8, lease_seconds: 60 }
    }
}

/// The listener and the bounds every connection lives within.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Socket address to listen on; port 0 picks a free port (printed at start).
    pub listen: String,
    /// How long a client has to send a request's headers, counted from when
    /// the connection is ready for its next request: it also ends idle
    /// keep-alive connections.
    pub header_read_timeout_seconds: u64,
    /// How long a response write or a request-body read may make no progress
    /// before the connection is closed (a client that stopped reading or
    /// sending).
    pub idle_timeout_seconds: u64,
    /// Connections served at once; at the limit new ones wait in the listen
    /// backlog. Unset: derived from the open-files limit. Always lowered to
    /// what that limit allows.
    pub max_connections: Option<u32>,
    /// Threads of tokio's blocking pool (the local-disk store and handler
    /// compilation run there).
    pub blocking_threads: usize,
    /// How long a stop waits for requests in flight before it cuts them
    /// off (their per-request keys are revoked before the process exits).
    pub stop_timeout_seconds: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            header_read_timeout_seconds: 30,
            idle_timeout_seconds: 60,
            max_connections: None,
            // tokio's own default.
            blocking_threads: 512,
            stop_timeout_seconds: 20,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// Object store URL: `file:///abs/path`, `memory://`, `s3://bucket[/prefix]`
    /// (and `gs://`, `az://` through the same crate). Unset: `<data_dir>/store`.
    pub url: Option<String>,
    /// Backend options, as `object_store` names them (e.g. for S3:
    /// `endpoint`, `region`, `access_key_id`, `secret_access_key`,
    /// `allow_http`). Credentials may also come from the usual AWS_* variables.
    pub options: BTreeMap<String, String>,
    /// Start even on a store whose conditional writes the start-up check
    /// finds missing or ignored. Without them nothing fences a writer whose
    /// lock lapsed: concurrent commits can overwrite each other. Only for a
    /// store that exactly one instance writes.
    pub allow_unfenced: bool,
    /// How long the cloud clients keep retrying one failed store call
    /// (object_store retries with backoff; its own default is 180 s). While
    /// the store is unreachable, a request fails after about this long.
    pub retry_timeout_ms: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self { url: None, options: BTreeMap::new(), allow_unfenced: false, retry_timeout_ms: 30_000 }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EncryptionConfig {
    /// Secret the bucket-id key is derived from. Every instance sharing a
    /// store must use the same one. Unset: generated once and kept in
    /// `<data_dir>/generated.toml` (single-instance only).
    pub secret: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProjectKey {
    pub project: String,
    #[serde(default)]
    pub roles: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdentityConfig {
    /// HS256 shared secret for `Authorization: Bearer` JWTs.
    pub hs256_secret: Option<String>,
    /// RS256 / ES256 public keys (PEM) for JWTs signed by an identity provider.
    pub public_keys: Vec<PublicKeyConfig>,
    /// Dotted path of the user-id claim.
    pub user_id_claim: String,
    /// Dotted path of the roles claim (a string array, or one string).
    pub roles_claim: String,
    /// Splits a roles claim that is a single string (e.g. `","`); unset keeps it whole.
    pub roles_delimiter: Option<String>,
    /// Required `iss`, when set.
    pub issuer: Option<String>,
    /// Required `aud`, when set.
    pub audience: Option<String>,
    /// Clock skew tolerated on `exp`/`nbf`, in seconds.
    pub leeway_seconds: u64,
}

impl Default for IdentityConfig {
    fn default() -> Self {
        Self {
            hs256_secret: None,
            public_keys: Vec::new(),
            user_id_claim: "sub".into(),
            roles_claim: "roles".into(),
            roles_delimiter: None,
            issuer: None,
            audience: None,
            leeway_seconds: 30,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum PublicKeyAlgorithm {
    RS256,
    ES256,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeyConfig {
    pub algorithm: PublicKeyAlgorithm,
    /// The PEM text itself…
    pub pem: Option<String>,
    /// …or a file holding it.
    pub pem_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessConfig {
    /// A caller holding any of these roles is an admin. Empty: nobody is
    /// (admin-only operations, admin consent among them, fail closed).
    pub admin_roles: Vec<String>,
    /// Whether applications written by non-admins may declare
    /// `resource_dependencies` (an admin must still consent).
    pub allow_user_resource_dependencies: bool,
}

/// Per-type sharing limits (DIAL's share limits table). Types are DIAL
/// resource type names: `FILE`, `PROMPT`, `CONVERSATION`, `APPLICATION`, and a
/// handler's type name in upper case with `_` for `-` (`SKILL`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SharingConfig {
    /// `[sharing.limits.SKILL] invitation_ttl_hours = 72, max_accepted_users = 10`.
    pub limits: BTreeMap<String, ShareLimit>,
    /// `[sharing.roles.<role>.<TYPE>]`: limits for sharers holding `role`;
    /// several roles combine by the most generous value.
    pub roles: BTreeMap<String, BTreeMap<String, ShareLimit>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShareLimit {
    pub invitation_ttl_hours: Option<u64>,
    /// How many users may accept shares of one resource; `-1` = unlimited.
    pub max_accepted_users: Option<i64>,
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self { admin_roles: vec!["admin".into()], allow_user_resource_dependencies: false }
    }
}

/// Folder resources (v2): limits every type gets unless it sets its own, and
/// the garbage-collection sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FoldersConfig {
    pub max_file_bytes: u64,
    pub max_files: u32,
    pub max_total_bytes: u64,
    /// How long superseded versions and tombstoned resources are kept (and a
    /// tombstone can be restored). A writer that takes longer than half of
    /// this to commit gives up, so the sweep never removes a version that is
    /// about to be committed.
    pub grace_seconds: u64,
    /// How often the sweep runs; 0 disables the background sweep.
    pub gc_interval_seconds: u64,
    /// Versions of a resource kept readable and restorable, the current one
    /// included (so 1 keeps no history; 0 is read as 1).
    pub keep_versions: u32,
    /// Also keep every version younger than this many days (fractions
    /// allowed), however many there are; 0: the count alone decides.
    pub keep_versions_days: f64,
}

impl Default for FoldersConfig {
    fn default() -> Self {
        Self {
            max_file_bytes: 512 << 20,
            max_files: 1000,
            max_total_bytes: 1 << 30,
            grace_seconds: 3600,
            gc_interval_seconds: 300,
            keep_versions: 10,
            keep_versions_days: 0.0,
        }
    }
}

/// v1 single-blob resources (`/v1/files|prompts|conversations|applications/…`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourcesConfig {
    /// Largest JSON resource (prompt, conversation, application), in bytes: 413 above it.
    pub max_size: u64,
    /// Largest uploaded file, in bytes: 413 above it.
    pub max_file_size: u64,
}

impl Default for ResourcesConfig {
    fn default() -> Self {
        Self { max_size: 64 << 20, max_file_size: 512 << 20 }
    }
}

/// Redis, for locks and change events shared by several instances. Unset:
/// both stay in-process (one instance only).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    /// One Redis server: `redis://host:port/db`.
    pub url: Option<String>,
    /// A Redis Cluster instead: some of its nodes (`redis://host:port`); the
    /// rest are discovered.
    pub cluster_nodes: Vec<String>,
    /// A Sentinel-managed primary instead: the sentinels to ask
    /// (`redis://host:26379`), with [`Self::sentinel_master`].
    pub sentinels: Vec<String>,
    /// The name the sentinels know the primary by (`sentinel monitor <name> …`).
    pub sentinel_master: Option<String>,
    /// Prefix of every key and channel, so deployments can share a Redis.
    pub key_prefix: Option<String>,
    /// Longest wait for Redis to connect or answer one command. While Redis
    /// is away, a request that needs it fails after about twice this (one
    /// reconnect attempt) with a 503 naming Redis, instead of queueing.
    pub timeout_ms: u64,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: None,
            cluster_nodes: Vec::new(),
            sentinels: Vec::new(),
            sentinel_master: None,
            key_prefix: None,
            timeout_ms: 1000,
        }
    }
}

/// Locks serialising structural changes (per bucket) and content updates
/// (per resource).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LockConfig {
    /// Lease of a Redis lock; renewed at a third of it while held.
    pub ttl_ms: u64,
    /// How long a request waits for a lock before giving up (503).
    pub acquire_timeout_ms: u64,
}

impl Default for LockConfig {
    fn default() -> Self {
        Self { ttl_ms: 30_000, acquire_timeout_ms: 30_000 }
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    pub format: LogFormat,
    /// `tracing` filter directives; `RUST_LOG` wins when set.
    pub filter: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { format: LogFormat::Text, filter: "info".into() }
    }
}

/// OpenTelemetry traces (SPEC §15): off unless `otlp_endpoint` is set.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`, as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` would be); spans go to `<it>/v1/traces`.
    pub otlp_endpoint: Option<String>,
    /// `service.name` on every span.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self { otlp_endpoint: None, service_name: "dial-host".into() }
    }
}

/// A configuration that does not load: names the file, key and problem.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ConfigError(Box<figment::Error>);

impl From<figment::Error> for ConfigError {
    fn from(error: figment::Error) -> Self {
        Self(Box::new(error))
    }
}

impl Config {
    /// Defaults, then the file (if any), then the environment. The
    /// environment overrides applications the file defines; one naming
    /// another (`DIAL_HOST_APPLICATIONS__CHAT_APP__…` beside a file's
    /// `chat-app`) is an error naming the closest defined one, instead of a
    /// new application made of one field.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            if !file.exists() {
                return Err(figment::Error::from(format!("config file {} does not exist", file.display())).into());
            }
            figment = figment.merge(Toml::file(file));
        }
        let defined: BTreeMap<String, serde_json::Value> =
            figment.extract_inner("applications").map_err(ConfigError::from)?;
        let mut config: Self = figment.merge(Env::prefixed(ENV_PREFIX).split("__")).extract()?;
        config.file = file.map(Path::to_path_buf);
        if let Some(name) = config.applications.keys().find(|name| !defined.contains_key(*name)) {
            let closest = defined
                .keys()
                .map(|known| (strsim::jaro_winkler(&known.replace('-', "_"), name), known))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, known)| format!(" (the closest it defines is `{known}`)"))
                .unwrap_or_default();
            return Err(figment::Error::from(format!(
                "the environment overrides application `{name}`, which the config file does not define{closest}; \
                 applications are defined in the file, the environment only overrides their fields"
            ))
            .into());
        }
        Ok(config)
    }

    pub fn handler_cache_dir(&self) -> PathBuf {
        self.handlers.cache_dir.clone().unwrap_or_else(|| self.data_dir.join("handler-cache"))
    }

    /// The store URL, with the embedded default resolved to an absolute path.
    pub fn storage_url(&self) -> String {
        match &self.storage.url {
            Some(url) => url.clone(),
            None => {
                let dir = self.data_dir.join("store");
                let absolute = std::path::absolute(&dir).unwrap_or(dir);
                format!("file://{}", absolute.display())
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's closures return figment::Error
mod tests {
    use super::*;

    #[test]
    fn defaults_need_no_file() {
        figment::Jail::expect_with(|_| {
            let config = Config::load(None).unwrap();
            assert_eq!(config.server.listen, "127.0.0.1:8080");
            assert_eq!((config.server.header_read_timeout_seconds, config.server.idle_timeout_seconds), (30, 60));
            assert_eq!((config.server.max_connections, config.server.blocking_threads), (None, 512));
            assert_eq!(config.access.admin_roles, vec!["admin".to_string()]);
            assert_eq!(config.handlers.cpu_deadline_ms, 200);
            Ok(())
        });
    }

    #[test]
    fn file_then_environment() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "dial.toml",
                r#"
                    data_dir = "/tmp/dial"
                    [server]
                    listen = "0.0.0.0:9000"
                    [keys.secret1]
                    project = "alpha"
                    roles = ["user"]
                    [handlers.types.skills]
                    strict = true
                "#,
            )?;
            jail.set_env("DIAL_HOST_SERVER__LISTEN", "127.0.0.1:7000");
            jail.set_env("DIAL_HOST_HANDLERS__CPU_DEADLINE_MS", "50");
            let config = Config::load(Some(Path::new("dial.toml"))).unwrap();
            assert_eq!(config.server.listen, "127.0.0.1:7000");
            assert_eq!(config.handlers.cpu_deadline_ms, 50);
            assert_eq!(config.data_dir, PathBuf::from("/tmp/dial"));
            assert_eq!(config.keys["secret1"].project, "alpha");
            assert!(config.handlers.types["skills"].strict);
            Ok(())
        });
    }

    #[test]
    fn unknown_keys_are_rejected() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("dial.toml", "[server]\nlisten = \"x\"\nlisen = \"typo\"\n")?;
            let error = Config::load(Some(Path::new("dial.toml"))).unwrap_err();
            assert!(error.to_string().contains("lisen"), "{error}");
            Ok(())
        });
    }

    #[test]
    fn the_environment_overrides_only_applications_the_file_defines() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("dial.toml", "[applications.chat-app]\nendpoint = \"http://a/chat\"\n")?;
            jail.set_env("DIAL_HOST_APPLICATIONS__CHAT_APP__ENDPOINT", "http://b/chat");
            let error = Config::load(Some(Path::new("dial.toml"))).unwrap_err().to_string();
            assert!(error.contains("`chat_app`") && error.contains("`chat-app`"), "{error}");
            Ok(())
        });
        figment::Jail::expect_with(|jail| {
            jail.create_file("dial.toml", "[applications.chat]\nendpoint = \"http://a/chat\"\n")?;
            jail.set_env("DIAL_HOST_APPLICATIONS__CHAT__ENDPOINT", "http://b/chat");
            let config = Config::load(Some(Path::new("dial.toml"))).unwrap();
            assert_eq!(config.applications["chat"]["endpoint"], "http://b/chat");
            Ok(())
        });
    }

    #[test]
    fn missing_file_is_an_error() {
        let error = Config::load(Some(Path::new("/nonexistent/dial.toml"))).unwrap_err();
        assert!(error.to_string().contains("does not exist"));
    }
}
