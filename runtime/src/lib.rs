//! Folder-resource handlers: WebAssembly components that carry a type's rules.
//!
//! - [`handler`]: [`Handler`], what the engine calls.
//! - [`types`]: the plain types a call takes and gives.
//! - [`runtime`]: the wasmtime engine, the sandbox (CPU deadline, memory cap,
//!   read budget, fresh instance per call) and the calls into a component
//!   (`runtime/call_state.rs`: what one call's store holds and the host side
//!   of its imports).
//! - [`cache`]: compiled components kept on disk between starts.
//! - [`registry`]: which handler serves which URL group; loads the built-in
//!   skill handler and every `*.wasm` in `handlers.dir`.
//! - [`oci`]: handler components pulled from an OCI registry by digest,
//!   cached on disk, and `handler push`.
//! - [`files`]: [`FileSource`], where a handler's `files.read` import gets
//!   bytes from — the one interface the engine implements.
//! - [`config`]: the `[handlers]` section of the configuration.
//!
//! The rest of the host sees [`Handler`] and the plain types; nothing
//! outside this module touches wasmtime.

mod bindings;
pub mod cache;
pub mod config;
pub mod files;
pub mod handler;
pub mod metrics;
pub mod oci;
pub mod registry;
pub mod runtime;
pub mod types;

pub use cache::CacheConfig;
pub use files::{FileSource, InMemoryFiles, ReadError};
pub use handler::Handler;
pub use registry::{BUILTIN_SKILL_HANDLER, GUEST_WASM_DIR, HandlerRegistry, RegistryError, ReloadReport};
pub use runtime::{LoadError, Runtime, RuntimeLimits};
pub use types::{
    Checked, FileEntry, HandlerDescription, HandlerError, HandlerErrorKind, HandlerSource, LimitOverrides, Mutation,
    Problem, ResourceInfo, Verdict,
};

/// The `tracing` target of the spans exported as OpenTelemetry traces (the
/// host's `telemetry` exports exactly these, and nothing logs them): a
/// request, and the store, Redis, handler and application calls in it. With
/// no exporter configured no subscriber enables the target, so such a span
/// costs one cached-interest check and its fields are never evaluated.
pub const TRACE_SPANS: &str = "dial_host::trace";
