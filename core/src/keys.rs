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
//! when Redis is configured, so a key minted by one instance works on every
//! other (the app may call back through any of them).
//!
//! [`Keys`] is what the host holds: it mints a key as a [`KeyLease`] and
//! remembers every key it minted until its revoke has landed, so a graceful
//! stop revokes the keys of the calls it cuts off before the process exits.
//! In Redis a key is held for a short lease (`per_request_key.lease_seconds`)
//! renewed while its call lives, never past its TTL: a key whose instance
//! was killed outright dies within one lease instead of living out its TTL.
//!
//! A live key can change ([`KeyChange`]): the attachments of an answer it
//! received are granted to it, and its holder passes access on to an
//! application it calls (the per-request-permissions API). Changes are
//! appended, in order, beside the key — in Redis a list next to it that
//! lives and dies with it, so every instance sees them — and applied on
//! every read; at most [`MAX_KEY_CHANGES`] per key.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::buckets::BucketLocation;
use crate::clock::now_ms;
use crate::identity::Identity;
use crate::redis_conn::RedisConnection;

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

/// The key itself, kept beside what it stands for so a long-lived answer
/// (the change feed) can ask whether it is still alive. Never serialized,
/// never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyId(pub String);

impl std::fmt::Debug for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyId(…)")
    }
}

/// What a key stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyData {
    /// The key (set by the store on mint and lookup).
    #[serde(skip)]
    pub id: KeyId,
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
    /// What the application that called this key's holder passed on to it
    /// (per-request-permissions), bounded at use like `grants`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub received: Vec<KeyGrant>,
    /// What this key's holder passes on to the applications it calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed_on: Vec<PassedOn>,
    /// Milliseconds since the Unix epoch.
    pub expires_at: i64,
    /// How many of its [`MAX_KEY_CHANGES`] the key took (set by the store
    /// on lookup): what a request for more is refused by before anything
    /// else is checked.
    #[serde(skip)]
    pub changes_taken: usize,
}

/// Access a key's holder passes on to one application it calls: the key
/// minted for a call to `receiver` receives `grant`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassedOn {
    pub receiver: String,
    pub grant: KeyGrant,
}

/// A change to a live key, in the order it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "camelCase")]
pub enum KeyChange {
    /// The key gets `url` (an attachment of an answer it received).
    Grant { url: String, read: bool, write: bool },
    /// The holder passes access on to `receiver`.
    PassOn { receiver: String, url: String, read: bool, write: bool },
    /// The holder takes back what it passed on.
    Withdraw { receiver: String, url: String, read: bool, write: bool },
}

/// Changes one key may take at most.
pub const MAX_KEY_CHANGES: usize = 1000;

/// What became of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    Applied,
    /// The key is gone (revoked or expired).
    Gone,
    /// The key took [`MAX_KEY_CHANGES`] already.
    Full,
}

/// Adds `read`/`write` on `url` to `grants` (one entry per URL).
fn add_grant(grants: &mut Vec<KeyGrant>, url: &str, read: bool, write: bool) {
    match grants.iter_mut().find(|grant| grant.url == url) {
        Some(grant) => {
            grant.read |= read;
            grant.write |= write;
        }
        None => grants.push(KeyGrant { url: url.to_string(), read, write }),
    }
}

impl KeyData {
    /// Applies a change made to the live key.
    pub fn apply(&mut self, change: &KeyChange) {
        match change {
            KeyChange::Grant { url, read, write } => add_grant(&mut self.grants, url, *read, *write),
            KeyChange::PassOn { receiver, url, read, write } => {
                match self.passed_on.iter_mut().find(|p| p.receiver == *receiver && p.grant.url == *url) {
                    Some(passed) => {
                        passed.grant.read |= read;
                        passed.grant.write |= write;
                    }
                    None => self.passed_on.push(PassedOn {
                        receiver: receiver.clone(),
                        grant: KeyGrant { url: url.clone(), read: *read, write: *write },
                    }),
                }
            }
            KeyChange::Withdraw { receiver, url, read, write } => {
                for passed in self.passed_on.iter_mut().filter(|p| p.receiver == *receiver && p.grant.url == *url) {
                    passed.grant.read &= !read;
                    passed.grant.write &= !write;
                }
                self.passed_on.retain(|passed| passed.grant.read || passed.grant.write);
            }
        }
    }

