//! The GC journal: before a mutation writes bytes that may become garbage,
//! it appends an entry (`.dial-host/gc/<time>-<id>.json`) naming them; the
//! sweep ([`super::sweep`]) reads only the journal.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use super::error::FolderError;
use crate::clock::{new_id, now_ms};

pub(super) const JOURNAL_PREFIX: &str = ".dial-host/gc";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct JournalEntry {
    /// The resource's storage prefix.
    pub(super) base: String,
    /// A version that may become garbage; `None` for a delete.
    pub(super) version: Option<String>,
}

/// Appends entries to the journal.
pub struct GcJournal {
    store: Arc<dyn ObjectStore>,
}

impl GcJournal {
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self { store }
    }

    /// Journals that `version` of the resource at `base` (or, with `None`,
    /// the resource itself) may become garbage; returns the entry's location.
    pub async fn record(&self, base: &Path, version: Option<&str>) -> Result<Path, FolderError> {
        let entry = JournalEntry { base: base.to_string(), version: version.map(Into::into) };
        let name = format!("{:016}-{}.json", now_ms(), new_id());
        let payload = PutPayload::from(serde_json::to_vec(&entry).expect("journal entries serialise"));
        let location = Path::from(JOURNAL_PREFIX).join(name);
        self.store.put(&location, payload).await?;
        Ok(location)
    }

    /// Drops the staging entry of a version just committed, in the
    /// background. From the commit on, whatever unreferences the version
    /// journals it anew; left in place, the staging entry would fall due
    /// first and let the sweep delete a version dropped soon after its
    /// staging less than a grace period after the drop, under its readers.
    /// (Should the delete fail or the process die first, that narrow case is
    /// all it costs: the sweep still finds every unreferenced version.)
    pub fn forget_staged(&self, entry: Path) {
        let store = self.store.clone();
        tokio::spawn(async move {
            match store.delete(&entry).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => tracing::debug!(%entry, %error, "staging entry left for the sweep"),
            }
        });
    }
}
