//! Per-request keys: the short-lived `Api-Key` an application gets for one
//! call (SPEC §8, "8–9 in detail").
//!
//! A key is 32 URL-safe characters from the OS's CSPRNG, minted when the
//! host forwards a call to an application and revoked when the call ends
//! (the response relayed, the client gone, or the upstream failed); a key
//! whose holder never came back expires with `per_request_key.ttl_seconds`.
//! The store keeps, per key, who the chain of calls started from, which
//! application holds the key, the execution path, the trace id and the
//! grants (attachments, later dependencies). In-process by default; in Redis
//! when `redis.url` is set, so a key minted by one instance works on every
//! other (the app may call back through any of them).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Identity;
use crate::buckets::BucketLocation;
use crate::folders::engine::now_ms;

/// Characters a key is drawn from (DIAL's alphabet: `0-9a-z-_A-Z`).
const KEY_ALPHABET: &[u8; 64] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_";
pub const KEY_LENGTH: usize = 32;

/// The human (or project) a chain of calls started from. Every key of the
/// chain acts for them: their shares and the public rules as they see them —
/// never their own bucket, never admin rights.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Originator {
    pub identity: Identity,
    pub roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Value>,
}

/// Access a key holds on one URL (a folder URL, ending in `/`, covers what is
/// below it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyGrant {
    pub url: String,
    pub read: bool,
    pub write: bool,
}

/// What a key stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyData {
    pub user: Originator,
    /// The deployment id of the application holding the key.
    pub app: String,
    /// The application's name as one path segment: its own bucket is
    /// `Keys/<app_id>/`, its appdata folder `appdata/<app_id>/` in the
    /// user's bucket.
    pub app_id: String,
    /// Deployment ids from the root call to this one.
    pub execution_path: Vec<String>,
    pub trace_id: String,
    pub grants: Vec<KeyGrant>,
    /// Milliseconds since the Unix epoch.
    pub expires_at: i64,
}

impl KeyData {
    /// The application's own bucket.
    pub fn app_bucket(&self) -> BucketLocation {
        BucketLocation::Key(self.app_id.clone())
    }

    /// The user's bucket, where the application's appdata folder lives.
    pub fn user_bucket(&self) -> BucketLocation {
        match &self.user.identity {
            Identity::User { id } => BucketLocation::User(id.clone()),
            Identity::Project { name } => BucketLocation::Key(name.clone()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    #[error("the key store (Redis) is unavailable: {0}")]
    Unavailable(String),
}

type KeyFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, KeyStoreError>> + Send + 'a>>;

/// Where keys live while their call runs.
pub trait KeyStore: Send + Sync {
    /// Stores `data` under a fresh key and returns the key.
    fn mint(&self, data: KeyData) -> KeyFuture<'_, String>;
    /// What a live key stands for; `None` when unknown, revoked or expired.
    fn get<'a>(&'a self, key: &'a str) -> KeyFuture<'a, Option<Arc<KeyData>>>;
    /// Ends a key (idempotent).
    fn revoke(&self, key: String) -> KeyFuture<'_, ()>;
    /// Keys alive now (for metrics and tests); Redis counts this prefix.
    fn alive(&self) -> KeyFuture<'_, usize>;
}

/// The Redis store when a connection is given, the in-process one otherwise.
pub fn from_config(redis: Option<&ConnectionManager>, key_prefix: &str) -> Arc<dyn KeyStore> {
    match redis {
        Some(connection) => Arc::new(RedisKeys { connection: connection.clone(), prefix: format!("{key_prefix}prk:") }),
        None => Arc::new(InProcessKeys::default()),
    }
}

/// A fresh key: 32 characters of a 64-character alphabet, 192 random bits.
pub fn new_key() -> String {
    let mut bytes = [0u8; KEY_LENGTH];
    rand::fill(&mut bytes);
    bytes.iter().map(|b| char::from(KEY_ALPHABET[usize::from(b & 63)])).collect()
}

/// Whether a header value could be a per-request key (saves a store lookup
/// for anything else).
pub fn looks_like_key(value: &str) -> bool {
    value.len() == KEY_LENGTH && value.bytes().all(|b| KEY_ALPHABET.contains(&b))
}

/// Keys of one process. Expired entries are dropped as the map grows.
#[derive(Default)]
pub struct InProcessKeys {
    keys: Mutex<HashMap<String, Arc<KeyData>>>,
}

impl KeyStore for InProcessKeys {
    fn mint(&self, data: KeyData) -> KeyFuture<'_, String> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let now = now_ms();
        if keys.len() > 1024 && keys.len().is_power_of_two() {
            keys.retain(|_, data| data.expires_at > now);
        }
        let key = loop {
            let key = new_key();
            if !keys.contains_key(&key) {
                break key;
            }
        };
        keys.insert(key.clone(), Arc::new(data));
        Box::pin(std::future::ready(Ok(key)))
    }

    fn get<'a>(&'a self, key: &'a str) -> KeyFuture<'a, Option<Arc<KeyData>>> {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let found = keys.get(key).filter(|data| data.expires_at > now_ms()).cloned();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn revoke(&self, key: String) -> KeyFuture<'_, ()> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
        Box::pin(std::future::ready(Ok(())))
    }

    fn alive(&self) -> KeyFuture<'_, usize> {
        let now = now_ms();
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        Box::pin(std::future::ready(Ok(keys.values().filter(|data| data.expires_at > now).count())))
    }
}

/// Keys shared by every instance: `SET <prefix><key> <json> NX PX <ttl>`.
pub struct RedisKeys {
    connection: ConnectionManager,
    prefix: String,
}

impl RedisKeys {
    fn unavailable(error: redis::RedisError) -> KeyStoreError {
        KeyStoreError::Unavailable(error.to_string())
    }
}

impl KeyStore for RedisKeys {
    fn mint(&self, data: KeyData) -> KeyFuture<'_, String> {
        Box::pin(async move {
            let ttl_ms = u64::try_from(data.expires_at - now_ms()).unwrap_or(0).max(1);
            let json = serde_json::to_string(&data).expect("key data serializes");
            let mut connection = self.connection.clone();
            loop {
                let key = new_key();
                let set: Option<String> = redis::cmd("SET")
                    .arg(format!("{}{key}", self.prefix))
                    .arg(&json)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut connection)
                    .await
                    .map_err(Self::unavailable)?;
                if set.is_some() {
                    return Ok(key);
                }
            }
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> KeyFuture<'a, Option<Arc<KeyData>>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let json: Option<String> = redis::cmd("GET")
                .arg(format!("{}{key}", self.prefix))
                .query_async(&mut connection)
                .await
                .map_err(Self::unavailable)?;
            Ok(json.and_then(|json| serde_json::from_str(&json).ok()).map(Arc::new))
        })
    }

    fn revoke(&self, key: String) -> KeyFuture<'_, ()> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let _: i64 = redis::cmd("DEL")
                .arg(format!("{}{key}", self.prefix))
                .query_async(&mut connection)
                .await
                .map_err(Self::unavailable)?;
            Ok(())
        })
    }

    fn alive(&self) -> KeyFuture<'_, usize> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let mut cursor = 0u64;
            let mut count = 0;
            loop {
                let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("{}*", self.prefix))
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut connection)
                    .await
                    .map_err(Self::unavailable)?;
                count += keys.len();
                if next == 0 {
                    return Ok(count);
                }
                cursor = next;
            }
        })
    }
}