    /// What this key's holder passed on to `receiver` (the grants a key
    /// minted for a call to it receives).
    pub fn passed_to(&self, receiver: &str) -> Vec<KeyGrant> {
        self.passed_on.iter().filter(|passed| passed.receiver == receiver).map(|passed| passed.grant.clone()).collect()
    }

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
    /// Stores `data` under a fresh key, held for `hold` (at most until
    /// `data.expires_at`), and returns the key.
    fn mint(&self, data: KeyData, hold: Duration) -> KeyFuture<'_, String>;
    /// Holds a live key `hold` longer from now (the caller keeps it within
    /// the key's expiry); false when it is gone.
    fn renew<'a>(&'a self, key: &'a str, hold: Duration) -> KeyFuture<'a, bool>;
    /// Whether keys lapse unless renewed (they outlive this process).
    fn held_for_a_lease(&self) -> bool {
        false
    }
    /// What a live key stands for, its changes applied; `None` when unknown,
    /// revoked or expired.
    fn get<'a>(&'a self, key: &'a str) -> KeyFuture<'a, Option<Arc<KeyData>>>;
    /// Appends `changes` to a live key (seen by every later read).
    fn change<'a>(&'a self, key: &'a str, changes: Vec<KeyChange>) -> KeyFuture<'a, Changed>;
    /// Ends a key (idempotent).
    fn revoke(&self, key: String) -> KeyFuture<'_, ()>;
    /// Keys alive now (for metrics and tests); Redis counts this prefix.
    fn alive(&self) -> KeyFuture<'_, usize>;
}

/// The Redis store when a connection is given, the in-process one otherwise.
pub fn from_config(redis: Option<&RedisConnection>, key_prefix: &str) -> Arc<dyn KeyStore> {
    match redis {
        Some(connection) => Arc::new(RedisKeys {
            connection: connection.clone(),
            prefix: format!("{key_prefix}prk:"),
            changes_prefix: format!("{key_prefix}prk-changes:"),
        }),
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

/// Keys of one process, each with the number of changes it took. Expired
/// entries are dropped as the map grows.
#[derive(Default)]
pub struct InProcessKeys {
    keys: Mutex<HashMap<String, (Arc<KeyData>, usize)>>,
}

impl KeyStore for InProcessKeys {
    /// The process's own memory: a key cannot outlive its instance, so it
    /// is held until `expires_at` and `hold` is not needed.
    fn mint(&self, mut data: KeyData, _hold: Duration) -> KeyFuture<'_, String> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let now = now_ms();
        if keys.len() > 1024 && keys.len().is_power_of_two() {
            keys.retain(|_, (data, _)| data.expires_at > now);
        }
        let key = loop {
            let key = new_key();
            if !keys.contains_key(&key) {
                break key;
            }
        };
        data.id = KeyId(key.clone());
        keys.insert(key.clone(), (Arc::new(data), 0));
        Box::pin(std::future::ready(Ok(key)))
    }

    fn renew<'a>(&'a self, key: &'a str, _hold: Duration) -> KeyFuture<'a, bool> {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let alive = keys.get(key).is_some_and(|(data, _)| data.expires_at > now_ms());
        Box::pin(std::future::ready(Ok(alive)))
    }

    fn get<'a>(&'a self, key: &'a str) -> KeyFuture<'a, Option<Arc<KeyData>>> {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let found = keys.get(key).filter(|(data, _)| data.expires_at > now_ms()).map(|(data, _)| data.clone());
        Box::pin(std::future::ready(Ok(found)))
    }

    fn change<'a>(&'a self, key: &'a str, changes: Vec<KeyChange>) -> KeyFuture<'a, Changed> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = match keys.get_mut(key).filter(|(data, _)| data.expires_at > now_ms()) {
            None => Changed::Gone,
            Some((_, taken)) if *taken + changes.len() > MAX_KEY_CHANGES => Changed::Full,
            Some((data, taken)) => {
                // Readers holding the old data keep it; the next read sees this.
                let mut updated = KeyData::clone(data);
                changes.iter().for_each(|change| updated.apply(change));
                *taken += changes.len();
                updated.changes_taken = *taken;
                *data = Arc::new(updated);
                Changed::Applied
            }
        };
        Box::pin(std::future::ready(Ok(changed)))
    }

    fn revoke(&self, key: String) -> KeyFuture<'_, ()> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
        Box::pin(std::future::ready(Ok(())))
    }

    fn alive(&self) -> KeyFuture<'_, usize> {
        let now = now_ms();
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        Box::pin(std::future::ready(Ok(keys.values().filter(|(data, _)| data.expires_at > now).count())))
    }
}

