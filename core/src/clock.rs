//! Time and ids: milliseconds since the epoch (every timestamp the host
//! stores) and the random ids of versions, commits and journal entries.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::hashing::hex;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A random, sortable-enough, URL- and store-safe id.
pub fn new_id() -> String {
    let mut bytes = [0u8; 12];
    rand::fill(&mut bytes);
    format!("{:012x}{}", now_ms(), hex(&bytes))
}
