//! What the configuration and the handler decide for one resource type:
//! its limits ([`FolderLimits`]) and which earlier versions it keeps
//! ([`Retention`]).

use serde::Serialize;

use super::marker::VersionRecord;
use crate::config::{FoldersConfig, TypeSettings};
use crate::handlers::Handler;

/// Limits of one resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderLimits {
    pub max_file_bytes: u64,
    pub max_files: u32,
    pub max_total_bytes: u64,
}

impl FolderLimits {
    /// Host defaults, then what the handler asks for, then the per-type
    /// configuration (the operator has the last word).
    pub fn resolve(defaults: &FoldersConfig, handler: &Handler, settings: Option<&TypeSettings>) -> Self {
        let asked = &handler.description().limits;
        let configured = settings.cloned().unwrap_or_default();
        Self {
            max_file_bytes: configured.max_file_bytes.or(asked.max_file_bytes).unwrap_or(defaults.max_file_bytes),
            max_files: configured.max_files.or(asked.max_files).unwrap_or(defaults.max_files),
            max_total_bytes: configured.max_total_bytes.or(asked.max_total_bytes).unwrap_or(defaults.max_total_bytes),
        }
    }
}

/// Which earlier versions of a resource stay readable and restorable
/// (SPEC §11): the newest `keep_versions` (the current one counts), and every
/// version younger than `keep_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub keep_versions: u32,
    pub keep_ms: i64,
}

impl Retention {
    pub fn resolve(defaults: &FoldersConfig, settings: Option<&TypeSettings>) -> Self {
        let settings = settings.cloned().unwrap_or_default();
        let days = settings.keep_versions_days.unwrap_or(defaults.keep_versions_days);
        Self {
            keep_versions: settings.keep_versions.unwrap_or(defaults.keep_versions).max(1),
            // Negative or NaN: none (the cast saturates, NaN becomes 0).
            keep_ms: (days.max(0.0) * 86_400_000.0) as i64,
        }
    }

    /// The history once `previous` (newest first: the version being
    /// superseded, then the marker's history) is no longer current, at
    /// `now`; and the versions to journal: those dropped, and those kept
    /// from now on for their age only (the sweep expires them). With
    /// `keep_newest` the first of `previous` stays whatever the count (it
    /// is newer than the current version, and a client may name it as the
    /// latest).
    pub fn apply(
        &self,
        previous: Vec<VersionRecord>,
        now: i64,
        keep_newest: bool,
    ) -> (Vec<VersionRecord>, Vec<String>) {
        let by_count = (self.keep_versions as usize - 1).max(usize::from(keep_newest));
        let mut kept = Vec::new();
        let mut journal = Vec::new();
        for (index, mut record) in previous.into_iter().enumerate() {
            if index < by_count {
                record.keep_until = None;
                kept.push(record);
                continue;
            }
            let until = record.created_at.saturating_add(self.keep_ms);
            if self.keep_ms > 0 && until > now {
                if record.keep_until.is_none() {
                    journal.push(record.version.clone());
                }
                record.keep_until = Some(until);
                kept.push(record);
            } else {
                journal.push(record.version);
            }
        }
        (kept, journal)
    }
}
