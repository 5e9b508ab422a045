//! The wasmtime side: one engine, compiled components, one sandboxed
//! instance per call.
//!
//! Every call gets a fresh `Store` (an instance never sees another call's
//! state, and a trapped instance is simply dropped) instantiated from a
//! pre-linked component, under:
//! - a CPU deadline: an epoch ticker bumps the engine's epoch every
//!   [`EPOCH_TICK`]; each tick a running guest yields to tokio (so it never
//!   holds a runtime thread for long) and spends one tick of its budget;
//! - a memory cap, enforced by a `ResourceLimiter` that also records the hit
//!   so the error can say "memory limit" rather than "trap";
//! - a read budget on the `files` import;
//! - a wall-clock bound around the whole call (slow storage, stuck reads);
//! - a semaphore, so overload queues instead of exhausting the instance pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod call_state;

use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::error::Elapsed;
use wasmtime::component::{Component, ComponentExportIndex, HasSelf, Instance, InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

pub use self::call_state::MAX_READ_CHUNK;
use self::call_state::{CallState, FixedSeed};
use super::bindings::{self, CheckFunc, HandlerCore, HandlerCoreIndices};
use super::cache::{CacheConfig, ComponentCache};
use super::config::HandlersConfig;
use super::files::{FileSource, InMemoryFiles};
use super::types::{
    FileEntry, HandlerDescription, HandlerError, HandlerErrorKind, HandlerSource, Mutation, Problem, ResourceInfo,
};

/// How often the epoch advances: the granularity of the CPU deadline and of
/// a running guest's yields to the async runtime.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The sandbox limits every call runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeLimits {
    pub cpu_deadline: Duration,
    pub wall_deadline: Duration,
    pub memory_limit_bytes: u64,
    pub read_budget_bytes: u64,
    pub max_concurrent_calls: u32,
    /// Pooling allocator tuning: how much of a memory slot stays resident
    /// between calls (its dirty pages reset in place).
    pub memory_keep_resident_bytes: u64,
}

impl RuntimeLimits {
    pub fn from_config(config: &HandlersConfig) -> Self {
        Self {
            cpu_deadline: Duration::from_millis(config.cpu_deadline_ms.max(1)),
            wall_deadline: Duration::from_millis(config.wall_deadline_ms.max(1)),
            memory_limit_bytes: config.memory_limit_mib.max(1) << 20,
            read_budget_bytes: config.read_budget_bytes,
            max_concurrent_calls: config.max_concurrent_calls.max(1),
            memory_keep_resident_bytes: config.memory_keep_resident_kib.unwrap_or_else(default_keep_resident_kib) << 10,
        }
    }