/// A minted key that is revoked when this guard goes away: the guard rides
/// with the relayed response body, so the key ends when the response has been
/// relayed, the client went away or the upstream failed — whichever is first.
pub struct KeyLease {
    store: Arc<dyn KeyStore>,
    key: Option<String>,
}

impl KeyLease {
    pub fn new(store: Arc<dyn KeyStore>, key: String) -> Self {
        crate::metrics::key_minted();
        Self { store, key: Some(key) }
    }

    pub fn key(&self) -> &str {
        self.key.as_deref().unwrap_or_default()
    }
}

impl Drop for KeyLease {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        crate::metrics::key_revoked();
        let store = self.store.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(error) = store.revoke(key).await {
                        tracing::warn!(%error, "could not revoke a per-request key; it expires with its TTL");
                    }
                });
            }
            Err(_) => tracing::warn!("no async runtime to revoke a per-request key; it expires with its TTL"),
        }
    }
}

/// How long a key may live at most.
pub fn expiry(ttl: Duration) -> i64 {
    now_ms() + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(expires_at: i64) -> KeyData {
        KeyData {
            user: Originator {
                identity: Identity::User { id: "alice".into() },
                roles: vec!["user".into()],
                claims: None,
            },
            app: "echo".into(),
            app_id: "echo".into(),
            execution_path: vec!["alice".into(), "echo".into()],
            trace_id: "t".into(),
            grants: vec![],
            expires_at,
        }
    }

    #[test]
    fn keys_are_32_url_safe_random_characters() {
        let (a, b) = (new_key(), new_key());
        assert_eq!(a.len(), 32);
        assert!(looks_like_key(&a) && looks_like_key(&b));
        assert_ne!(a, b);
        assert!(!looks_like_key("short") && !looks_like_key(&"+".repeat(32)));
    }

    #[tokio::test]
    async fn in_process_keys_live_until_revoked_or_expired() {
        let store = InProcessKeys::default();
        let key = store.mint(data(expiry(Duration::from_secs(60)))).await.unwrap();
        assert_eq!(store.get(&key).await.unwrap().unwrap().app, "echo");
        assert_eq!(store.alive().await.unwrap(), 1);
        store.revoke(key.clone()).await.unwrap();
        assert!(store.get(&key).await.unwrap().is_none());
        let expired = store.mint(data(now_ms() - 1)).await.unwrap();
        assert!(store.get(&expired).await.unwrap().is_none(), "an expired key is unknown");
        assert_eq!(store.alive().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_lease_revokes_its_key_when_dropped() {
        let store: Arc<dyn KeyStore> = Arc::new(InProcessKeys::default());
        let key = store.mint(data(expiry(Duration::from_secs(60)))).await.unwrap();
        let lease = KeyLease::new(store.clone(), key.clone());
        assert_eq!(lease.key(), key);
        drop(lease);
        for _ in 0..100 {
            if store.get(&key).await.unwrap().is_none() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the key outlived its lease");
    }
}
