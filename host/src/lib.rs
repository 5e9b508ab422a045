//! dial-host: stores and serves resources for LLM applications with DIAL
//! Core's HTTP API. Folder-shaped resource types are WebAssembly components.
//!
//! See `ARCHITECTURE.md` at the repository root for the map.

pub mod access;
pub mod apps;
pub mod audit;
pub mod auth;
pub mod blobs;
pub mod buckets;
pub mod cli;
pub mod clock;
pub mod config;
pub mod consent;
pub mod dependencies;
pub mod documents;
pub mod etag;
pub mod events;
pub mod folders;
pub mod handlers;
pub mod hashing;
pub mod http;
pub mod identity;
pub mod keys;
pub mod listener;
pub mod listing_cache;
pub mod locks;
pub mod metrics;
pub mod permissions;
pub mod proxy;
pub mod publication;
pub mod redis_conn;
pub mod resource_url;
pub mod server;
pub mod sharing;
pub mod storage;
pub mod telemetry;