/// Keys shared by every instance: `SET <prefix>{<key>} <json> NX PX <ttl>`,
/// and the key's changes as a list at `<changes_prefix>{<key>}` that expires
/// with it. The key is the hash tag of both names: the scripts and the
/// atomic read touch the two together, which a Redis Cluster allows only
/// within one slot (and the keys of different calls still spread over every
/// primary).
pub struct RedisKeys {
    connection: RedisConnection,
    prefix: String,
    changes_prefix: String,
}

/// Appends changes to a live key's list, which then expires with the key:
/// KEYS = key, its list; ARGV = the most changes, then the changes. 1
/// applied, 0 the key is gone, -1 full.
const APPEND_CHANGES: &str = r"
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
if redis.call('LLEN', KEYS[2]) + #ARGV - 1 > tonumber(ARGV[1]) then return -1 end
for i = 2, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
";

/// Holds a live key (and its changes) longer: KEYS = key, its list; ARGV =
/// milliseconds. 1 held, 0 the key is gone (a revoke wins).
const RENEW: &str = r"
local held = redis.call('PEXPIRE', KEYS[1], ARGV[1], 'XX')
if held == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[1]) end
return held
";

impl RedisKeys {
    fn key_name(&self, key: &str) -> String {
        format!("{}{{{key}}}", self.prefix)
    }

    fn changes_name(&self, key: &str) -> String {
        format!("{}{{{key}}}", self.changes_prefix)
    }

    fn unavailable(error: redis::RedisError) -> KeyStoreError {
        KeyStoreError::Unavailable(error.to_string())
    }
}

/// Milliseconds to hold a key: `hold`, never past `expires_at` (at least 1).
fn hold_ms(expires_at: i64, hold: Duration) -> u64 {
    let left = u64::try_from(expires_at - now_ms()).unwrap_or(0);
    left.min(u64::try_from(hold.as_millis()).unwrap_or(u64::MAX)).max(1)
}

impl KeyStore for RedisKeys {
    fn held_for_a_lease(&self) -> bool {
        true
    }

    fn mint(&self, data: KeyData, hold: Duration) -> KeyFuture<'_, String> {
        Box::pin(async move {
            let ttl_ms = hold_ms(data.expires_at, hold);
            let json = serde_json::to_string(&data).expect("key data serializes");
            let mut connection = self.connection.clone();
            loop {
                let key = new_key();
                let set: Option<String> = redis::cmd("SET")
                    .arg(self.key_name(&key))
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
            // One atomic read: the key and the changes made so far.
            let (json, changes): (Option<String>, Vec<String>) = redis::pipe()
                .atomic()
                .cmd("GET")
                .arg(self.key_name(key))
                .cmd("LRANGE")
                .arg(self.changes_name(key))
                .arg(0)
                .arg(-1)
                .query_async(&mut connection)
                .await
                .map_err(Self::unavailable)?;
            let Some(mut data) = json.and_then(|json| serde_json::from_str::<KeyData>(&json).ok()) else {
                return Ok(None);
            };
            for change in changes.iter().filter_map(|change| serde_json::from_str::<KeyChange>(change).ok()) {
                data.apply(&change);
            }
            let taken = changes.len();
            Ok((data.expires_at > now_ms())
                .then(|| Arc::new(KeyData { id: KeyId(key.into()), changes_taken: taken, ..data })))
        })
    }

