//! Which handler serves which URL group, and swapping them while serving.
//!
//! Built at start from the built-in skill handler, every `*.wasm` in
//! `handlers.dir` (name order) and every `handlers.types.<group>.source`
//! pulled from an OCI registry ([`super::oci`]); at start a group claimed
//! twice, a file that is not a handler, or per-type settings for a group
//! nobody serves stop the start with a message naming the file. An OCI type
//! that cannot be had (registry away with nothing cached, digest mismatch,
//! not a handler, another group) does not: it is reported failed
//! ([`HandlerRegistry::failed`]) and the rest serves.
//!
//! [`HandlerRegistry::reload`] re-reads the directory while requests are in
//! flight. The loaded set is an immutable snapshot behind a lock held only to
//! swap a pointer; a request clones the [`Handler`] it resolved, so it finishes
//! on the version it started with. A file that fails to load (or claims a
//! group another file holds) never replaces what is serving: its previous
//! version, if any, stays, and the report says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::Serialize;

use super::config::HandlersConfig;
use super::handler::Handler;
use super::oci::{Fetched, OciReference, OciStore};
use super::runtime::{LoadError, Runtime};
use super::types::HandlerSource;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("handler {origin}: {error}")]
    Load { origin: HandlerSource, error: LoadError },
    #[error("group '{group}' is claimed by two handlers: {first} and {second}")]
    DuplicateGroup { group: String, first: HandlerSource, second: HandlerSource },
    #[error("cannot read handlers directory {dir}: {error}")]
    Directory { dir: PathBuf, error: std::io::Error },
    #[error("[handlers.types.{0}] configures a group that no loaded handler serves")]
    UnknownType(String),
    #[error("{0}")]
    Config(String),
}

/// Reads the `oci://` sources afresh at each reload (the host re-reads its
/// configuration file); without one, the sources of the start stay.
pub type SourceReader = Arc<dyn Fn() -> Result<BTreeMap<String, OciReference>, String> + Send + Sync>;

/// The built-in Agent Skills handler, compiled by the build script.
pub const BUILTIN_SKILL_HANDLER: &[u8] =
    include_bytes!(concat!(env!("DIAL_GUEST_WASM_DIR"), "/dial_skill_handler.wasm"));

/// Where the build script put the guest components (the built-in handler and
/// the test guests); tests and benchmarks load test guests from here.
pub const GUEST_WASM_DIR: &str = env!("DIAL_GUEST_WASM_DIR");

/// The loaded handlers, by group.
type Loaded = BTreeMap<String, Handler>;

/// The handler types being served; cheap to read from every request.
pub struct HandlerRegistry {
    runtime: Arc<Runtime>,
    config: HandlersConfig,
    current: RwLock<Arc<Loaded>>,
    /// What failed at the start or the last reload (still failing).
    failed: RwLock<Arc<Vec<FailedHandler>>>,
    oci: OciStore,
    oci_sources: SourceReader,
    /// One reload at a time; requests never wait on it.
    reloading: tokio::sync::Mutex<()>,
}

/// What a reload did, file by file.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadReport {
    /// Groups served after the reload, with the version serving each.
    pub serving: Vec<ServingHandler>,
    /// Components that did not load; each names the file and the reason.
    pub failed: Vec<FailedHandler>,
    /// Groups no longer served because their file left the directory.
    pub removed: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServingHandler {
    pub group: String,
    pub handler_version: String,
    /// As the handler listing shows it: `{"kind": "file", "path": …}`.
    pub source: HandlerSource,
    pub sha256: String,
    /// `loaded` (new group), `updated` (new component), `unchanged`.
    pub change: &'static str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedHandler {
    /// As the handler listing shows it (the directory, when it cannot be read).
    pub source: HandlerSource,
    pub error: String,
    /// The version that keeps serving the file's group, if one did before.
    pub still_serving: Option<String>,
}

impl ReloadReport {
    pub fn is_clean(&self) -> bool {
        self.failed.is_empty()
    }
}

