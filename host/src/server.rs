//! Start-up: config → services → listener.
//!
//! Settings the embedded default cannot ask for are generated once and kept
//! in `<data_dir>/generated.toml`: the bucket-id secret and, when no keys or
//! identity provider are configured, an admin and a user API key, so a
//! newcomer can call the API straight away.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::access::AccessService;
use crate::access::public_rules::PublicRules;
use crate::apps::{ConfigApps, StoredDefinitions};
use crate::audit::Audit;
use crate::auth::Authenticator;
use crate::blobs::{BlobLimits, BlobService};
use crate::buckets::BucketCodec;
use crate::config::{Config, ProjectKey};
use crate::consent::ConsentStore;
use crate::dependencies::{DeclarationPolicy, V1_GROUPS};
use crate::documents::Documents;
use crate::folders::FolderEngine;
use crate::folders::spawn_sweeper;
use crate::handlers::config::HandlersConfig;
use crate::handlers::registry::SourceReader;
use crate::handlers::{CacheConfig, HandlerRegistry, Runtime, RuntimeLimits};
use crate::http::{self, AppState, Services};
use crate::listener::{self, ConnectionLimits};
use crate::proxy::Proxy;
use crate::sharing::SharingService;
use crate::storage::{self, PathLimits};
use crate::{events, keys, locks};

const GENERATED_FILE: &str = "generated.toml";

/// Values generated on first start, reused on every later one.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Generated {
    encryption_secret: String,
    admin_key: String,
    user_key: String,
}

impl Generated {
    /// The file holds the admin key and the bucket-id secret: it is created
    /// owner-only (0600, in a 0700 data directory when the host creates it),
    /// and one found readable by others is tightened with a warning.
    fn load_or_create(data_dir: &Path) -> anyhow::Result<Self> {
        if let Some(generated) = Self::load(data_dir)? {
            return Ok(generated);
        }
        let generated = Self { encryption_secret: random_token(), admin_key: random_token(), user_key: random_token() };
        create_private_dir(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
        let temporary = data_dir.join(format!("{GENERATED_FILE}.tmp"));
        write_private(&temporary, toml::to_string(&generated)?.as_bytes())
            .with_context(|| format!("writing {}", temporary.display()))?;
        std::fs::rename(&temporary, data_dir.join(GENERATED_FILE))?;
        Ok(generated)
    }

    /// The file a server made in `data_dir`, if it has.
    fn load(data_dir: &Path) -> anyhow::Result<Option<Self>> {
        let path = data_dir.join(GENERATED_FILE);
        if !path.exists() {
            return Ok(None);
        }
        restrict_to_owner(&path)?;
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display())).map(Some)
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    // An existing file keeps its mode through `open`: set it explicitly.
    restrict_permissions(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}

#[cfg(unix)]
fn restrict_permissions(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

/// Tightens a secrets file others can read.
fn restrict_to_owner(path: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)?.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(path = %path.display(), mode = format!("{:o}", mode & 0o777), "secrets file was readable by others; now 0600");
            restrict_permissions(path).with_context(|| format!("restricting {}", path.display()))?;
        }
    }
    let _ = path;
    Ok(())
}

fn random_token() -> String {
    let mut bytes = [0u8; 24];
    rand::fill(&mut bytes);
    bs58::encode(bytes).into_string()
}

/// Keys generated for the embedded default, shown in the banner.
#[derive(Debug, Clone)]
pub struct DemoKeys {
    pub admin: String,
    pub user: String,
}

/// A configuration with every generated value filled in.
pub struct Prepared {
    pub config: Config,
    pub demo_keys: Option<DemoKeys>,
}

/// Fills in what the configuration leaves to generation.
pub fn prepare(mut config: Config) -> anyhow::Result<Prepared> {
    let no_credentials =
        config.keys.is_empty() && config.identity.hs256_secret.is_none() && config.identity.public_keys.is_empty();
    if config.encryption.secret.is_some() && !no_credentials {
        return Ok(Prepared { config, demo_keys: None });
    }
    let generated = Generated::load_or_create(&config.data_dir)?;
    config.encryption.secret.get_or_insert(generated.encryption_secret);
    let mut demo_keys = None;
    if no_credentials {
        let admin_role = config.access.admin_roles.first().cloned().unwrap_or_else(|| "admin".into());
        if config.access.admin_roles.is_empty() {
            config.access.admin_roles.push(admin_role.clone());
        }
        config
            .keys
            .insert(generated.admin_key.clone(), ProjectKey { project: "admin".into(), roles: vec![admin_role] });
        config
            .keys
            .insert(generated.user_key.clone(), ProjectKey { project: "user".into(), roles: vec!["user".into()] });
        demo_keys = Some(DemoKeys { admin: generated.admin_key, user: generated.user_key });
    }
    Ok(Prepared { config, demo_keys })
}