    fn change<'a>(&'a self, key: &'a str, changes: Vec<KeyChange>) -> KeyFuture<'a, Changed> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let append = redis::Script::new(APPEND_CHANGES);
            let mut script = append.prepare_invoke();
            script.key(self.key_name(key)).key(self.changes_name(key));
            script.arg(MAX_KEY_CHANGES);
            for change in &changes {
                script.arg(serde_json::to_string(change).expect("a change serializes"));
            }
            let outcome: i64 = script.invoke_async(&mut connection).await.map_err(Self::unavailable)?;
            Ok(match outcome {
                1 => Changed::Applied,
                0 => Changed::Gone,
                _ => Changed::Full,
            })
        })
    }

    fn renew<'a>(&'a self, key: &'a str, hold: Duration) -> KeyFuture<'a, bool> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let held: i64 = redis::Script::new(RENEW)
                .key(self.key_name(key))
                .key(self.changes_name(key))
                .arg(u64::try_from(hold.as_millis()).unwrap_or(u64::MAX).max(1))
                .invoke_async(&mut connection)
                .await
                .map_err(Self::unavailable)?;
            Ok(held == 1)
        })
    }

    fn revoke(&self, key: String) -> KeyFuture<'_, ()> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let _: i64 = redis::cmd("DEL")
                .arg(self.key_name(&key))
                .arg(self.changes_name(&key))
                .query_async(&mut connection)
                .await
                .map_err(Self::unavailable)?;
            Ok(())
        })
    }

    fn alive(&self) -> KeyFuture<'_, usize> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            connection.count_keys(&format!("{}*", self.prefix)).await.map_err(Self::unavailable)
        })
    }
}

/// The keys this instance hands out: minted as [`KeyLease`]s, and each
/// remembered until its revoke has landed, so [`Keys::revoke_all`] can end
/// every one a stop cuts off. Cheap to clone.
#[derive(Clone)]
pub struct Keys {
    store: Arc<dyn KeyStore>,
    /// Keys minted here and not yet revoked.
    live: Arc<Mutex<HashSet<String>>>,
    /// How long the store holds a key past its last renewal.
    lease: Duration,
}

impl Keys {
    /// `lease`: how long a key outlives its instance at most, should the
    /// instance die without revoking it (renewed at a third of it while the
    /// call lives).
    pub fn new(store: Arc<dyn KeyStore>, lease: Duration) -> Self {
        Self { store, live: Arc::default(), lease: lease.max(Duration::from_millis(300)) }
    }

    /// Mints a key for `data`, revoked when the lease is dropped.
    pub async fn mint(&self, data: KeyData) -> Result<KeyLease, KeyStoreError> {
        let expires_at = data.expires_at;
        let key = self.store.mint(data, self.lease).await?;
        self.live.lock().unwrap_or_else(PoisonError::into_inner).insert(key.clone());
        crate::metrics::key_minted();
        let renewal = self.store.held_for_a_lease().then(|| {
            tokio::spawn(renew_while_held(self.store.clone(), key.clone(), expires_at, self.lease)).abort_handle()
        });
        Ok(KeyLease { keys: self.clone(), key: Some(key), renewal })
    }

    /// What a live key stands for; `None` when unknown, revoked or expired.
    pub async fn get(&self, key: &str) -> Result<Option<Arc<KeyData>>, KeyStoreError> {
        self.store.get(key).await
    }

