//! dial-host: stores and serves resources for LLM applications with DIAL
//! Core's HTTP API. Folder-shaped resource types are WebAssembly components.
//!
//! This crate is the binary's side: the router and its wire types, the
//! OpenAPI document, the proxy to applications, the listener, the server's
//! start and stop, telemetry and the CLI. The domain is `dial-core` and the
//! handler runtime `dial-handler-runtime`; their modules are re-exported
//! here under their own names, so `dial_host::folders` is the engine.
//!
//! See `ARCHITECTURE.md` at the repository root for the map.

pub use dial_core::{
    access, agent_skills, apps, audit, auth, blob_resources, blobs, buckets, catalog, clock, config, consent,
    dependencies, documents, etag, events, folder_resources, folders, handlers, hashing, hosted_skills, identity, keys,
    listing_cache, locks, metrics, permissions, publication, redis_conn, resource_url, sharing, skills_index, storage,
};

pub mod backends;
pub mod cli;
pub mod http;
pub mod listener;
pub mod proxy;
pub mod server;
pub mod telemetry;