/// Settings that parse but cannot work.
pub fn check_settings(config: &Config) -> anyhow::Result<()> {
    let server = &config.server;
    for (value, key) in [
        (server.header_read_timeout_seconds, "server.header_read_timeout_seconds"),
        (server.idle_timeout_seconds, "server.idle_timeout_seconds"),
        (server.blocking_threads as u64, "server.blocking_threads"),
        (server.max_connections.map_or(1, u64::from), "server.max_connections"),
    ] {
        anyhow::ensure!(value >= 1, "{key} must be at least 1");
    }
    config.handlers.check().map_err(anyhow::Error::msg)?;
    if let Some(endpoint) = &config.telemetry.otlp_endpoint {
        crate::telemetry::traces_url(endpoint).map_err(anyhow::Error::msg)?;
    }
    anyhow::ensure!(config.locks.ttl_ms >= 300, "locks.ttl_ms must be at least 300 (the lease is renewed at a third)");
    anyhow::ensure!(
        config.folders.grace_seconds >= 1,
        "folders.grace_seconds must be at least 1: writers must commit within half of it"
    );
    let days = std::iter::once(("folders.keep_versions_days".to_string(), Some(config.folders.keep_versions_days)))
        .chain(config.handlers.types.iter().map(|(group, settings)| {
            (format!("handlers.types.{group}.keep_versions_days"), settings.keep_versions_days)
        }));
    for (key, value) in days {
        if let Some(value) = value {
            anyhow::ensure!(value.is_finite() && value >= 0.0, "{key} must be a number of days, 0 or more: {value}");
        }
    }
    Ok(())
}

/// The handler runtime of a configuration: its limits, and, given the
/// secret, the compiled-component cache in `handlers.cache_dir` keyed by it.
/// The server and the CLI's `handler inspect`/`test` both build it here, so
/// a component compiled by one is loaded from the cache by the other.
pub fn handler_runtime(config: &Config, secret: Option<&str>) -> anyhow::Result<Arc<Runtime>> {
    let cache = secret.map(|secret| CacheConfig::new(config.handler_cache_dir(), secret));
    Runtime::new(RuntimeLimits::from_config(&config.handlers), cache, config.handlers.pooling)
        .map_err(|e| anyhow::anyhow!("starting the handler runtime: {e}"))
}

/// The secret `serve` would use with this configuration, without making
/// one: `encryption.secret`, else the one a server generated in
/// `<data_dir>/generated.toml`; `None` before either exists.
pub fn existing_secret(config: &Config) -> anyhow::Result<Option<String>> {
    if let Some(secret) = &config.encryption.secret {
        return Ok(Some(secret.clone()));
    }
    Ok(Generated::load(&config.data_dir)?.map(|generated| generated.encryption_secret))
}

/// Longest the start-up check of the store's conditional writes may take.
const FENCE_CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// Refuses a store whose conditional writes are missing or ignored (every commit's fence), unless
/// `storage.allow_unfenced` says the operator knows; says so loudly either way.
async fn check_fencing(store: &dyn object_store::ObjectStore, url: &str, allow_unfenced: bool) -> anyhow::Result<()> {
    let verdict = tokio::time::timeout(FENCE_CHECK_TIMEOUT, storage::check_fencing(store))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "storage {url} did not answer the check of its conditional writes within {FENCE_CHECK_TIMEOUT:?}"
            )
        })?
        .with_context(|| format!("checking the conditional writes of storage {url}"))?;
    match verdict {
        storage::Fencing::Fenced => Ok(()),
        storage::Fencing::Unfenced(why) if allow_unfenced => {
            tracing::warn!(
                storage = url,
                why,
                "storage.allow_unfenced is set: this store does not fence commits, so a second writer (another \
                 instance, or one whose lock lapsed) can overwrite a newer version unnoticed"
            );
            Ok(())
        }
        storage::Fencing::Unfenced(why) => anyhow::bail!(
            "storage {url} does not do the conditional writes every commit relies on: {why}. Without them a \
             writer whose lock lapsed can overwrite a newer commit unnoticed. Use a store that does (S3, GCS, \
             Azure), or set storage.allow_unfenced = true if exactly one instance ever writes to it \
             (docs/operations.md)"
        ),
    }
}

