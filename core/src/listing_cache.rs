//! What a listing learned from reading an object, kept by the object's
//! location and the etag the store listed it with.
//!
//! A listing gets every entry's `ObjectMeta` (location, `e_tag`, size) from
//! the store's listing itself; what it shows beyond that (a v1 item's
//! content type and MD5 etag from its trailer, a v2 resource's name,
//! description and version from its marker) needs a read — unless this
//! cache holds what a read of that very version gave. The store gives a
//! changed object a new etag, so an entry is never stale: a commit made on
//! any instance is seen by the next listing on every other, with no
//! invalidation traffic. An object listed without an etag is never cached.
//!
//! Bounded by entries and by an estimate of the bytes they hold (least
//! recently used go first), both configurable with `listings.cache_entries`
//! and `listings.cache_mib`; each cache (v1 trailers, v2 markers) has its own.

use std::sync::{Mutex, PoisonError};

use hashlink::LruCache;
use object_store::ObjectMeta;
use object_store::path::Path;

/// `listings.cache_entries` by default.
pub const DEFAULT_LISTING_CACHE_ENTRIES: usize = 100_000;
/// `listings.cache_mib` by default: per cache.
pub const DEFAULT_LISTING_CACHE_MIB: usize = 64;

/// What an entry costs besides its value: the key, the etag, the LRU links.
const ENTRY_OVERHEAD: usize = 160;

/// Parsed objects by (location, etag).
pub struct EtagCache<T> {
    inner: Mutex<Entries<T>>,
    max_entries: usize,
    max_bytes: usize,
}

struct Entries<T> {
    lru: LruCache<Path, Entry<T>>,
    bytes: usize,
}

struct Entry<T> {
    etag: String,
    value: T,
    bytes: usize,
}

impl<T: Clone> EtagCache<T> {
    /// Keeps at most `max_entries` entries (0: keeps none), and at most
    /// `max_bytes` of them by [`EtagCache::insert`]'s estimates.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self { inner: Mutex::new(Entries { lru: LruCache::new_unbounded(), bytes: 0 }), max_entries, max_bytes }
    }

    /// What was read from the version `object` names, if it is kept.
    pub fn get(&self, object: &ObjectMeta) -> Option<T> {
        let etag = object.e_tag.as_deref()?;
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match inner.lru.get(&object.location) {
            Some(entry) if entry.etag == etag => Some(entry.value.clone()),
            _ => None,
        }
    }

    /// Keeps `value`, read from the version `object` names (its etag must be
    /// the one the read was pinned to); `bytes` is what the value holds in
    /// memory, as near as the caller can tell.
    pub fn insert(&self, object: &ObjectMeta, value: T, bytes: usize) {
        let Some(etag) = object.e_tag.clone() else { return };
        let bytes = bytes + ENTRY_OVERHEAD + object.location.as_ref().len() + etag.len();
        if self.max_entries == 0 || bytes > self.max_bytes {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(replaced) = inner.lru.insert(object.location.clone(), Entry { etag, value, bytes }) {
            inner.bytes -= replaced.bytes;
        }
        inner.bytes += bytes;
        while inner.lru.len() > self.max_entries || inner.bytes > self.max_bytes {
            let Some((_, evicted)) = inner.lru.remove_lru() else { break };
            inner.bytes -= evicted.bytes;
        }
    }

    /// Entries kept now.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).lru.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The estimated bytes kept now.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &str, etag: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            location: Path::from(path),
            last_modified: Default::default(),
            size: 1,
            e_tag: etag.map(str::to_string),
            version: None,
        }
    }

    #[test]
    fn an_entry_answers_only_its_own_version_and_the_bound_holds() {
        let cache = EtagCache::new(2, usize::MAX);
        cache.insert(&meta("a", Some("1")), "a1", 2);
        assert_eq!(cache.get(&meta("a", Some("1"))), Some("a1"));
        assert_eq!(cache.get(&meta("a", Some("2"))), None, "a new version is read again");
        cache.insert(&meta("a", Some("2")), "a2", 2);
        assert_eq!(cache.get(&meta("a", Some("1"))), None, "the old version is gone");
        cache.insert(&meta("no-etag", None), "x", 1);
        assert_eq!(cache.get(&meta("no-etag", None)), None, "nothing without an etag");
        cache.insert(&meta("b", Some("1")), "b1", 2);
        cache.get(&meta("a", Some("2")));
        cache.insert(&meta("c", Some("1")), "c1", 2);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&meta("b", Some("1"))), None, "the least recently used went first");
        assert_eq!(cache.get(&meta("a", Some("2"))), Some("a2"));
        let none = EtagCache::new(0, usize::MAX);
        none.insert(&meta("a", Some("1")), "a1", 2);
        assert!(none.is_empty());
    }

    #[test]
    fn the_byte_bound_holds_whatever_the_entries_weigh() {
        let one = ENTRY_OVERHEAD + 1 + 1 + 1000;
        let cache = EtagCache::new(1000, 3 * one);
        for (index, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
            cache.insert(&meta(name, Some("1")), index, 1000);
            assert!(cache.bytes() <= 3 * one);
        }
        assert_eq!(cache.len(), 3, "the fourth pushed out the least recently used");
        assert_eq!(cache.get(&meta("a", Some("1"))), None);
        cache.insert(&meta("b", Some("1")), 9, 1000);
        assert_eq!(cache.bytes(), 3 * one, "a replaced entry's bytes are not counted twice");
        cache.insert(&meta("huge", Some("1")), 0, 10 * one);
        assert_eq!(cache.get(&meta("huge", Some("1"))), None, "a value larger than the bound is not kept");
        assert_eq!(cache.len(), 3, "and pushes nothing out");
    }
}
