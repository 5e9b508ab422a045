//! The runtime's section of the configuration file (`[handlers]`): the
//! sandbox limits, where extra handlers and compiled components live, and
//! the per-type settings (`[handlers.types.<group>]`). The host's one TOML
//! file composes it with the other sections (`config.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::oci::{OciReference, PullSettings};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandlersConfig {
    /// Extra handlers: every `*.wasm` in this directory is loaded at start.
    pub dir: Option<PathBuf>,
    /// Compiled components, keyed by engine and content hash. Unset: `<data_dir>/handler-cache`.
    pub cache_dir: Option<PathBuf>,
    /// CPU time one handler call may use before it is stopped.
    pub cpu_deadline_ms: u64,
    /// Wall-clock bound on one call, including the time it waits on file reads.
    pub wall_deadline_ms: u64,
    /// Linear-memory cap of one handler instance.
    pub memory_limit_mib: u64,
    /// Bytes one handler call may read through the `files` import.
    pub read_budget_bytes: u64,
    /// Handler calls running at once; more wait their turn.
    pub max_concurrent_calls: u32,
    /// Use the pooling instance allocator when the address space allows it.
    pub pooling: bool,
    /// Pooling only: how much of each instance slot's memory stays resident
    /// between calls, its dirty pages reset in place instead of being
    /// returned to the kernel (no page faults, no TLB-flush IPIs on the next
    /// call). Unset: 1024 where Linux's `PAGEMAP_SCAN` lets the reset touch
    /// only the pages a call dirtied (kernel 6.7+), else 0 — without it the
    /// reset would `memset` the whole region every call.
    pub memory_keep_resident_kib: Option<u64>,
    /// Longest a pull of an `oci://` handler (manifest and component) may take.
    pub oci_timeout_seconds: u64,
    /// Largest component an `oci://` pull accepts, in MiB.
    pub oci_max_mib: u64,
    /// Registries (`host:port`) pulled from over plain HTTP; loopback ones
    /// (`localhost`, `127.0.0.0/8`, `[::1]`) always are.
    pub oci_insecure_registries: Vec<String>,
    /// Per-type settings, keyed by URL group (e.g. `[handlers.types.skills]`).
    pub types: BTreeMap<String, TypeSettings>,
}

impl Default for HandlersConfig {
    fn default() -> Self {
        Self {
            dir: None,
            cache_dir: None,
            cpu_deadline_ms: 200,
            wall_deadline_ms: 10_000,
            memory_limit_mib: 64,
            read_budget_bytes: 16 << 20,
            max_concurrent_calls: 32,
            pooling: true,
            memory_keep_resident_kib: None,
            oci_timeout_seconds: 60,
            oci_max_mib: 64,
            oci_insecure_registries: Vec::new(),
            types: BTreeMap::new(),
        }
    }
}

impl HandlersConfig {
    /// The types whose handler comes from an OCI registry, by group; a
    /// `source` that is not a pinned `oci://…@sha256:…` reference is an error
    /// naming the key and what to write instead.
    pub fn oci_sources(&self) -> Result<BTreeMap<String, OciReference>, String> {
        let mut sources = BTreeMap::new();
        for (group, settings) in &self.types {
            if let Some(source) = &settings.source {
                let reference = OciReference::parse_pinned(source)
                    .map_err(|error| format!("handlers.types.{group}.source: {error}"))?;
                sources.insert(group.clone(), reference);
            }
        }
        Ok(sources)
    }

    /// Checks what can be checked without loading anything.
    pub fn check(&self) -> Result<(), String> {
        if self.oci_timeout_seconds == 0 || self.oci_max_mib == 0 {
            return Err("handlers.oci_timeout_seconds and handlers.oci_max_mib must be at least 1".into());
        }
        self.oci_sources().map(|_| ())
    }

    /// How `oci://` pulls are bounded.
    pub fn pull_settings(&self) -> PullSettings {
        PullSettings {
            timeout: std::time::Duration::from_secs(self.oci_timeout_seconds.max(1)),
            max_bytes: self.oci_max_mib.max(1) << 20,
            insecure_registries: self.oci_insecure_registries.clone(),
        }
    }
}

/// Settings of one folder-resource type.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TypeSettings {
    /// Where the type's handler comes from when not from `handlers.dir`:
    /// `oci://<registry>/<repository>@sha256:<digest>` (docs/handlers.md).
    pub source: Option<String>,
    /// Turn the handler's warnings into errors.
    pub strict: bool,
    pub max_file_bytes: Option<u64>,
    pub max_files: Option<u32>,
    pub max_total_bytes: Option<u64>,
    /// Version retention of this type; unset: `folders.keep_versions` / `keep_versions_days`.
    pub keep_versions: Option<u32>,
    pub keep_versions_days: Option<f64>,
    /// How much of this type one bucket may hold; unset: no limit.
    pub quota: Option<TypeQuota>,
}

/// A per-bucket quota of one type (`[handlers.types.<group>.quota]`),
/// checked when a commit would grow what the bucket holds: a resource
/// created or restored counts one, and the bytes are those of every
/// resource's current version (retained versions are bounded by
/// `keep_versions` instead).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TypeQuota {
    pub max_resources: Option<u64>,
    pub max_bytes: Option<u64>,
}