/// Everything a running server holds, built from a prepared configuration.
pub async fn build_state(config: &Config) -> anyhow::Result<AppState> {
    check_settings(config)?;
    let secret = config.encryption.secret.as_deref().context("encryption.secret is not set")?;
    let auth = Authenticator::new(config.keys.clone(), &config.identity, &config.access)?;
    let storage_url = config.storage_url();
    let (opened, pager) = crate::backends::open_with_pager(
        &storage_url,
        &config.storage.options,
        Duration::from_millis(config.storage.retry_timeout_ms.max(1)),
    )?;
    check_fencing(opened.as_ref(), &storage_url, config.storage.allow_unfenced).await?;
    if !crate::backends::tested_backend(&storage_url) {
        tracing::warn!(
            storage = storage_url,
            "this backend has passed the start-up check of its conditional writes, but no emulator of it runs \
             in the project's tests (docs/operations.md): try it on a staging bucket before production"
        );
    }
    let store = crate::metrics::store::MeteredStore::wrap(opened);
    if !crate::backends::supports_cas_natively(&config.storage_url())
        && crate::redis_conn::RedisTarget::from_config(&config.redis)?.is_some()
    {
        tracing::warn!(
            "storage {} has no conditional writes: it is safe for one instance only, whatever Redis coordinates",
            config.storage_url()
        );
    }
    let runtime = handler_runtime(config, Some(secret))?;
    // `oci://` types are cached beside the compiled components; a reload
    // re-reads the configuration file for their sources.
    let handlers_config = HandlersConfig { cache_dir: Some(config.handler_cache_dir()), ..config.handlers.clone() };
    let file = config.file.clone();
    let reader: SourceReader = Arc::new(move || {
        let reread = Config::load(file.as_deref()).map_err(|error| format!("re-reading the configuration: {error}"))?;
        reread.handlers.oci_sources()
    });
    let handlers = HandlerRegistry::load(runtime, &handlers_config).await?.with_source_reader(reader);

    let key_prefix = config.redis.key_prefix.clone().unwrap_or_else(|| locks::DEFAULT_KEY_PREFIX.into());
    let redis = crate::redis_conn::Redis::connect(&config.redis).await?;
    let connection = redis.as_ref().map(crate::redis_conn::Redis::connection);
    let locks = locks::from_config(connection.as_ref(), &config.locks, &key_prefix);
    let events = events::from_config(redis.as_ref(), &key_prefix).await.context("subscribing to change events")?;
    let blobs = Arc::new(
        BlobService::new(
            store.clone(),
            locks.clone(),
            events.clone(),
            BlobLimits { max_size: config.resources.max_size, max_file_size: config.resources.max_file_size },
            // The local filesystem keeps empty directories after deletes.
            config.storage_url().starts_with("file://"),
        )
        .with_path_limits(PathLimits::for_url(&config.storage_url()))
        .with_listing_cache(&config.listings),
    );
    let folders = Arc::new(
        FolderEngine::new(
            store.clone(),
            locks.clone(),
            events.clone(),
            config.folders.clone(),
            config.handlers.types.clone(),
        )
        .with_path_limits(PathLimits::for_url(&config.storage_url()))
        .with_listings(&config.listings, crate::backends::lists_in_key_order(&config.storage_url()))
        .with_pager(pager),
    );
    if let Some(moved) = folders.migrate_layout().await.context("moving the store to the indexed layout")? {
        tracing::info!(
            resources = moved.resources,
            folders = moved.folders,
            already_moved = moved.already_moved,
            left_alone = moved.left_alone,
            "the store's v2 markers are in their folders' indexes now (layout 2)"
        );
    }
    folders.settle_quotas().await.context("reading when each type's quota was set")?;
    let buckets = BucketCodec::new(secret);
    if config.folders.gc_interval_seconds > 0 {
        spawn_sweeper(&folders, Duration::from_secs(config.folders.gc_interval_seconds));
    }
    let documents = Documents::new(store.clone());
    let access = AccessService::new(
        SharingService::new(documents.clone(), buckets.clone(), config.sharing.clone()),
        PublicRules::new(documents.clone()),
    );
    // Configuration applications are the operator's: they may declare
    // dependencies on the v1 groups and every loaded type, and be given the
    // user's token.
    let mut declarable: Vec<String> = V1_GROUPS.iter().map(|g| g.to_string()).collect();
    declarable.extend(handlers.all().iter().map(|h| h.description().group.clone()));
    let policy = DeclarationPolicy { declarable, may_declare: true, may_forward_auth_token: true };
    let apps =
        ConfigApps::load(&config.applications, &policy).map_err(|why| anyhow::anyhow!("invalid application {why}"))?;
    // A project's bucket must never be an application's own.
    let projects: Vec<&str> = config.keys.values().map(|key| key.project.as_str()).collect();
    for project in &projects {
        if let Some(why) = crate::apps::project_bucket_clash(project, &apps) {
            anyhow::bail!("keys: the project {project:?} would share an application's bucket: {why}");
        }
    }
    // Only once nothing else can be named like an application's bucket.
    let taken = apps.names().map(String::as_str).chain(projects.iter().copied());
    let migrated = crate::apps::ids::migrate_app_ids(&store, &buckets, locks.as_ref(), taken.collect())
        .await
        .context("moving stored applications' data to their 128-bit ids")?;
    if let Some(migrated) = migrated {
        tracing::info!(
            applications = migrated.applications,
            objects_moved = migrated.objects_moved,
            ambiguous = migrated.ambiguous.len(),
            "stored applications' data is under their 128-bit ids now"
        );
    }
    let audit = Audit::open(config.audit.file.as_ref())
        .with_context(|| format!("opening the audit file {:?}", config.audit.file))?;
    let consent = ConsentStore::new(documents.clone());
    let keys = keys::Keys::new(
        keys::from_config(connection.as_ref(), &key_prefix),
        Duration::from_secs(config.per_request_key.lease_seconds),
    );
    let proxy = Proxy::new(&config.proxy, &config.per_request_key).context("building the application client")?;
    Ok(AppState::new(Services {
        auth,
        apps,
        definitions: StoredDefinitions::new(config.proxy.definition_cache_mib.saturating_mul(1 << 20)),
        keys,
        proxy,
        consent,
        audit,
        allow_user_dependencies: config.access.allow_user_resource_dependencies,
        access,
        documents,
        buckets,
        handlers,
        store,
        folders,
        blobs,
        redis: connection,
        events,
        feed_heartbeat: Duration::from_secs(config.feed.heartbeat_seconds.max(1)),
        feed_subscriptions: crate::http::subscriptions::Subscriptions::new(config.feed.max_subscriptions_per_caller),
        stopping: tokio::sync::watch::Sender::new(false),
        vendor_names: config.skills_api.vendor_names,
    }))
}

