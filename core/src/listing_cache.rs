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
//! Bounded by entries (least recently used go first), configurable per
//! cache with `listings.cache_entries`.

use std::sync::{Mutex, PoisonError};

use hashlink::LruCache;
use object_store::ObjectMeta;
use object_store::path::Path;

/// `listings.cache_entries` by default: at a few hundred bytes an entry, a
/// few tens of MiB per cache.
pub const DEFAULT_LISTING_CACHE_ENTRIES: usize = 100_000;

/// Parsed objects by (location, etag).
pub struct EtagCache<T> {
    entries: Mutex<LruCache<Path, (String, T)>>,
}

impl<T: Clone> EtagCache<T> {
    /// Keeps at most `capacity` entries (0: keeps none).
    pub fn new(capacity: usize) -> Self {
        Self { entries: Mutex::new(LruCache::new(capacity)) }
    }

    /// What was read from the version `object` names, if it is kept.
    pub fn get(&self, object: &ObjectMeta) -> Option<T> {
        let etag = object.e_tag.as_deref()?;
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(&object.location) {
            Some((kept, value)) if kept == etag => Some(value.clone()),
            _ => None,
        }
    }

    /// Keeps `value`, read from the version `object` names (its etag must be
    /// the one the read was pinned to).
    pub fn insert(&self, object: &ObjectMeta, value: T) {
        let Some(etag) = object.e_tag.clone() else { return };
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.capacity() > 0 {
            entries.insert(object.location.clone(), (etag, value));
        }
    }

    /// Entries kept now.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        let cache = EtagCache::new(2);
        cache.insert(&meta("a", Some("1")), "a1");
        assert_eq!(cache.get(&meta("a", Some("1"))), Some("a1"));
        assert_eq!(cache.get(&meta("a", Some("2"))), None, "a new version is read again");
        cache.insert(&meta("a", Some("2")), "a2");
        assert_eq!(cache.get(&meta("a", Some("1"))), None, "the old version is gone");
        cache.insert(&meta("no-etag", None), "x");
        assert_eq!(cache.get(&meta("no-etag", None)), None, "nothing without an etag");
        cache.insert(&meta("b", Some("1")), "b1");
        cache.get(&meta("a", Some("2")));
        cache.insert(&meta("c", Some("1")), "c1");
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&meta("b", Some("1"))), None, "the least recently used went first");
        assert_eq!(cache.get(&meta("a", Some("2"))), Some("a2"));
        let none = EtagCache::new(0);
        none.insert(&meta("a", Some("1")), "a1");
        assert!(none.is_empty());
    }
}