    fn cpu_ticks(&self) -> u64 {
        (self.cpu_deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }
}

impl Default for RuntimeLimits {
    fn default() -> Self {
        Self::from_config(&HandlersConfig::default())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a component at all (said in words, never dumped).
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(&'static str),
    #[error("not a valid WebAssembly component: {0}")]
    Compile(String),
    #[error("does not implement the dial:handler@1.x world (built against 1.0.0 up to this host's 1.2.0): {0}")]
    NotAHandler(String),
    #[error("describe failed: {0}")]
    Describe(HandlerError),
    #[error("invalid description: {0}")]
    BadDescription(String),
}

/// A compiled, pre-linked handler component and what it said about itself.
pub struct LoadedComponent {
    pre: InstancePre<CallState>,
    /// Where the 1.x exports are in an instance.
    exports: HandlerCoreIndices,
    /// The 1.2 `check` export, when the component has it (type-checked at load).
    check: Option<ComponentExportIndex>,
    pub(super) description: HandlerDescription,
    pub(super) source: HandlerSource,
    pub(super) sha256: String,
    /// Shared with each call's store and metrics: no copy per call.
    pub(super) label: Arc<str>,
    /// Whether the compiled code came from the disk cache.
    from_cache: bool,
}

impl LoadedComponent {
    pub fn description(&self) -> &HandlerDescription {
        &self.description
    }

    pub fn source(&self) -> &HandlerSource {
        &self.source
    }

    /// SHA-256 of the component, hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// `<type>@<version>`, the name used in error messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether its compiled code was loaded from the disk cache (`false`:
    /// compiled by this load, and cached when the runtime has a cache).
    pub fn from_cache(&self) -> bool {
        self.from_cache
    }

    /// Whether a commit costs one call (`check`, WIT 1.2) rather than two.
    pub fn has_check(&self) -> bool {
        self.check.is_some()
    }
}

/// Compiles, links and calls handler components.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    limits: RuntimeLimits,
    permits: Arc<Semaphore>,
    cache: Option<ComponentCache>,
    pooling: bool,
}

impl Runtime {
    /// Builds the engine and starts its epoch ticker. With `pooling`, uses
    /// the pooling allocator if this machine lets it reserve the address
    /// space, and falls back to on-demand allocation otherwise.
    pub fn new(limits: RuntimeLimits, cache: Option<CacheConfig>, pooling: bool) -> Result<Arc<Self>, wasmtime::Error> {
        let (engine, pooling) = match pooling.then(|| Engine::new(&engine_config(&limits, true))) {
            Some(Ok(engine)) => (engine, true),
            Some(Err(error)) => {
                tracing::warn!(%error, "pooling allocator unavailable; using on-demand allocation");
                (Engine::new(&engine_config(&limits, false))?, false)
            }
            None => (Engine::new(&engine_config(&limits, false))?, false),
        };
        start_epoch_ticker(&engine);

        let mut linker = Linker::new(&engine);
        // Rust guests import WASI (stdio, env, exit) through std; the context
        // below grants none of it beyond what start-up needs.
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        // std's `HashMap` asks for its seed once per fresh instance: answered
        // without building the WASI context (see `FixedSeed`).
        linker.allow_shadowing(true);
        wasmtime_wasi::p2::bindings::random::insecure_seed::add_to_linker::<_, FixedSeed>(&mut linker, |_| FixedSeed)?;
        linker.allow_shadowing(false);
        bindings::HandlerCore::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;

        let cache = cache.map(|config| ComponentCache::new(config, &engine));
        let permits = Arc::new(Semaphore::new(limits.max_concurrent_calls as usize));
        Ok(Arc::new(Self { engine, linker, limits, permits, cache, pooling }))
    }

    pub fn limits(&self) -> &RuntimeLimits {
        &self.limits
    }

    pub fn uses_pooling(&self) -> bool {
        self.pooling
    }

    /// Where compiled components are cached (this engine's subdirectory),
    /// when the runtime has a cache.
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.cache.as_ref().map(ComponentCache::dir)
    }

    /// Compiles (or loads from the disk cache) a component, checks it
    /// implements the handler world, and asks it to describe itself.
    pub async fn load(&self, wasm: Vec<u8>, source: HandlerSource) -> Result<LoadedComponent, LoadError> {
        check_component_header(&wasm)?;
        let sha256 = sha256_hex(&wasm);
        let (component, from_cache) = {
            let engine = self.engine.clone();
            let cache = self.cache.clone();
            let sha256 = sha256.clone();
            // Compilation is CPU-heavy: keep it off the async workers.
            tokio::task::spawn_blocking(move || match cache {
                Some(cache) => cache.load_or_compile(&engine, &wasm, &sha256),
                None => Component::new(&engine, &wasm).map(|component| (component, false)),
            })
            .await
            .map_err(|e| LoadError::Compile(e.to_string()))?
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?
        };
        let pre = self.linker.instantiate_pre(&component).map_err(|e| LoadError::NotAHandler(format!("{e:#}")))?;
        let exports = HandlerCoreIndices::new(&pre).map_err(|e| LoadError::NotAHandler(format!("{e:#}")))?;
        let check = component.get_export_index(None, "check");

        let mut loaded = LoadedComponent {
            pre,
            exports,
            check,
            description: HandlerDescription {
                type_name: String::new(),
                group: String::new(),
                display_name: String::new(),
                handler_version: String::new(),
                limits: Default::default(),
            },
            label: format!("{source}").into(),
            source,
            sha256,
            from_cache,
        };
        let (mut call, (instance, exports)) = self
            .start(&loaded, Arc::new(InMemoryFiles::new()), "describe", |store, instance| {
                Ok((*instance, loaded.exports.load(store, instance)?))
            })
            .await
            .map_err(LoadError::Describe)?;
        if let Some(check) = &loaded.check {
            check_func(&instance, &mut call.store, check).map_err(|e| {
                LoadError::NotAHandler(format!(
                    "its `check` export does not have the type dial:handler@1.2.0 gives it: {e:#}"
                ))
            })?;
        }
        let result = tokio::time::timeout(self.limits.wall_deadline, exports.call_describe(&mut call.store)).await;
        let description: HandlerDescription =
            call.finish(&loaded.label, &self.limits, result).map_err(LoadError::Describe)?.into();
        check_description(&description).map_err(LoadError::BadDescription)?;
        loaded.label = format!("{}@{}", description.type_name, description.handler_version).into();
        loaded.description = description;
        Ok(loaded)
    }