/// Runs the server until Ctrl-C or SIGTERM (then lets requests in flight
/// finish, for a bounded time).
pub async fn serve(prepared: Prepared) -> anyhow::Result<()> {
    let Prepared { config, demo_keys } = prepared;
    let started = std::time::SystemTime::now();
    crate::metrics::start();
    let state = build_state(&config).await?;
    if let Some(root) = config.storage_url().strip_prefix("file://") {
        reclaim_crash_leftovers(std::path::PathBuf::from(root), started);
    }
    let listener =
        TcpListener::bind(&config.server.listen).await.with_context(|| format!("binding {}", config.server.listen))?;
    let address = listener.local_addr()?;
    print_banner(&config, &state, address, demo_keys.as_ref());
    let limits = ConnectionLimits::from_config(&config.server);
    let stopping = state.clone();
    let shutdown = async move {
        shutdown_signal().await;
        stopping.begin_stop();
    };
    let keys = state.keys().clone();
    listener::serve(listener, http::router(state), limits, shutdown).await;
    // The calls the stop cut off end here: their keys must not outlive the
    // process on other instances (with Redis) for the rest of their lease.
    match tokio::time::timeout(KEY_REVOKE_TIMEOUT, keys.revoke_all()).await {
        Ok(0) => {}
        Ok(revoked) => tracing::info!(revoked, "revoked the per-request keys of calls the stop cut off"),
        Err(_) => tracing::warn!("revoking per-request keys took too long; they lapse with their lease"),
    }
    tracing::info!("stopped");
    Ok(())
}

/// How long a stop waits for the key store to revoke the keys it cut off.
const KEY_REVOKE_TIMEOUT: Duration = Duration::from_secs(5);

/// In the background: what an earlier process left half-written in the
/// local store when it died (see [`storage::reclaim_local_leftovers`]).
fn reclaim_crash_leftovers(root: PathBuf, started: std::time::SystemTime) {
    tokio::task::spawn_blocking(move || match storage::reclaim_local_leftovers(&root, started) {
        Ok(0) => {}
        Ok(removed) => tracing::info!(removed, "removed files left half-written by an earlier process"),
        Err(error) => tracing::warn!(%error, "could not look for files left half-written by an earlier process"),
    });
}

fn print_banner(config: &Config, state: &AppState, address: SocketAddr, keys: Option<&DemoKeys>) {
    let url = format!("http://{address}");
    println!("dial-host {} listening on {url}", env!("CARGO_PKG_VERSION"));
    println!("  storage:  {}", config.storage_url());
    if let Ok(Some(redis)) = crate::redis_conn::RedisTarget::from_config(&config.redis) {
        println!("  redis:    {redis}");
    }
    for handler in state.handlers().all() {
        println!("  handler:  /v2/{}/ ({}, {})", handler.description().group, handler.label(), handler.source());
    }
    for (name, app) in state.apps().all() {
        println!("  application: {name} ({})", app.summary());
    }
    if let Some(keys) = keys {
        let generated = data_file(config);
        println!("  admin key: {}   (generated, kept in {})", keys.admin, generated.display());
        println!("  user key:  {}", keys.user);
        println!("  try:       curl -H 'Api-Key: {}' {url}/v1/bucket", keys.user);
    }
}

fn data_file(config: &Config) -> PathBuf {
    config.data_dir.join(GENERATED_FILE)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
