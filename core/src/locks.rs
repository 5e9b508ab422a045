//! Locks that serialise work on one key across requests, and across
//! instances when Redis is configured.
//!
//! A lock here is an efficiency device, not what makes a commit correct: a
//! lease can run out while its holder is paused (GC, stall, slow network), and
//! Redis can lose a key on failover. The marker's etag is the fencing token —
//! every commit is a conditional write — so a holder that lost its lease can at
//! worst waste work, never overwrite a newer version. [`LockGuard::lost`] lets
//! a holder notice early and stop.
//!
//! Where a lock does more than save work — a structural check that spans
//! several keys (no resource inside a resource), an unconditional delete
//! after a check, a multipart completion that cannot be conditional — the
//! holder calls [`LockGuard::ensure_held`] right before the step the lock
//! protects, and gives up (503) when the lease is gone or about to run out.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedMutexGuard, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::LockConfig;
use crate::redis_conn::RedisConnection;

/// Prefix of every Redis key and channel when `redis.key_prefix` is unset.
pub const DEFAULT_KEY_PREFIX: &str = "dial-host:";

/// First pause between two attempts to take a Redis lock someone else holds;
/// it doubles up to [`MAX_ACQUIRE_BACKOFF`]. Short, because most critical
/// sections are a few storage calls.
const MIN_ACQUIRE_BACKOFF: Duration = Duration::from_millis(5);
/// Cap of that pause, so a waiter notices a release soon without hammering Redis.
const MAX_ACQUIRE_BACKOFF: Duration = Duration::from_millis(100);

/// Extends the lease only if it still holds our token: after an expiry the key
/// may belong to someone else, whose lease we must not prolong.
const RENEW_SCRIPT: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
    return 0
end
"#;

/// Deletes the key only if it still holds our token, so a holder whose lease
/// ran out cannot free the lock of the holder that came after it.
const RELEASE_SCRIPT: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
else
    return 0
end
"#;

/// Serialises work on a key: structural operations lock `bucket:<location>`,
/// content updates `resource:<storage path>`.
pub trait LockService: Send + Sync {
    /// Waits up to the configured acquire timeout; the guard releases on drop.
    fn acquire<'a>(&'a self, key: &'a str) -> Pin<Box<dyn Future<Output = Result<LockGuard, LockError>> + Send + 'a>>;
}

/// Why a lock could not be had. The key names internal storage locations,
/// so the HTTP layer logs it and shows clients a message without it.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("timed out after {waited_ms} ms waiting for lock '{key}'")]
    Timeout { key: String, waited_ms: u64 },
    #[error("lock service unavailable: {0}")]
    Redis(String),
    /// The lease ran out (or another holder took the key) while the work it
    /// protects was still going on.
    #[error("lost the lock '{key}': its lease ran out before the work it protects was done")]
    Lost { key: String },
}

/// Picks the Redis implementation when a connection is given, the in-process
/// one otherwise (a single instance needs nothing more).
pub fn from_config(redis: Option<&RedisConnection>, config: &LockConfig, key_prefix: &str) -> Arc<dyn LockService> {
    match redis {
        Some(connection) => Arc::new(RedisLocks::new(connection.clone(), config, key_prefix)),
        None => Arc::new(InProcessLocks::new(config)),
    }
}

/// Proof of holding a lock. Dropping it releases the lock; [`Self::release`]
/// does the same and waits for it.
pub struct LockGuard {
    key: String,
    held: Held,
}

enum Held {
    InProcess {
        // Field order matters: the mutex is unlocked before the registration
        // is dropped, so the map entry is never removed while still locked.
        _mutex: OwnedMutexGuard<()>,
        _registration: Registration,
    },
    Redis(RedisLease),
}

impl LockGuard {
    /// The key passed to [`LockService::acquire`].
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether the lock can no longer be trusted: its Redis lease was taken or
    /// deleted, or could not be renewed before it ran out. Never true for an
    /// in-process lock.
    pub fn is_lost(&self) -> bool {
        match &self.held {
            Held::InProcess { .. } => false,
            Held::Redis(lease) => lease.state.borrow().lost,
        }
    }