    /// The names a loaded component imports and exports (as `wkg` lists
    /// them in an OCI artifact's config).
    pub fn world(&self, loaded: &LoadedComponent) -> (Vec<String>, Vec<String>) {
        let ty = loaded.pre.component().component_type();
        let imports = ty.imports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let exports = ty.exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        (imports, exports)
    }

    pub(super) async fn validate(
        &self,
        component: &LoadedComponent,
        resource: &ResourceInfo,
        entries: &[FileEntry],
        files: Arc<dyn FileSource>,
    ) -> Result<Result<Vec<Problem>, Vec<Problem>>, HandlerError> {
        let resource = resource.into();
        let entries: Vec<_> = entries.iter().map(Into::into).collect();
        let (mut call, exports) = self.start(component, files, "validate", core_exports(component)).await?;
        let result = tokio::time::timeout(
            self.limits.wall_deadline,
            exports.call_validate(&mut call.store, &resource, &entries),
        )
        .await;
        let outcome = call.finish_verdict(&component.label, &self.limits, result)?;
        Ok(outcome.map(problems).map_err(problems))
    }

    pub(super) async fn build_marker_metadata(
        &self,
        component: &LoadedComponent,
        resource: &ResourceInfo,
        entries: &[FileEntry],
        files: Arc<dyn FileSource>,
    ) -> Result<Result<Vec<(String, String)>, Vec<Problem>>, HandlerError> {
        let resource = resource.into();
        let entries: Vec<_> = entries.iter().map(Into::into).collect();
        let (mut call, exports) = self.start(component, files, "metadata", core_exports(component)).await?;
        let result = tokio::time::timeout(
            self.limits.wall_deadline,
            exports.call_build_marker_metadata(&mut call.store, &resource, &entries),
        )
        .await;
        let outcome = call.finish_verdict(&component.label, &self.limits, result)?;
        Ok(outcome.map_err(problems))
    }

    pub(super) async fn validate_file_mutation(
        &self,
        component: &LoadedComponent,
        path: &str,
        op: Mutation,
    ) -> Result<Result<(), Problem>, HandlerError> {
        let (mut call, exports) =
            self.start(component, Arc::new(InMemoryFiles::new()), "mutation", core_exports(component)).await?;
        let result = tokio::time::timeout(
            self.limits.wall_deadline,
            exports.call_validate_file_mutation(&mut call.store, path, op.into()),
        )
        .await;
        let outcome = call.finish(&component.label, &self.limits, result)?;
        Ok(outcome.map_err(Into::into))
    }

    /// Everything one commit asks of the handler: warnings and metadata, or
    /// the problems. One call of `check` when the component exports it (WIT
    /// 1.2: one instance, one read, one parse); `validate` then
    /// `build-marker-metadata` for components built against 1.0 or 1.1.
    pub(super) async fn check(
        &self,
        component: &LoadedComponent,
        resource: &ResourceInfo,
        entries: &[FileEntry],
        files: Arc<dyn FileSource>,
    ) -> Result<Result<(Vec<Problem>, Vec<(String, String)>), Vec<Problem>>, HandlerError> {
        let Some(check) = &component.check else {
            let warnings = match self.validate(component, resource, entries, files.clone()).await? {
                Ok(warnings) => warnings,
                Err(problems) => return Ok(Err(problems)),
            };
            let metadata = self.build_marker_metadata(component, resource, entries, files).await?;
            return Ok(metadata.map(|metadata| (warnings, metadata)));
        };
        let resource: bindings::ResourceInfo = resource.into();
        let entries: Vec<bindings::FileEntry> = entries.iter().map(Into::into).collect();
        // Only `check` is looked up (and type-checked) in the instance.
        let (mut call, func) =
            self.start(component, files, "check", |store, instance| check_func(instance, store, check)).await?;
        let result = tokio::time::timeout(self.limits.wall_deadline, async {
            let (outcome,) = func.call_async(&mut call.store, (&resource, &entries)).await?;
            Ok(outcome)
        })
        .await;
        let outcome = call.finish_verdict(&component.label, &self.limits, result)?;
        Ok(outcome.map(|(warnings, metadata)| (problems(warnings), metadata)).map_err(problems))
    }