    /// Appends `changes` to a live key.
    pub async fn change(&self, key: &str, changes: Vec<KeyChange>) -> Result<Changed, KeyStoreError> {
        if changes.is_empty() {
            return Ok(Changed::Applied);
        }
        self.store.change(key, changes).await
    }

    /// Keys alive in the store (metrics and tests).
    pub async fn alive(&self) -> Result<usize, KeyStoreError> {
        self.store.alive().await
    }

    /// Revokes every key minted here whose revoke has not landed: a stop
    /// calls it before the process exits. Returns how many it revoked.
    pub async fn revoke_all(&self) -> usize {
        let keys: Vec<String> = self.live.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
        let revokes = keys.iter().map(|key| self.revoke(key.clone()));
        futures_util::future::join_all(revokes).await.into_iter().filter(|revoked| *revoked).count()
    }

    /// Revokes `key` and forgets it once the store confirmed.
    async fn revoke(&self, key: String) -> bool {
        match self.store.revoke(key.clone()).await {
            Ok(()) => {
                self.live.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
                true
            }
            Err(error) => {
                tracing::warn!(%error, "could not revoke a per-request key; it expires with its lease");
                false
            }
        }
    }
}

/// The per-request key a write came with: an application uploading during
/// its call. The caller was looked up when the request's headers arrived,
/// and an upload can outlast the call that minted the key; so the write
/// stops at the key's expiry and commits only if the key store still knows
/// the key right before the commit.
#[derive(Clone)]
pub struct WritingKey {
    keys: Keys,
    key: String,
    expires_at: i64,
}

/// The key a write came with ended before the write could commit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyLapsed {
    #[error(
        "The per-request key this write came with was revoked or expired before the write committed; nothing was stored"
    )]
    Ended,
    #[error("the key store (Redis) is unavailable: {0}")]
    Unavailable(String),
}

impl WritingKey {
    pub fn new(keys: &Keys, key: &KeyData) -> Self {
        Self { keys: keys.clone(), key: key.id.0.clone(), expires_at: key.expires_at }
    }

    /// Milliseconds since the Unix epoch past which the write cannot commit.
    pub fn expires_at(&self) -> i64 {
        self.expires_at
    }

    /// Ok while the key lives, asked of the key store anew.
    pub async fn ensure_alive(&self) -> Result<(), KeyLapsed> {
        if now_ms() >= self.expires_at {
            return Err(KeyLapsed::Ended);
        }
        match self.keys.get(&self.key).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(KeyLapsed::Ended),
            Err(error) => Err(KeyLapsed::Unavailable(error.to_string())),
        }
    }
}

/// Holds `key` in the store one `lease` at a time until its lease is
/// dropped (this task is aborted then) or it expires.
async fn renew_while_held(store: Arc<dyn KeyStore>, key: String, expires_at: i64, lease: Duration) {
    loop {
        tokio::time::sleep(lease / 3).await;
        let left = u64::try_from(expires_at - now_ms()).unwrap_or(0);
        if left == 0 {
            return;
        }
        match store.renew(&key, lease.min(Duration::from_millis(left))).await {
            Ok(true) => {}
            Ok(false) => return,
            // Redis away: the next renewal tries again; the key lapses if it never returns.
            Err(error) => tracing::warn!(%error, "could not renew a per-request key"),
        }
    }
}

/// A minted key that is revoked when this guard goes away: the guard rides
/// with the relayed response body, so the key ends when the response has been
/// relayed, the client went away or the upstream failed — whichever is first.
pub struct KeyLease {
    keys: Keys,
    key: Option<String>,
    /// The task renewing the key's lease in the store, if it needs one.
    renewal: Option<tokio::task::AbortHandle>,
}

impl KeyLease {
    pub fn key(&self) -> &str {
        self.key.as_deref().unwrap_or_default()
    }
}