    /// Ok while the lock can be relied on for one more short step: an
    /// in-process lock always; a Redis lease only if it was not lost and
    /// has at least [`LEASE_MARGIN_DIVISOR`]ths of its TTL left (renewal
    /// normally keeps two thirds). Call it right before a step whose
    /// correctness depends on the lock, not only on the store's
    /// compare-and-swap.
    pub fn ensure_held(&self) -> Result<(), LockError> {
        let held = match &self.held {
            Held::InProcess { .. } => true,
            Held::Redis(lease) => {
                let state = *lease.state.borrow();
                !state.lost && Instant::now() + lease.margin < state.valid_until
            }
        };
        if held {
            Ok(())
        } else {
            crate::metrics::lock_failed("redis", "lost");
            Err(LockError::Lost { key: self.key.clone() })
        }
    }

    /// Resolves once [`Self::is_lost`] becomes true (never for an in-process
    /// lock), so a holder can `select!` on it and abort its work.
    pub async fn lost(&self) {
        let lost = match &self.held {
            Held::InProcess { .. } => false,
            Held::Redis(lease) => {
                let mut state = lease.state.clone();
                // An error means the renewal task ended without reporting a
                // loss, which only happens once the guard is being released.
                state.wait_for(|state| state.lost).await.is_ok()
            }
        };
        if !lost {
            std::future::pending::<()>().await;
        }
    }

    /// Releases the lock and waits until Redis confirms, so the next holder
    /// need not wait for a background release. Failures are logged: the
    /// lease then expires on its own.
    pub async fn release(self) {
        match self.held {
            Held::InProcess { .. } => {}
            Held::Redis(RedisLease { renewal, token, .. }) => {
                drop(renewal);
                token.release().await;
            }
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backend = match self.held {
            Held::InProcess { .. } => "in-process",
            Held::Redis(_) => "redis",
        };
        f.debug_struct("LockGuard")
            .field("key", &self.key)
            .field("backend", &backend)
            .field("lost", &self.is_lost())
            .finish()
    }
}

// ---------------------------------------------------------------------------
// In-process
// ---------------------------------------------------------------------------

/// Locks for a single instance: one fair tokio mutex per key. A key's entry
/// lives only while someone holds or waits for it, so the map does not grow
/// with every resource ever touched.
pub struct InProcessLocks {
    keys: Arc<Mutex<HashMap<String, KeyEntry>>>,
    acquire_timeout: Duration,
}

struct KeyEntry {
    mutex: Arc<tokio::sync::Mutex<()>>,
    /// Holders plus waiters; the entry is removed when it drops to zero.
    users: usize,
}

/// One holder's or waiter's claim on a map entry. Dropping it (release,
/// timeout, or a cancelled acquire) removes the entry if it was the last.
struct Registration {
    keys: Arc<Mutex<HashMap<String, KeyEntry>>>,
    key: String,
}

impl InProcessLocks {
    pub fn new(config: &LockConfig) -> Self {
        Self { keys: Arc::default(), acquire_timeout: Duration::from_millis(config.acquire_timeout_ms) }
    }

    fn register(&self, key: &str) -> (Arc<tokio::sync::Mutex<()>>, Registration) {
        // A poisoned map is still consistent: nothing panics while holding it.
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = keys.entry(key.to_owned()).or_insert_with(|| KeyEntry { mutex: Arc::default(), users: 0 });
        entry.users += 1;
        (entry.mutex.clone(), Registration { keys: self.keys.clone(), key: key.to_owned() })
    }

    async fn acquire_in_process(&self, key: &str) -> Result<LockGuard, LockError> {
        let started = Instant::now();
        // Registered before waiting, so a cancelled acquire still unregisters.
        let (mutex, registration) = self.register(key);
        match tokio::time::timeout(self.acquire_timeout, mutex.lock_owned()).await {
            Ok(held) => Ok(LockGuard {
                key: key.to_owned(),
                held: Held::InProcess { _mutex: held, _registration: registration },
            }),
            Err(_) => Err(LockError::Timeout { key: key.to_owned(), waited_ms: elapsed_ms(started) }),
        }
    }