    /// A fresh store and instance for one call of the export `name`, and
    /// what `load` takes from the instance (the export to call).
    async fn start<E>(
        &self,
        component: &LoadedComponent,
        files: Arc<dyn FileSource>,
        name: &'static str,
        load: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<E>,
    ) -> Result<(Call, E), HandlerError> {
        let permit = self.permits.clone().acquire_owned().await.expect("the call semaphore is never closed");
        let started = Instant::now();
        let mut store = Store::new(
            &self.engine,
            CallState::new(
                files,
                self.limits.read_budget_bytes,
                self.limits.memory_limit_bytes,
                self.limits.cpu_ticks(),
                component.label.clone(),
            ),
        );
        store.limiter(|state| state);
        store.epoch_deadline_callback(|mut context| {
            let state = context.data_mut();
            if state.cpu_ticks_left == 0 {
                state.cpu_exhausted = true;
                return Ok(UpdateDeadline::Interrupt);
            }
            state.cpu_ticks_left -= 1;
            Ok(UpdateDeadline::Yield(1))
        });
        // Counted from now: without it the first yield would come late.
        store.set_epoch_deadline(1);
        let result = tokio::time::timeout(self.limits.wall_deadline, async {
            let instance = component.pre.instantiate_async(&mut store).await?;
            load(&mut store, &instance)
        })
        .await;
        let call = Call { store, _permit: permit, name, started, label: component.label.clone() };
        let exports = call
            .classify(&component.label, &self.limits, result, |detail| HandlerErrorKind::Instantiate { detail })
            .inspect_err(|error| call.record(Some(&error.kind)))?;
        Ok((call, exports))
    }
}

/// One call in flight: its store and its place in the queue.
struct Call {
    store: Store<CallState>,
    _permit: OwnedSemaphorePermit,
    /// The export called, and when the instance began (for the metrics).
    name: &'static str,
    started: Instant,
    /// The handler's label, for the metrics.
    label: Arc<str>,
}

impl Call {
    /// The outcome of a call into the instance.
    fn finish<T>(
        self,
        label: &str,
        limits: &RuntimeLimits,
        result: Result<wasmtime::Result<T>, Elapsed>,
    ) -> Result<T, HandlerError> {
        let outcome = self.classify(label, limits, result, |detail| HandlerErrorKind::Trapped { detail });
        self.record(outcome.as_ref().err().map(|error| &error.kind));
        outcome
    }

    /// The outcome of a call that returns a verdict: as [`Self::finish`], and
    /// a rejection naming no problem is a handler bug (500 with the guest's
    /// stderr), not a 400 with an empty reason. A JavaScript handler's thrown
    /// `Error` arrives this way: componentize-js lowers it as the `err` list.
    fn finish_verdict<T>(
        self,
        label: &str,
        limits: &RuntimeLimits,
        result: Result<wasmtime::Result<Result<T, Vec<bindings::Problem>>>, Elapsed>,
    ) -> Result<Result<T, Vec<bindings::Problem>>, HandlerError> {
        let outcome = self.classify(label, limits, result, |detail| HandlerErrorKind::Trapped { detail });
        let outcome = outcome.and_then(|verdict| match verdict {
            Err(problems) if problems.is_empty() => {
                let state = self.store.data();
                let kind = if state.memory_exceeded {
                    // An interpreter may catch its own out-of-memory and give up.
                    HandlerErrorKind::MemoryLimit { limit_mib: limits.memory_limit_bytes >> 20 }
                } else {
                    HandlerErrorKind::Trapped { detail: empty_rejection_detail(&state.stderr) }
                };
                tracing::warn!(handler = label, error = %kind, "handler call failed");
                Err(HandlerError { handler: label.into(), kind })
            }
            verdict => Ok(verdict),
        });
        self.record(outcome.as_ref().err().map(|error| &error.kind));
        outcome
    }