impl Drop for KeyLease {
    fn drop(&mut self) {
        if let Some(renewal) = &self.renewal {
            renewal.abort();
        }
        let Some(key) = self.key.take() else { return };
        crate::metrics::key_revoked();
        let keys = self.keys.clone();
        match tokio::runtime::Handle::try_current() {
            // Until it lands the key stays in `live`, where a stop finds it.
            Ok(runtime) => drop(runtime.spawn(async move { keys.revoke(key).await })),
            Err(_) => tracing::warn!("no async runtime to revoke a per-request key; it expires with its lease"),
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

    const LEASE: Duration = Duration::from_secs(60);

    fn data(expires_at: i64) -> KeyData {
        KeyData {
            id: KeyId::default(),
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
            received: vec![],
            passed_on: vec![],
            expires_at,
            changes_taken: 0,
        }
    }

    #[tokio::test]
    async fn a_live_key_takes_changes_in_order_and_a_gone_one_none() {
        let store = InProcessKeys::default();
        let key = store.mint(data(expiry(Duration::from_secs(60))), LEASE).await.unwrap();
        let pass = |url: &str, read, write| KeyChange::PassOn { receiver: "b".into(), url: url.into(), read, write };
        let changes = vec![
            KeyChange::Grant { url: "files/B/a".into(), read: true, write: false },
            pass("files/B/x", true, false),
            pass("files/B/x", false, true),
            pass("files/B/y", true, false),
            KeyChange::Withdraw { receiver: "b".into(), url: "files/B/y".into(), read: true, write: true },
            KeyChange::Withdraw { receiver: "b".into(), url: "files/B/x".into(), read: false, write: true },
        ];
        assert_eq!(store.change(&key, changes).await.unwrap(), Changed::Applied);
        let found = store.get(&key).await.unwrap().unwrap();
        assert_eq!(found.grants, [KeyGrant { url: "files/B/a".into(), read: true, write: false }]);
        assert_eq!(found.passed_to("b"), [KeyGrant { url: "files/B/x".into(), read: true, write: false }]);
        assert!(found.passed_to("c").is_empty());
        let many = vec![KeyChange::Grant { url: "files/B/z".into(), read: true, write: false }; MAX_KEY_CHANGES];
        assert_eq!(store.change(&key, many).await.unwrap(), Changed::Full, "bounded");
        store.revoke(key.clone()).await.unwrap();
        assert_eq!(store.change(&key, vec![pass("files/B/q", true, false)]).await.unwrap(), Changed::Gone);
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
        let key = store.mint(data(expiry(Duration::from_secs(60))), LEASE).await.unwrap();
        let found = store.get(&key).await.unwrap().unwrap();
        assert_eq!((found.app.as_str(), &found.id), ("echo", &KeyId(key.clone())));
        assert_eq!(store.alive().await.unwrap(), 1);
        store.revoke(key.clone()).await.unwrap();
        assert!(store.get(&key).await.unwrap().is_none());
        let expired = store.mint(data(now_ms() - 1), LEASE).await.unwrap();
        assert!(store.get(&expired).await.unwrap().is_none(), "an expired key is unknown");
        assert_eq!(store.alive().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_lease_revokes_its_key_when_dropped() {
        let keys = Keys::new(Arc::new(InProcessKeys::default()), LEASE);
        let lease = keys.mint(data(expiry(Duration::from_secs(60)))).await.unwrap();
        let key = lease.key().to_string();
        assert!(keys.get(&key).await.unwrap().is_some());
        drop(lease);
        for _ in 0..100 {
            if keys.get(&key).await.unwrap().is_none() {
                assert_eq!(keys.revoke_all().await, 0, "a landed revoke is forgotten");
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the key outlived its lease");
    }

    #[tokio::test]
    async fn a_stop_revokes_the_keys_still_held() {
        let keys = Keys::new(Arc::new(InProcessKeys::default()), LEASE);
        let held = keys.mint(data(expiry(Duration::from_secs(60)))).await.unwrap();
        assert_eq!(keys.revoke_all().await, 1);
        assert!(keys.get(held.key()).await.unwrap().is_none(), "revoked while its call still held it");
    }
}
