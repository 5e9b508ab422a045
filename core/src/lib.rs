//! dial-core: the domain of dial-host. Resources and their URLs, buckets,
//! access (with sharing and the public rules), the folder engine (v2), the
//! v1 blob store, applications, consent, resource dependencies, per-request
//! keys, publication records and audit — over any `object_store` store, with
//! locks and events in-process or on Redis.
//!
//! It knows no HTTP: no router, no status codes, no HTTP client. The binary
//! (`dial-host`) maps its errors to DIAL's answers in one place and opens the
//! store a URL names. Handlers run in `dial-handler-runtime`, re-exported here
//! as [`handlers`]; the engine reads a version's files to them through
//! [`handlers::FileSource`].
//!
//! See `ARCHITECTURE.md` at the repository root for the map.

pub use dial_handler_runtime as handlers;

pub mod access;
pub mod agent_skills;
pub mod apps;
pub mod audit;
pub mod auth;
pub mod blob_resources;
pub mod blobs;
pub mod buckets;
pub mod catalog;
pub mod clock;
pub mod config;
pub mod consent;
pub mod dependencies;
pub mod documents;
pub mod etag;
pub mod events;
pub mod folder_resources;
pub mod folders;
pub mod hashing;
pub mod hosted_skills;
pub mod identity;
pub mod keys;
pub mod listing_cache;
pub mod locks;
pub mod metrics;
pub mod permissions;
pub mod publication;
pub mod redis_conn;
pub mod resource_url;
pub mod sharing;
pub mod skills_index;
pub mod storage;
