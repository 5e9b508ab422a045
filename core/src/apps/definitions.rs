//! Stored application definitions as calls read them: parsed once per
//! etag, kept within a byte bound, loaded once for concurrent callers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::Application;

/// Stored definitions already parsed, by URL, each with the etag it was
/// parsed at: a call reads the definition only when it changed (a
/// conditional read), so many calls to an application with a large
/// definition do not each parse it. Bounded by an estimate of the bytes
/// the parsed definitions hold (least recently used go first); a missing
/// or changed definition is loaded by one caller at a time per URL
/// ([`StoredDefinitions::loading`]), and the definitions being read and
/// parsed at once hold at most [`LOADING_BYTES`] between them
/// ([`StoredDefinitions::reserve`]).
pub struct StoredDefinitions {
    parsed: Mutex<Parsed>,
    max_bytes: usize,
    /// One loader per URL: the others wait, then find what it parsed.
    loaders: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// What loads hold, in [`LOADING_UNIT`]s.
    loads: Arc<tokio::sync::Semaphore>,
}

struct Parsed {
    lru: hashlink::LruCache<String, ParsedEntry>,
    bytes: usize,
}

struct ParsedEntry {
    etag: String,
    application: Arc<Application>,
    bytes: usize,
}

/// What definitions being read and parsed at once may hold, in all.
const LOADING_BYTES: usize = 32 << 20;
const LOADING_UNIT: usize = 64 << 10;
/// A parsed definition's memory per byte of its JSON, pessimistically:
/// a short string or list item costs a few bytes of JSON and a few dozen
/// in memory.
const PARSED_PER_JSON_BYTE: usize = 8;

impl Default for StoredDefinitions {
    fn default() -> Self {
        Self::new(64 << 20)
    }
}

impl StoredDefinitions {
    /// Keeps parsed definitions up to an estimated `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            parsed: Mutex::new(Parsed { lru: hashlink::LruCache::new_unbounded(), bytes: 0 }),
            max_bytes,
            loaders: Mutex::default(),
            loads: Arc::new(tokio::sync::Semaphore::new(LOADING_BYTES / LOADING_UNIT)),
        }
    }

    /// The etag and definition last parsed for `url`.
    pub fn get(&self, url: &str) -> Option<(String, Arc<Application>)> {
        let mut parsed = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        parsed.lru.get(url).map(|entry| (entry.etag.clone(), entry.application.clone()))
    }

    /// Keeps `application`, parsed from `definition_bytes` of JSON at `etag`.
    pub fn insert(&self, url: String, etag: String, application: Arc<Application>, definition_bytes: usize) {
        let bytes = definition_bytes.saturating_mul(PARSED_PER_JSON_BYTE) + url.len() + etag.len() + 256;
        if bytes > self.max_bytes {
            return;
        }
        let mut parsed = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(replaced) = parsed.lru.insert(url, ParsedEntry { etag, application, bytes }) {
            parsed.bytes -= replaced.bytes;
        }
        parsed.bytes += bytes;
        while parsed.bytes > self.max_bytes {
            let Some((_, evicted)) = parsed.lru.remove_lru() else { break };
            parsed.bytes -= evicted.bytes;
        }
        crate::metrics::definition_cache(parsed.bytes);
    }

    /// The estimated bytes kept now, and the definitions.
    pub fn size(&self) -> (usize, usize) {
        let parsed = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        (parsed.bytes, parsed.lru.len())
    }

    /// Waits until no other caller is loading `url`, then holds that turn
    /// while this one reads and parses it; whoever waited looks at
    /// [`StoredDefinitions::get`] again.
    pub async fn loading(&self, url: &str) -> Loading<'_> {
        let mutex = {
            let mut loaders = self.loaders.lock().unwrap_or_else(PoisonError::into_inner);
            loaders.entry(url.to_string()).or_default().clone()
        };
        let turn = mutex.clone().lock_owned().await;
        Loading { definitions: self, url: url.to_string(), mutex, _turn: turn }
    }

    /// Waits until a definition of `bytes` may be read and parsed: the
    /// loads running at once hold at most [`LOADING_BYTES`] (a larger one
    /// runs alone).
    pub async fn reserve(&self, bytes: u64) -> tokio::sync::OwnedSemaphorePermit {
        let all = LOADING_BYTES / LOADING_UNIT;
        let units = usize::try_from(bytes).unwrap_or(usize::MAX).div_ceil(LOADING_UNIT).clamp(1, all);
        let units = u32::try_from(units).expect("at most LOADING_BYTES / LOADING_UNIT units");
        self.loads.clone().acquire_many_owned(units).await.expect("the semaphore is never closed")
    }
}

/// A caller's turn to load one definition ([`StoredDefinitions::loading`]).
pub struct Loading<'d> {
    definitions: &'d StoredDefinitions,
    url: String,
    mutex: Arc<tokio::sync::Mutex<()>>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        // The last one out removes the URL's loader (the map's and this one
        // are then the only references).
        let mut loaders = self.definitions.loaders.lock().unwrap_or_else(PoisonError::into_inner);
        if Arc::strong_count(&self.mutex) <= 3 && loaders.get(&self.url).is_some_and(|m| Arc::ptr_eq(m, &self.mutex)) {
            loaders.remove(&self.url);
        }
    }
}