    /// Keys with a holder or a waiter.
    #[cfg(test)]
    fn tracked_keys(&self) -> usize {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

impl LockService for InProcessLocks {
    fn acquire<'a>(&'a self, key: &'a str) -> Pin<Box<dyn Future<Output = Result<LockGuard, LockError>> + Send + 'a>> {
        Box::pin(metered("in_process", self.acquire_in_process(key)))
    }
}

/// An acquisition, with its wait or its failure in the metrics.
async fn metered(
    backend: &'static str,
    acquire: impl Future<Output = Result<LockGuard, LockError>>,
) -> Result<LockGuard, LockError> {
    let started = Instant::now();
    let result = acquire.await;
    match &result {
        Ok(_) => crate::metrics::lock_acquired(backend, started.elapsed()),
        Err(LockError::Timeout { .. }) => crate::metrics::lock_failed(backend, "timeout"),
        Err(_) => crate::metrics::lock_failed(backend, "unavailable"),
    }
    result
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = keys.get_mut(&self.key) {
            entry.users = entry.users.saturating_sub(1);
            if entry.users == 0 {
                keys.remove(&self.key);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------

/// Locks shared by every instance using the same Redis: `SET key token NX PX
/// ttl`, a lease renewed at a third of the TTL while held, and token-checked
/// renewal and release.
pub struct RedisLocks {
    shared: Arc<RedisShared>,
}

struct RedisShared {
    connection: RedisConnection,
    key_prefix: String,
    ttl: Duration,
    acquire_timeout: Duration,
    renew: redis::Script,
    release: redis::Script,
}

impl RedisLocks {
    /// Keys are `<key_prefix>lock:<key>`. A TTL below 3 ms is raised to it so
    /// the lease stays valid and the renewal interval is not zero.
    pub fn new(connection: RedisConnection, config: &LockConfig, key_prefix: &str) -> Self {
        Self {
            shared: Arc::new(RedisShared {
                connection,
                key_prefix: key_prefix.to_owned(),
                ttl: Duration::from_millis(config.ttl_ms.max(3)),
                acquire_timeout: Duration::from_millis(config.acquire_timeout_ms),
                renew: redis::Script::new(RENEW_SCRIPT),
                release: redis::Script::new(RELEASE_SCRIPT),
            }),
        }
    }

    async fn acquire_redis(&self, key: &str) -> Result<LockGuard, LockError> {
        let shared = &self.shared;
        let started = Instant::now();
        let deadline = started + shared.acquire_timeout;
        let mut token = RedisToken {
            shared: shared.clone(),
            key: format!("{}lock:{key}", shared.key_prefix),
            token: random_token(),
            may_hold: false,
        };
        let mut backoff = MIN_ACQUIRE_BACKOFF;
        loop {
            let sent_at = Instant::now();
            // Until Redis answers, the SET may have landed: if this future is
            // dropped or the answer is lost, the token's drop releases it
            // rather than leaving the key locked for a whole TTL.
            token.may_hold = true;
            let mut connection = shared.connection.clone();
            let reply = redis::cmd("SET")
                .arg(&token.key)
                .arg(&token.token)
                .arg("NX")
                .arg("PX")
                .arg(duration_ms(shared.ttl))
                .query_async::<Option<String>>(&mut connection)
                .await;
            match reply {
                Ok(Some(_)) => {
                    let key = key.to_owned();
                    return Ok(LockGuard { key, held: Held::Redis(RedisLease::start(token, sent_at)) });
                }
                Ok(None) => token.may_hold = false,
                Err(error) => return Err(LockError::Redis(error.to_string())),
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(LockError::Timeout { key: key.to_owned(), waited_ms: elapsed_ms(started) });
            }
            tokio::time::sleep(jittered(backoff).min(deadline - now)).await;
            backoff = (backoff * 2).min(MAX_ACQUIRE_BACKOFF);
        }
    }
}

impl LockService for RedisLocks {
    fn acquire<'a>(&'a self, key: &'a str) -> Pin<Box<dyn Future<Output = Result<LockGuard, LockError>> + Send + 'a>> {
        Box::pin(metered("redis", self.acquire_redis(key)))
    }
}

/// A lease is trusted for one more step only while at least
/// `ttl / LEASE_MARGIN_DIVISOR` of it is left.
pub const LEASE_MARGIN_DIVISOR: u32 = 6;

/// What the renewal task knows about a lease.
#[derive(Debug, Clone, Copy)]
struct LeaseState {
    /// The key expired, was taken, or could not be renewed in time.
    lost: bool,
    /// The lease is certainly ours until then (measured from when the last
    /// successful SET or renewal was sent).
    valid_until: Instant,
}

/// A held (or possibly held) Redis lock and the task keeping its lease alive.
struct RedisLease {
    // Field order matters: renewal stops before the token's drop releases the key.
    renewal: AbortOnDrop,
    token: RedisToken,
    state: watch::Receiver<LeaseState>,
    /// How much lease must be left for [`LockGuard::ensure_held`].
    margin: Duration,
}

impl RedisLease {
    /// `sent_at`: when the winning SET was sent; the lease runs at least
    /// until `sent_at + ttl`.
    fn start(token: RedisToken, sent_at: Instant) -> Self {
        let ttl = token.shared.ttl;
        let (state_sender, state) = watch::channel(LeaseState { lost: false, valid_until: sent_at + ttl });
        let renewal = tokio::spawn(renew_until_lost(
            token.shared.clone(),
            token.key.clone(),
            token.token.clone(),
            sent_at + ttl,
            state_sender,
        ));
        Self { renewal: AbortOnDrop(renewal), token, state, margin: ttl / LEASE_MARGIN_DIVISOR }
    }
}

/// Renews the lease every third of its TTL until the key is gone or taken, or
/// until renewal failures leave the lease possibly expired — then reports the
/// loss. A single failed renewal is retried, since the lease is still valid.
async fn renew_until_lost(
    shared: Arc<RedisShared>,
    key: String,
    token: String,
    mut valid_until: Instant,
    state: watch::Sender<LeaseState>,
) {
    let interval = (shared.ttl / 3).max(Duration::from_millis(1));
    let ttl_ms = duration_ms(shared.ttl);
    loop {
        tokio::time::sleep(interval).await;
        let sent_at = Instant::now();
        let mut connection = shared.connection.clone();
        let mut invocation = shared.renew.key(&key);
        invocation.arg(&token).arg(ttl_ms);
        let renewal = invocation.invoke_async::<i64>(&mut connection);
        // An answer that comes after the lease may have run out proves nothing.
        match tokio::time::timeout(valid_until.saturating_duration_since(sent_at), renewal).await {
            Ok(Ok(1)) => {
                valid_until = sent_at + shared.ttl;
                state.send_replace(LeaseState { lost: false, valid_until });
            }
            Ok(Ok(_)) => {
                tracing::warn!(key, "lock lease lost: the key expired or another holder took it");
                break;
            }
            Ok(Err(error)) => {
                if Instant::now() + interval >= valid_until {
                    tracing::warn!(key, %error, "lock lease lost: cannot renew it before it expires");
                    break;
                }
                tracing::warn!(key, %error, "lock renewal failed; retrying while the lease is still valid");
            }
            Err(_) => {
                tracing::warn!(key, "lock lease lost: renewal got no answer before the lease expired");
                break;
            }
        }
    }
    state.send_replace(LeaseState { lost: true, valid_until });
}

/// A token that may be stored under a lock key. Dropping it while it may hold
/// the key spawns the token-checked release; without a runtime the lease
/// simply expires.
struct RedisToken {
    shared: Arc<RedisShared>,
    key: String,
    token: String,
    may_hold: bool,
}

impl RedisToken {
    async fn release(mut self) {
        self.may_hold = false;
        release_token(&self.shared, &self.key, &self.token).await;
    }
}

impl Drop for RedisToken {
    fn drop(&mut self) {
        if !self.may_hold {
            return;
        }
        let (shared, key, token) =
            (self.shared.clone(), std::mem::take(&mut self.key), std::mem::take(&mut self.token));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { release_token(&shared, &key, &token).await });
            }
            Err(_) => tracing::warn!(key, "no async runtime to release the lock; it expires with its lease"),
        }
    }
}

async fn release_token(shared: &RedisShared, key: &str, token: &str) {
    let mut connection = shared.connection.clone();
    if let Err(error) = shared.release.key(key).arg(token).invoke_async::<i64>(&mut connection).await {
        tracing::warn!(key, %error, "cannot release lock; it expires with its lease");
    }
}

/// Stops a background task when its owner goes away.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// 16 random bytes as hex: unique per acquisition, so a holder can only ever
/// renew or release its own lease.
fn random_token() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut bytes = [0u8; 16];
    rand::fill(&mut bytes[..]);
    bytes.iter().flat_map(|byte| [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]]).map(char::from).collect()
}

/// Between half and all of `backoff`, so waiters that collided once do not
/// retry in lockstep.
fn jittered(backoff: Duration) -> Duration {
    let full = duration_ms(backoff).max(1);
    Duration::from_millis(rand::random_range(full.div_ceil(2)..=full))
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn elapsed_ms(started: Instant) -> u64 {
    duration_ms(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locks(acquire_timeout_ms: u64) -> InProcessLocks {
        InProcessLocks::new(&LockConfig { ttl_ms: 1_000, acquire_timeout_ms })
    }

    #[tokio::test]
    async fn in_process_entries_are_removed_after_release() {
        let locks = locks(1_000);
        for index in 0..100 {
            let guard = locks.acquire(&format!("resource:{index}")).await.unwrap();
            assert_eq!(locks.tracked_keys(), 1);
            if index % 2 == 0 {
                drop(guard);
            } else {
                guard.release().await;
            }
        }
        assert_eq!(locks.tracked_keys(), 0);
    }

    #[tokio::test]
    async fn in_process_entry_survives_while_someone_waits() {
        let locks = Arc::new(locks(5_000));
        let first = locks.acquire("bucket:a").await.unwrap();
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move { locks.acquire("bucket:a").await.map(drop) }
        });
        tokio::task::yield_now().await;
        drop(first);
        waiter.await.unwrap().unwrap();
        assert_eq!(locks.tracked_keys(), 0);
    }

    #[tokio::test]
    async fn in_process_entries_are_removed_after_timeout_and_cancellation() {
        let locks = locks(20);
        let held = locks.acquire("bucket:b").await.unwrap();
        assert!(matches!(locks.acquire("bucket:b").await, Err(LockError::Timeout { .. })));
        // Cancelled by the outer timeout while queued, before its own.
        let cancelled = tokio::time::timeout(Duration::from_millis(5), locks.acquire("bucket:b")).await;
        assert!(cancelled.is_err());
        assert_eq!(locks.tracked_keys(), 1);
        drop(held);
        assert_eq!(locks.tracked_keys(), 0);
    }

    #[tokio::test]
    async fn in_process_guard_is_never_lost() {
        let locks = locks(1_000);
        let guard = locks.acquire("resource:x").await.unwrap();
        assert!(!guard.is_lost());
        assert!(tokio::time::timeout(Duration::from_millis(20), guard.lost()).await.is_err());
        assert_eq!(guard.key(), "resource:x");
    }

    /// Guards cross `.await`s in handlers, and `lost()` goes into `select!`
    /// inside spawned tasks.
    #[test]
    fn guards_and_their_futures_are_send() {
        fn assert_send_sync<T: Send + Sync>() {}
        fn assert_send<T: Send>(_: &T) {}
        assert_send_sync::<LockGuard>();
        assert_send_sync::<RedisLocks>();
        assert_send_sync::<InProcessLocks>();
        // Type-checked, never run.
        fn futures_are_send(guard: LockGuard, locks: &dyn LockService) {
            assert_send(&locks.acquire("key"));
            assert_send(&guard.lost());
            assert_send(&guard.release());
        }
        let _ = futures_are_send;
    }

    #[test]
    fn tokens_are_random_hex() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|byte| byte.is_ascii_hexdigit() && !byte.is_ascii_uppercase()));
        assert_ne!(a, b);
    }

    #[test]
    fn jitter_stays_within_half_and_full_backoff() {
        for _ in 0..100 {
            let pause = jittered(Duration::from_millis(40));
            assert!((Duration::from_millis(20)..=Duration::from_millis(40)).contains(&pause), "{pause:?}");
        }
        assert_eq!(jittered(Duration::ZERO), Duration::from_millis(1));
    }
}