    /// The call's metrics: `ok`, or the kind of failure.
    fn record(&self, failure: Option<&HandlerErrorKind>) {
        let outcome = match failure {
            None => "ok",
            Some(HandlerErrorKind::CpuLimit { .. }) => "cpu",
            Some(HandlerErrorKind::MemoryLimit { .. }) => "memory",
            Some(HandlerErrorKind::TimedOut { .. }) => "timeout",
            Some(HandlerErrorKind::Trapped { .. }) => "trap",
            Some(HandlerErrorKind::Instantiate { .. }) => "start",
        };
        super::metrics::handler_call(&self.label, self.name, outcome, self.started.elapsed());
    }

    /// Turns a wasmtime outcome into the handler's result or a named error.
    fn classify<T>(
        &self,
        label: &str,
        limits: &RuntimeLimits,
        result: Result<wasmtime::Result<T>, Elapsed>,
        trapped: impl FnOnce(String) -> HandlerErrorKind,
    ) -> Result<T, HandlerError> {
        let error = match result {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(error)) => error,
            Err(_) => {
                let limit_ms = limits.wall_deadline.as_millis() as u64;
                return Err(HandlerError { handler: label.into(), kind: HandlerErrorKind::TimedOut { limit_ms } });
            }
        };
        let state = self.store.data();
        let kind = if state.memory_exceeded {
            HandlerErrorKind::MemoryLimit { limit_mib: limits.memory_limit_bytes >> 20 }
        } else if state.cpu_exhausted || matches!(error.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
            HandlerErrorKind::CpuLimit { limit_ms: limits.cpu_deadline.as_millis() as u64 }
        } else {
            trapped(trap_detail(&error, &state.stderr))
        };
        tracing::warn!(handler = label, error = %kind, "handler call failed");
        Err(HandlerError { handler: label.into(), kind })
    }
}

/// The 1.x exports of an instance, each type-checked (`describe`,
/// `validate`, `build-marker-metadata`, `validate-file-mutation`).
fn core_exports(
    component: &LoadedComponent,
) -> impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<HandlerCore> + '_ {
    |store, instance| component.exports.load(store, instance)
}

/// The `check` export of an instance, typed (which also checks its type).
fn check_func<'a>(
    instance: &Instance,
    store: &mut Store<CallState>,
    check: &ComponentExportIndex,
) -> wasmtime::Result<CheckFunc<'a>> {
    instance.get_typed_func(store, check)
}

/// The panic message the guest printed, if any, else the trap itself.
fn trap_detail(error: &wasmtime::Error, stderr: &MemoryOutputPipe) -> String {
    let printed = String::from_utf8_lossy(&stderr.contents()).trim().to_string();
    let trap = error.downcast_ref::<Trap>().map(ToString::to_string).unwrap_or_else(|| format!("{error}"));
    capped(if printed.is_empty() { trap } else { format!("{printed} ({trap})") })
}

/// What the guest printed before rejecting a resource with no problem.
fn empty_rejection_detail(stderr: &MemoryOutputPipe) -> String {
    const WHAT: &str = "it rejected the resource without naming a problem";
    let printed = String::from_utf8_lossy(&stderr.contents()).trim().to_string();
    capped(if printed.is_empty() {
        format!("{WHAT} (a JavaScript handler does this when it throws an Error instead of a list of problems)")
    } else {
        format!("{printed} ({WHAT})")
    })
}

/// A detail cut to 1000 bytes: a guest's stderr can hold 64 KiB.
fn capped(mut detail: String) -> String {
    if detail.len() > 1000 {
        let mut cut = 1000;
        while !detail.is_char_boundary(cut) {
            cut -= 1;
        }
        detail.truncate(cut);
        detail.push('…');
    }
    detail
}

/// With `PAGEMAP_SCAN` the pool resets only the pages a call dirtied, in
/// place: keeping a slot's memory resident then saves every page fault and
/// `madvise` of the next call (measured: one call 29 → 8 µs). Without it,
/// keeping memory resident means a `memset` of the whole region per call,
/// which costs more than it saves.
fn default_keep_resident_kib() -> u64 {
    if PoolingAllocationConfig::is_pagemap_scan_available() { 1024 } else { 0 }
}