impl HandlerRegistry {
    /// Loads the built-in handler, the configured directory (any problem
    /// stops the start) and the `oci://` types (one that fails is reported
    /// in [`Self::failed`], the rest serving).
    pub async fn load(runtime: Arc<Runtime>, config: &HandlersConfig) -> Result<Self, RegistryError> {
        let oci_sources = config.oci_sources().map_err(RegistryError::Config)?;
        let mut by_group = Loaded::new();
        for (source, wasm) in sources(config)? {
            let loaded = runtime
                .load(wasm, source.clone())
                .await
                .map_err(|error| RegistryError::Load { origin: source.clone(), error })?;
            let group = loaded.description.group.clone();
            if let Some(existing) = by_group.get(&group) {
                return Err(RegistryError::DuplicateGroup { group, first: existing.source().clone(), second: source });
            }
            let handler = Handler::new(loaded, runtime.clone(), config);
            log_loaded(&handler);
            by_group.insert(group, handler);
        }
        let oci = OciStore::new(config.cache_dir.as_ref().map(|dir| dir.join("oci")), config.pull_settings());
        let mut failed = Vec::new();
        for (group, reference) in &oci_sources {
            let source = HandlerSource::Oci(reference.to_string());
            if let Some(existing) = by_group.get(group) {
                return Err(RegistryError::DuplicateGroup {
                    group: group.clone(),
                    first: existing.source().clone(),
                    second: source,
                });
            }
            match load_oci(&runtime, &oci, config, group, reference).await {
                Ok(handler) => {
                    log_loaded(&handler);
                    by_group.insert(group.clone(), handler);
                }
                Err(error) => {
                    tracing::error!(group = %group, source = %source, %error, "handler type failed: the rest serves");
                    failed.push(FailedHandler { source, error, still_serving: None });
                }
            }
        }
        if let Some(unknown) =
            config.types.keys().find(|group| !by_group.contains_key(*group) && !oci_sources.contains_key(*group))
        {
            return Err(RegistryError::UnknownType(unknown.clone()));
        }
        let fixed = config.clone();
        Ok(Self {
            runtime,
            config: config.clone(),
            current: RwLock::new(Arc::new(by_group)),
            failed: RwLock::new(Arc::new(failed)),
            oci,
            oci_sources: Arc::new(move || fixed.oci_sources()),
            reloading: tokio::sync::Mutex::new(()),
        })
    }

    /// Re-reads the `oci://` sources through `reader` at each reload.
    pub fn with_source_reader(mut self, reader: SourceReader) -> Self {
        self.oci_sources = reader;
        self
    }

    /// The types that failed at the start or the last reload, with why.
    pub fn failed(&self) -> Vec<FailedHandler> {
        self.failed.read().expect("registry lock poisoned").as_ref().clone()
    }

    /// The handler serving `group` now. The clone keeps its version alive for
    /// as long as the caller holds it.
    pub fn get(&self, group: &str) -> Option<Handler> {
        self.snapshot().get(group).cloned()
    }

    /// Every handler serving now, by group name.
    pub fn all(&self) -> Vec<Handler> {
        self.snapshot().values().cloned().collect()
    }

    fn snapshot(&self) -> Arc<Loaded> {
        self.current.read().expect("registry lock poisoned").clone()
    }

    /// Re-reads `handlers.dir` and swaps in what loads. Components whose hash
    /// has not changed are kept as they are (no recompilation).
    pub async fn reload(&self) -> Result<ReloadReport, RegistryError> {
        self.reload_or_preview(true).await
    }

    /// What [`Self::reload`] would do now, doing nothing: the same report
    /// (new files are compiled, so their failures show), nothing swapped.
    pub async fn preview_reload(&self) -> Result<ReloadReport, RegistryError> {
        self.reload_or_preview(false).await
    }

