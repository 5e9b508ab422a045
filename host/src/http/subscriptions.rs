//! Open change-feed subscriptions per caller on this instance, bounded by
//! `feed.max_subscriptions_per_caller`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::error::ApiError;
use crate::auth::Caller;

/// Open subscriptions per caller on this instance.
pub struct Subscriptions {
    max: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open subscription, counted until it is dropped (the stream ended or
/// the client went away).
pub(super) struct Slot {
    open: Arc<Mutex<HashMap<String, usize>>>,
    caller: String,
}

impl Subscriptions {
    pub fn new(max: usize) -> Self {
        Self { max: max.max(1), open: Arc::default() }
    }

    /// A slot for `caller`, or 429 when they hold the most allowed.
    pub(super) fn take(&self, caller: &Caller) -> Result<Slot, ApiError> {
        // An application's key is a caller of its own (for the same user).
        let who = match &caller.per_request {
            Some(key) => format!("{:?}/{}", caller.identity, key.app),
            None => format!("{:?}", caller.identity),
        };
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(who.clone()).or_default();
        if *count >= self.max {
            return Err(ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                format!("At most {} subscriptions may be open at once (feed.max_subscriptions_per_caller)", self.max),
            ));
        }
        *count += 1;
        Ok(Slot { open: self.open.clone(), caller: who })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.caller) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.caller);
            }
        }
    }
}