/// Tables are small (a Rust guest's holds a few hundred entries): kept
/// resident whenever memory is.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// Core module instances one call may need. A Rust guest instantiates 3;
/// a CPython guest built by componentize-py 14 (the interpreter, libc, the
/// WASI adapter, the runtime and their shims). The pool's bound is a count
/// (each instance's metadata is allocated as it starts), so headroom costs
/// nothing until used, and too little refuses calls once a few run at once.
/// Guarded by `blackbox::python_handler::as_many_python_checks_run_at_once_as_the_host_allows`.
const CORE_INSTANCES_PER_CALL: u32 = 16;

fn engine_config(limits: &RuntimeLimits, pooling: bool) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    if pooling {
        let calls = limits.max_concurrent_calls;
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(calls)
            .total_core_instances(calls * CORE_INSTANCES_PER_CALL)
            .total_memories(calls * 2)
            .total_tables(calls * 4)
            .total_stacks(calls)
            .max_memory_size(usize::try_from(limits.memory_limit_bytes).unwrap_or(usize::MAX))
            .linear_memory_keep_resident(usize::try_from(limits.memory_keep_resident_bytes).unwrap_or(0))
            .pagemap_scan(wasmtime::Enabled::Auto);
        if limits.memory_keep_resident_bytes > 0 {
            pool.table_keep_resident(TABLE_KEEP_RESIDENT);
        }
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

/// One thread bumps the epoch; it holds only a weak engine reference, so it
/// ends when the engine is dropped.
fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("handler-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch ticker thread");
}

/// Groups become URL segments and object-store prefixes: keep them plain,
/// and off the names the API itself uses.
fn check_description(description: &HandlerDescription) -> Result<(), String> {
    const RESERVED: &[&str] = &[
        "files",
        "prompts",
        "conversations",
        "applications",
        "toolsets",
        "metadata",
        "versions",
        "ops",
        "bucket",
        "invitations",
        "consent",
        "deleted",
        "deployments",
        "publications",
        "types",
        "v",
        "v1",
        "v2",
    ];
    let group = &description.group;
    let plain = |text: &str| {
        !text.is_empty()
            && text.len() <= 64
            && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    };
    if !plain(group) {
        return Err(format!("group '{group}' must be 1-64 lowercase letters, digits, '-' or '_'"));
    }
    if RESERVED.contains(&group.as_str()) {
        return Err(format!("group '{group}' is reserved by the API"));
    }
    if !plain(&description.type_name) {
        return Err(format!(
            "type name '{}' must be 1-64 lowercase letters, digits, '-' or '_'",
            description.type_name
        ));
    }
    if description.handler_version.trim().is_empty() {
        return Err("handler version is empty".into());
    }
    Ok(())
}

fn problems(list: Vec<bindings::Problem>) -> Vec<Problem> {
    list.into_iter().map(Into::into).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the first bytes say a file is, before wasmtime is asked (whose
/// errors for non-WebAssembly input quote the bytes).
fn check_component_header(wasm: &[u8]) -> Result<(), LoadError> {
    const MAGIC: &[u8] = b"\0asm";
    const CORE_MODULE: [u8; 4] = [1, 0, 0, 0];
    match wasm.get(..8) {
        None if wasm.is_empty() => Err(LoadError::NotAComponent("the file is empty")),
        _ if !wasm.starts_with(MAGIC) => {
            Err(LoadError::NotAComponent("the file does not start with the WebAssembly magic bytes (\\0asm)"))
        }
        None => Err(LoadError::NotAComponent("the file ends inside the WebAssembly header")),
        Some(header) if header[4..8] == CORE_MODULE => Err(LoadError::NotAComponent(
            "it is a core WebAssembly module; build a component (cargo build --target wasm32-wasip2)",
        )),
        Some(_) => Ok(()),
    }
}

/// SHA-256 of a component, hex: its identity in the cache and the registry.
pub(super) fn sha256_hex(wasm: &[u8]) -> String {
    hex(&Sha256::digest(wasm))
}