    async fn reload_or_preview(&self, apply: bool) -> Result<ReloadReport, RegistryError> {
        let _one_at_a_time = self.reloading.lock().await;
        let before = self.snapshot();
        let by_hash: BTreeMap<(&HandlerSource, &str), &Handler> =
            before.values().map(|h| ((h.source(), h.sha256()), h)).collect();

        let mut next = Loaded::new();
        let mut report = ReloadReport::default();
        let mut failures: Vec<(HandlerSource, String)> = Vec::new();
        let config = self.config.clone();
        let read = tokio::task::spawn_blocking(move || sources(&config)).await.expect("reading handler files panicked");
        let sources = match read {
            Ok(sources) => sources,
            // Nothing can be compared with a directory that cannot be read:
            // everything keeps serving, and the report says why.
            Err(RegistryError::Directory { dir, error }) => {
                tracing::warn!(dir = %dir.display(), %error, "reload: cannot read the handlers directory");
                report.failed.push(FailedHandler {
                    source: HandlerSource::File(dir.clone()),
                    error: format!("cannot read handlers directory {}: {error}", dir.display()),
                    still_serving: None,
                });
                report.serving = before.iter().map(|(group, handler)| serving(group, handler, "unchanged")).collect();
                if apply {
                    *self.failed.write().expect("registry lock poisoned") = Arc::new(report.failed.clone());
                }
                return Ok(report);
            }
            Err(error) => return Err(error),
        };
        for (source, wasm) in sources {
            let sha256 = super::runtime::sha256_hex(&wasm);
            let handler = match by_hash.get(&(&source, sha256.as_str())) {
                Some(unchanged) => (*unchanged).clone(),
                None => match self.runtime.load(wasm, source.clone()).await {
                    Ok(loaded) => Handler::new(loaded, self.runtime.clone(), &self.config),
                    Err(error) => {
                        failures.push((source, error.to_string()));
                        continue;
                    }
                },
            };
            let group = handler.description().group.clone();
            if let Some(holder) = next.get(&group) {
                let message = format!("group '{group}' is already claimed by {}", holder.source());
                failures.push((source, message));
                continue;
            }
            next.insert(group, handler);
        }
        let mut oci_failures: Vec<(String, HandlerSource, String)> = Vec::new();
        match (self.oci_sources)() {
            Ok(oci_sources) => {
                for (group, reference) in oci_sources {
                    let source = HandlerSource::Oci(reference.to_string());
                    if let Some(holder) = next.get(&group) {
                        let message = format!("group '{group}' is already claimed by {}", holder.source());
                        oci_failures.push((group, source, message));
                        continue;
                    }
                    let handler = match before.get(&group).filter(|h| *h.source() == source) {
                        Some(unchanged) => unchanged.clone(),
                        None => match load_oci(&self.runtime, &self.oci, &self.config, &group, &reference).await {
                            Ok(handler) => handler,
                            Err(error) => {
                                oci_failures.push((group, source, error));
                                continue;
                            }
                        },
                    };
                    next.insert(group, handler);
                }
            }
            // The configuration no longer reads: the OCI types keep serving.
            Err(error) => {
                for (group, handler) in before.iter().filter(|(_, h)| matches!(h.source(), HandlerSource::Oci(_))) {
                    if !next.contains_key(group) {
                        next.insert(group.clone(), handler.clone());
                    }
                }
                let source = HandlerSource::Oci("handlers.types.*.source".into());
                report.failed.push(FailedHandler { source, error, still_serving: None });
            }
        }
        // An OCI type that failed keeps its previous version serving (the
        // last digest that loaded), unless its group went elsewhere.
        for (group, source, error) in oci_failures {
            let kept = before
                .get(&group)
                .filter(|h| matches!(h.source(), HandlerSource::Oci(_)) && !next.contains_key(&group))
                .cloned();
            if let Some(kept) = &kept {
                next.insert(group.clone(), kept.clone());
            }
            tracing::warn!(group = %group, source = %source, error = %error, kept = ?kept.as_ref().map(Handler::label), "handler type failed to load");
            report.failed.push(FailedHandler { source, error, still_serving: kept.map(|h| h.label().to_string()) });
        }

        // A file that failed keeps its previous version serving, unless its
        // group went to another file meanwhile.
        for (source, error) in failures {
            let previous = before.values().find(|h| *h.source() == source);
            let kept = previous.filter(|h| !next.contains_key(&h.description().group)).cloned();
            if let Some(kept) = &kept {
                next.insert(kept.description().group.clone(), kept.clone());
            }
            tracing::warn!(source = %source, error = %error, kept = ?kept.as_ref().map(Handler::label), "handler failed to load");
            report.failed.push(FailedHandler { source, error, still_serving: kept.map(|h| h.label().to_string()) });
        }

        for (group, handler) in &next {
            let change = match before.get(group) {
                None => "loaded",
                Some(old) if old.sha256() == handler.sha256() && old.source() == handler.source() => "unchanged",
                Some(_) => "updated",
            };
            if apply && change != "unchanged" {
                log_loaded(handler);
            }
            report.serving.push(serving(group, handler, change));
        }
        report.removed = before.keys().filter(|group| !next.contains_key(*group)).cloned().collect();
        if !apply {
            return Ok(report);
        }
        for group in &report.removed {
            tracing::info!(group = %group, "handler unloaded: its file left the handlers directory");
        }
        *self.current.write().expect("registry lock poisoned") = Arc::new(next);
        *self.failed.write().expect("registry lock poisoned") = Arc::new(report.failed.clone());
        Ok(report)
    }
}

/// Fetches, loads and checks one `oci://` type: the component must describe
/// the group it is configured for.
async fn load_oci(
    runtime: &Arc<Runtime>,
    oci: &OciStore,
    config: &HandlersConfig,
    group: &str,
    reference: &OciReference,
) -> Result<Handler, String> {
    let (wasm, fetched) = oci.fetch(reference).await.map_err(|error| error.to_string())?;
    if fetched == Fetched::Registry {
        tracing::info!(group, reference = %reference, bytes = wasm.len(), "pulled a handler component");
    }
    let loaded = runtime
        .load(wasm, HandlerSource::Oci(reference.to_string()))
        .await
        .map_err(|error| format!("{reference}: {error}"))?;
    let described = &loaded.description().group;
    if described != group {
        return Err(format!(
            "{reference} describes group '{described}', but is configured as handlers.types.{group}.source"
        ));
    }
    Ok(Handler::new(loaded, runtime.clone(), config))
}

fn serving(group: &str, handler: &Handler, change: &'static str) -> ServingHandler {
    ServingHandler {
        group: group.to_string(),
        handler_version: handler.description().handler_version.clone(),
        source: handler.source().clone(),
        sha256: handler.sha256().to_string(),
        change,
    }
}

fn log_loaded(handler: &Handler) {
    tracing::info!(
        group = %handler.description().group,
        handler = %handler.label(),
        source = %handler.source(),
        sha256 = %handler.sha256(),
        strict = handler.is_strict(),
        "loaded handler"
    );
}

/// The built-in component, then `*.wasm` directly in `handlers.dir` by name.
fn sources(config: &HandlersConfig) -> Result<Vec<(HandlerSource, Vec<u8>)>, RegistryError> {
    let mut sources = vec![(HandlerSource::Builtin, BUILTIN_SKILL_HANDLER.to_vec())];
    if let Some(dir) = &config.dir {
        for path in wasm_files(dir)? {
            let bytes = std::fs::read(&path).map_err(|error| RegistryError::Directory { dir: path.clone(), error })?;
            sources.push((HandlerSource::File(path), bytes));
        }
    }
    Ok(sources)
}

fn wasm_files(dir: &Path) -> Result<Vec<PathBuf>, RegistryError> {
    let read_error = |error| RegistryError::Directory { dir: dir.to_path_buf(), error };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_error)? {
        let path = entry.map_err(read_error)?.path();
        if path.is_file() && path.extension().is_some_and(|ext| ext == "wasm") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
