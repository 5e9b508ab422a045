//! Locks, change events and per-request keys, in-process and against real
//! Redis in each shape the host supports: one `redis-server`, a Redis Cluster
//! of three primaries, and a primary with a replica behind three sentinels.
//! The shared suites run on every shape (`mod single`, `mod cluster`,
//! `mod sentinel` at the bottom); outages are shape by shape: a restarted
//! server, a cluster primary killed and restarted, a Sentinel failover during
//! writes.
//!
//! Each Redis test starts its own servers on free ports (`tests/services.rs`).
//! Without `redis-server` installed the Redis tests are skipped with a note,
//! except in CI (`CI=true`), where a missing server is a failure: a skipped
//! suite there would hide regressions.

#[path = "../../tests/services.rs"]
mod services;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use dial_host::config::{LockConfig, RedisConfig};
use dial_host::events::{EventAction, EventBus, InProcessEvents, RedisEvents, ResourceEvent};
use dial_host::locks::{InProcessLocks, LockError, LockService, RedisLocks};
use dial_host::redis_conn::{Redis, RedisConnection};
use tokio::time::{Instant, sleep, timeout};

/// Long enough for a slow CI machine; only ever waited out when a test fails.
const PATIENCE: Duration = Duration::from_secs(10);
const PREFIX: &str = "test:";

/// Redis in one of the shapes the host connects to.
enum RedisServer {
    Single(services::Redis),
    Cluster(services::RedisCluster),
    Sentinel(services::RedisSentinel),
}

impl RedisServer {
    /// `shape` is `single`, `cluster` or `sentinel`; `None` (after a note)
    /// when `redis-server` is not installed and this is not CI.
    fn start(shape: &str) -> Option<Self> {
        Some(match shape {
            "single" => Self::Single(services::redis()?),
            "cluster" => Self::Cluster(services::redis_cluster()?),
            "sentinel" => Self::Sentinel(services::redis_sentinel()?),
            other => panic!("no Redis shape {other}"),
        })
    }

    /// The `[redis]` settings an instance would have.
    fn config(&self) -> RedisConfig {
        let mut config = RedisConfig::default();
        match self {
            Self::Single(redis) => config.url = Some(redis.url.clone()),
            Self::Cluster(cluster) => config.cluster_nodes = cluster.nodes.clone(),
            Self::Sentinel(sentinel) => {
                config.sentinels = sentinel.sentinels.clone();
                config.sentinel_master = Some(sentinel.master_name.into());
            }
        }
        config
    }

    /// A fresh connection, as another instance would open.
    async fn redis(&self) -> Redis {
        Redis::connect(&self.config()).await.unwrap().expect("Redis is configured")
    }

    async fn connection(&self) -> RedisConnection {
        self.redis().await.connection()
    }
}

/// Starts Redis of a shape or returns from the test (see [`RedisServer::start`]).
macro_rules! redis_server_or_skip {
    ($shape:expr) => {
        match RedisServer::start($shape) {
            Some(server) => server,
            None => return,
        }
    };
}

fn lock_config(ttl_ms: u64, acquire_timeout_ms: u64) -> LockConfig {
    LockConfig { ttl_ms, acquire_timeout_ms }
}

async fn redis_locks(server: &RedisServer, ttl_ms: u64, acquire_timeout_ms: u64) -> Arc<dyn LockService> {
    Arc::new(RedisLocks::new(server.connection().await, &lock_config(ttl_ms, acquire_timeout_ms), PREFIX))
}

async fn redis_events(server: &RedisServer, key_prefix: &str) -> RedisEvents {
    RedisEvents::connect(server.redis().await, key_prefix).await.unwrap()
}

fn event(action: EventAction, url: &str, etag: Option<&str>) -> ResourceEvent {
    ResourceEvent { action, url: url.into(), etag: etag.map(Into::into), timestamp: 1_700_000_000_000 }
}

// ---------------------------------------------------------------------------
// Lock behaviour shared by both implementations
// ---------------------------------------------------------------------------

/// Tasks spread over `services` (several services = several hosts) increment
/// a counter with a read, a yield and a write; any overlap loses updates.
async fn assert_mutual_exclusion(services: &[Arc<dyn LockService>]) {
    const TASKS: usize = 8;
    const ROUNDS: u64 = 10;
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (locks, counter, inside) = (services[task % services.len()].clone(), counter.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let guard = locks.acquire("resource:counter").await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                let seen = counter.load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                sleep(Duration::from_millis(1)).await;
                counter.store(seen + 1, Ordering::SeqCst);
                inside.fetch_sub(1, Ordering::SeqCst);
                // Both ways of letting go must hand the lock on.
                if round % 2 == 0 {
                    drop(guard);
                } else {
                    guard.release().await;
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), TASKS as u64 * ROUNDS);
}

/// A second acquirer stays queued while the first holds, then gets the lock.
async fn assert_waiter_gets_lock_after_release(first: Arc<dyn LockService>, second: Arc<dyn LockService>) {
    let held = first.acquire("bucket:Users/alice/").await.unwrap();
    let waiter = tokio::spawn(async move { second.acquire("bucket:Users/alice/").await.map(|guard| guard.is_lost()) });
    sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "the second acquirer got the lock while it was held");
    drop(held);
    let lost = timeout(PATIENCE, waiter).await.expect("the waiter never got the released lock").unwrap().unwrap();
    assert!(!lost);
}

/// With the lock held, a waiter gives up with a timeout naming the key; other
/// keys stay free.
async fn assert_acquire_times_out(holder: &dyn LockService, impatient: &dyn LockService) {
    let _held = holder.acquire("resource:files/x/busy.txt").await.unwrap();
    match impatient.acquire("resource:files/x/busy.txt").await {
        Err(error @ LockError::Timeout { .. }) => {
            let LockError::Timeout { ref key, .. } = error else { unreachable!() };
            assert_eq!(key, "resource:files/x/busy.txt");
            assert!(error.to_string().contains("resource:files/x/busy.txt"), "{error}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    impatient.acquire("resource:files/x/other.txt").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_process_locks_give_mutual_exclusion() {
    assert_mutual_exclusion(&[Arc::new(InProcessLocks::new(&lock_config(1_000, 30_000)))]).await;
}

async fn redis_locks_give_mutual_exclusion_across_instances(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let hosts = [redis_locks(&server, 10_000, 30_000).await, redis_locks(&server, 10_000, 30_000).await];
    assert_mutual_exclusion(&hosts).await;
}

#[tokio::test]
async fn in_process_second_acquirer_gets_lock_after_release() {
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&lock_config(1_000, 30_000)));
    assert_waiter_gets_lock_after_release(locks.clone(), locks).await;
}

async fn redis_second_acquirer_gets_lock_after_release(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let (first, second) = (redis_locks(&server, 10_000, 30_000).await, redis_locks(&server, 10_000, 30_000).await);
    assert_waiter_gets_lock_after_release(first, second).await;
}

#[tokio::test]
async fn in_process_acquire_times_out_naming_the_key() {
    let locks = InProcessLocks::new(&lock_config(1_000, 100));
    assert_acquire_times_out(&locks, &locks).await;
}

async fn redis_acquire_times_out_naming_the_key(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let (holder, impatient) = (redis_locks(&server, 10_000, 30_000).await, redis_locks(&server, 10_000, 100).await);
    assert_acquire_times_out(holder.as_ref(), impatient.as_ref()).await;
}

// ---------------------------------------------------------------------------
// Redis leases
// ---------------------------------------------------------------------------

async fn redis_renewal_keeps_lock_held_past_its_ttl(shape: &str) {
    let server = redis_server_or_skip!(shape);
    // A 600 ms lease, renewed every 200 ms: a renewal may slip by 400 ms on a
    // loaded machine (tests run in parallel on two cores) before it lapses.
    let holder = redis_locks(&server, 600, 5_000).await;
    let contender = redis_locks(&server, 600, 100).await;
    let guard = holder.acquire("bucket:renewed").await.unwrap();
    // Over three TTLs, every attempt by another host must fail.
    let hold_until = Instant::now() + Duration::from_millis(1800);
    while Instant::now() < hold_until {
        match contender.acquire("bucket:renewed").await {
            Err(LockError::Timeout { .. }) => {}
            other => panic!("the lease was not renewed: contender got {other:?}"),
        }
    }
    assert!(!guard.is_lost());
    guard.release().await;
    let contender = redis_locks(&server, 600, 5_000).await;
    contender.acquire("bucket:renewed").await.unwrap();
}

async fn redis_stale_holder_cannot_release_newer_holders_lock(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let locks = redis_locks(&server, 1_500, 5_000).await;
    let mut raw = server.connection().await;
    let stale = locks.acquire("bucket:contested").await.unwrap();
    // A holder paused past its lease: the key expires on the server while
    // the guard still exists (the key name is `<prefix>lock:<key>`).
    let expired: i64 =
        redis::cmd("PEXPIRE").arg("test:lock:bucket:contested").arg(1).query_async(&mut raw).await.unwrap();
    assert_eq!(expired, 1, "the lock key is not where it should be");
    let newer = locks.acquire("bucket:contested").await.unwrap();
    timeout(PATIENCE, stale.lost()).await.expect("the stale holder never noticed it lost the lease");
    stale.release().await;
    let exists: bool = redis::cmd("EXISTS").arg("test:lock:bucket:contested").query_async(&mut raw).await.unwrap();
    assert!(exists, "the stale holder deleted the newer holder's lock");
    let impatient = redis_locks(&server, 1_500, 100).await;
    assert!(matches!(impatient.acquire("bucket:contested").await, Err(LockError::Timeout { .. })));
    assert!(!newer.is_lost());
}

async fn redis_guard_reports_loss_when_key_is_deleted(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let locks = redis_locks(&server, 600, 5_000).await;
    let guard = locks.acquire("resource:files/x/a.txt").await.unwrap();
    assert!(!guard.is_lost());
    let mut raw = server.connection().await;
    let deleted: i64 = redis::cmd("DEL").arg("test:lock:resource:files/x/a.txt").query_async(&mut raw).await.unwrap();
    assert_eq!(deleted, 1);
    timeout(PATIENCE, guard.lost()).await.expect("the guard never noticed its key was deleted");
    assert!(guard.is_lost());
    assert!(matches!(guard.ensure_held(), Err(LockError::Lost { .. })), "a lost lease is not relied on");
}

/// `ensure_held` trusts a lease only while renewal keeps it well ahead of
/// its expiry: when Redis stops answering, the holder stops trusting it
/// before the key can expire on the server.
#[tokio::test]
async fn redis_guard_is_not_trusted_once_renewal_stops_answering() {
    // CLIENT PAUSE stops one server: the single shape says it plainly.
    let server = redis_server_or_skip!("single");
    let locks = redis_locks(&server, 900, 5_000).await;
    let guard = locks.acquire("bucket:paused").await.unwrap();
    assert!(guard.ensure_held().is_ok());
    // Redis stops answering (a paused server); renewals get no reply.
    let mut raw = server.connection().await;
    let _: () = redis::cmd("CLIENT").arg("PAUSE").arg(2_000).arg("ALL").query_async(&mut raw).await.unwrap();
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(
        matches!(guard.ensure_held(), Err(LockError::Lost { .. })),
        "a lease that may have expired is not relied on"
    );
}

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

#[tokio::test]
async fn in_process_events_reach_every_subscriber() {
    let bus = InProcessEvents::new();
    let (mut first, mut second) = (bus.subscribe(), bus.subscribe());
    let created = event(EventAction::Create, "files/abc/new.txt", Some("e1"));
    bus.publish(created.clone()).await;
    assert_eq!(first.recv().await.unwrap(), created);
    assert_eq!(second.recv().await.unwrap(), created);
}

async fn redis_events_reach_subscribers_of_another_instance(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let (host_a, host_b) = (redis_events(&server, PREFIX).await, redis_events(&server, PREFIX).await);
    let mut on_b = host_b.subscribe();
    let updated = event(EventAction::Update, "files/abc/dir/a b.txt", Some("\"9f86d08\""));
    host_a.publish(updated.clone()).await;
    let received = timeout(PATIENCE, on_b.recv()).await.expect("no event reached the other instance").unwrap();
    assert_eq!(received, updated);
}

async fn redis_events_reach_local_subscribers_exactly_once(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let (host, other_host) = (redis_events(&server, PREFIX).await, redis_events(&server, PREFIX).await);
    let mut local = host.subscribe();
    let (first, second) =
        (event(EventAction::Create, "files/abc/1", Some("e1")), event(EventAction::Delete, "files/abc/1", None));
    host.publish(first.clone()).await;
    host.publish(second.clone()).await;
    // The marker can only come through Redis, after both events there: any
    // duplicate (say, one delivered locally and one through Redis) would
    // arrive before it.
    let marker = event(EventAction::Update, "files/abc/marker", None);
    other_host.publish(marker.clone()).await;
    for expected in [first, second, marker] {
        assert_eq!(timeout(PATIENCE, local.recv()).await.unwrap().unwrap(), expected);
    }
}

async fn redis_events_stay_within_their_key_prefix(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let (ours, theirs) = (redis_events(&server, PREFIX).await, redis_events(&server, "other:").await);
    let mut on_theirs = theirs.subscribe();
    ours.publish(event(EventAction::Update, "files/abc/ours", None)).await;
    let their_event = event(EventAction::Update, "files/abc/theirs", None);
    theirs.publish(their_event.clone()).await;
    // Redis delivers in publish order, so a leak would arrive first.
    assert_eq!(timeout(PATIENCE, on_theirs.recv()).await.unwrap().unwrap(), their_event);
}

/// Events published while the subscription is down are lost (at-most-once),
/// so keep publishing until one gets through after the outage.
async fn redis_events_resume_after_an_outage(shape: &str) {
    let mut server = redis_server_or_skip!(shape);
    let (host_a, host_b) = (redis_events(&server, PREFIX).await, redis_events(&server, PREFIX).await);
    let mut on_b = host_b.subscribe();
    server.outage().await;
    let deadline = Instant::now() + PATIENCE * 3;
    let probe = event(EventAction::Update, "files/abc/after-outage", Some("e2"));
    loop {
        assert!(Instant::now() < deadline, "events did not resume after the outage ({shape})");
        host_a.publish(probe.clone()).await;
        if let Ok(received) = timeout(Duration::from_millis(200), on_b.recv()).await {
            assert_eq!(received.unwrap(), probe);
            break;
        }
    }
}

/// While Redis (or the part of it a key lives on) is away, taking a lock
/// fails at once with a Redis error — never by waiting out the 30 s acquire
/// timeout — and once it is back, locks are taken again without a new
/// connection. The longest refusal is printed (not asserted: two shared cores).
async fn locks_are_refused_fast_during_an_outage_and_then_resume(shape: &str) {
    let mut server = redis_server_or_skip!(shape);
    let locks = redis_locks(&server, 2_000, 30_000).await;
    drop(locks.acquire("bucket:before").await.unwrap());
    let (refusals, slowest, outage) = server.during_outage(locks.clone()).await;
    assert!(refusals > 0, "no lock was refused while Redis was away ({shape})");
    let deadline = Instant::now() + PATIENCE * 3;
    let resumed = loop {
        match locks.acquire("bucket:after").await {
            Ok(guard) => break guard,
            Err(LockError::Redis(_)) if Instant::now() < deadline => sleep(Duration::from_millis(50)).await,
            Err(error) => panic!("locks did not resume after the outage ({shape}): {error}"),
        }
    };
    assert!(!resumed.is_lost());
    eprintln!("{shape}: {outage}: {refusals} acquisitions refused, the slowest refusal took {slowest:?}");
}

impl RedisServer {
    /// Takes Redis away and brings it back: a restart (single), a primary
    /// killed and restarted (cluster), a failover (sentinel).
    async fn outage(&mut self) {
        match self {
            Self::Single(redis) => redis.restart(),
            Self::Cluster(cluster) => {
                cluster.kill(0);
                sleep(Duration::from_millis(500)).await;
                tokio::task::block_in_place(|| cluster.restart(0));
            }
            Self::Sentinel(sentinel) => tokio::task::block_in_place(|| sentinel.fail_over()),
        }
    }

    /// Tries locks in a loop while Redis goes away and comes back; returns
    /// how many were refused (each with a Redis error, never a timeout), the
    /// slowest refusal and what the outage was.
    async fn during_outage(&mut self, locks: Arc<dyn LockService>) -> (usize, Duration, &'static str) {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The keys to try: on a cluster, ones whose slots the killed primary
        // (the first node: slots 0–5460) serves.
        let keys: Vec<String> = match self {
            Self::Cluster(cluster) => (0..200)
                .map(|i| format!("bucket:k{i}"))
                .filter(|key| cluster.slot_of(&format!("{PREFIX}lock:{key}")) <= 5460)
                .take(5)
                .collect(),
            _ => (0..5).map(|i| format!("bucket:k{i}")).collect(),
        };
        assert!(!keys.is_empty());
        let tries = tokio::spawn({
            let (locks, stop) = (locks.clone(), stop.clone());
            async move {
                let (mut refusals, mut slowest) = (0, Duration::ZERO);
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    let key = &keys[round % keys.len()];
                    round += 1;
                    let started = Instant::now();
                    match locks.acquire(key).await {
                        Ok(guard) => guard.release().await,
                        Err(LockError::Redis(_)) => {
                            refusals += 1;
                            slowest = slowest.max(started.elapsed());
                        }
                        Err(other) => panic!("a lock during the outage failed otherwise than refused: {other}"),
                    }
                    sleep(Duration::from_millis(20)).await;
                }
                (refusals, slowest)
            }
        });
        sleep(Duration::from_millis(200)).await;
        let what = match self {
            Self::Single(redis) => {
                redis.stop();
                sleep(Duration::from_millis(1_500)).await;
                redis.restart();
                "redis-server stopped for 1.5 s"
            }
            Self::Cluster(cluster) => {
                cluster.kill(0);
                sleep(Duration::from_millis(1_500)).await;
                tokio::task::block_in_place(|| cluster.restart(0));
                "a cluster primary killed for 1.5 s"
            }
            Self::Sentinel(sentinel) => {
                tokio::task::block_in_place(|| sentinel.fail_over());
                "the primary killed, the replica promoted by Sentinel"
            }
        };
        sleep(Duration::from_millis(1_000)).await;
        stop.store(true, Ordering::Relaxed);
        let (refusals, slowest) = tries.await.unwrap();
        (refusals, slowest, what)
    }
}

// ---------------------------------------------------------------------------
// Per-request keys
// ---------------------------------------------------------------------------

fn key_data(expires_in: Duration) -> dial_host::keys::KeyData {
    use dial_host::identity::Identity;
    use dial_host::keys::{KeyData, KeyGrant, Originator};
    KeyData {
        id: Default::default(),
        user: Originator { identity: Identity::User { id: "alice".into() }, roles: vec!["user".into()], claims: None },
        app: "echo".into(),
        app_id: "echo".into(),
        execution_path: vec!["alice".into(), "echo".into()],
        trace_id: "trace".into(),
        grants: vec![KeyGrant { url: "files/B/doc.txt".into(), read: true, write: false }],
        received: vec![],
        passed_on: vec![],
        expires_at: dial_host::keys::expiry(expires_in),
        changes_taken: 0,
    }
}

/// A key minted by one instance works on every other until it is revoked
/// or its TTL runs out; instances see the same data.
async fn redis_keys_are_shared_by_instances_and_end_on_revoke_or_ttl(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let first = dial_host::keys::from_config(Some(&server.connection().await), PREFIX);
    let second = dial_host::keys::from_config(Some(&server.connection().await), PREFIX);
    let key = first.mint(key_data(Duration::from_secs(60)), Duration::from_secs(60)).await.unwrap();
    assert!(dial_host::keys::looks_like_key(&key));
    let seen = second.get(&key).await.unwrap().expect("visible to the other instance");
    assert_eq!(*seen, key_data_like(&seen));
    assert_eq!(second.alive().await.unwrap(), 1);
    second.revoke(key.clone()).await.unwrap();
    assert!(first.get(&key).await.unwrap().is_none(), "revoked everywhere");

    let short = first.mint(key_data(Duration::from_millis(200)), Duration::from_secs(60)).await.unwrap();
    assert!(second.get(&short).await.unwrap().is_some());
    sleep(Duration::from_millis(400)).await;
    assert!(second.get(&short).await.unwrap().is_none(), "gone with its TTL");
    assert_eq!(first.alive().await.unwrap(), 0);

    // Held one lease at a time: renewed, it lives on; not renewed, it lapses
    // long before its TTL (the instance that minted it died).
    let leased = first.mint(key_data(Duration::from_secs(60)), Duration::from_millis(300)).await.unwrap();
    for _ in 0..4 {
        sleep(Duration::from_millis(150)).await;
        assert!(second.renew(&leased, Duration::from_millis(300)).await.unwrap(), "renewed while alive");
    }
    assert!(first.get(&leased).await.unwrap().is_some(), "600 ms after minting, renewed");
    sleep(Duration::from_millis(500)).await;
    assert!(first.get(&leased).await.unwrap().is_none(), "lapsed one lease after the last renewal");
    assert!(!second.renew(&leased, Duration::from_millis(300)).await.unwrap(), "a lapsed key is not revived");
}

fn key_data_like(seen: &dial_host::keys::KeyData) -> dial_host::keys::KeyData {
    dial_host::keys::KeyData { id: seen.id.clone(), expires_at: seen.expires_at, ..key_data(Duration::ZERO) }
}

/// A live key's changes (an answer's attachments granted, access passed on
/// and taken back) made through one instance are seen by every other, in
/// order; they are held and dropped with the key, and bounded.
async fn redis_key_changes_are_shared_and_live_and_die_with_the_key(shape: &str) {
    use dial_host::keys::{Changed, KeyChange, KeyGrant, MAX_KEY_CHANGES};
    let server = redis_server_or_skip!(shape);
    let first = dial_host::keys::from_config(Some(&server.connection().await), PREFIX);
    let second = dial_host::keys::from_config(Some(&server.connection().await), PREFIX);
    let key = first.mint(key_data(Duration::from_secs(60)), Duration::from_millis(400)).await.unwrap();
    let pass = |url: &str| KeyChange::PassOn { receiver: "b".into(), url: url.into(), read: true, write: false };
    let changes =
        vec![KeyChange::Grant { url: "files/B/answer.txt".into(), read: true, write: false }, pass("files/B/x")];
    assert_eq!(first.change(&key, changes).await.unwrap(), Changed::Applied);
    let withdraw = KeyChange::Withdraw { receiver: "b".into(), url: "files/B/x".into(), read: true, write: true };
    assert_eq!(second.change(&key, vec![pass("files/B/y"), withdraw]).await.unwrap(), Changed::Applied);
    let seen = second.get(&key).await.unwrap().expect("alive");
    assert!(seen.grants.contains(&KeyGrant { url: "files/B/answer.txt".into(), read: true, write: false }));
    assert_eq!(seen.passed_to("b"), [KeyGrant { url: "files/B/y".into(), read: true, write: false }], "in order");

    // The changes are held as long as the key: a renewal extends both.
    let mut redis = server.connection().await;
    let pttl = |name: String| {
        let mut redis = redis.clone();
        async move { redis::cmd("PTTL").arg(name).query_async::<i64>(&mut redis).await.unwrap() }
    };
    // Hash-tagged on the key: on a cluster both live in its slot, so the scripts may touch both.
    let changes_key = format!("{PREFIX}prk-changes:{{{key}}}");
    assert!((1..=400).contains(&pttl(changes_key.clone()).await), "held for the key's lease");
    assert!(second.renew(&key, Duration::from_secs(50)).await.unwrap());
    assert!(pttl(changes_key.clone()).await > 40_000, "renewed with the key");
    assert!(pttl(format!("{PREFIX}prk:{{{key}}}")).await > 40_000);
    let many = vec![pass("files/B/z"); MAX_KEY_CHANGES];
    assert_eq!(first.change(&key, many).await.unwrap(), Changed::Full);

    // Revoked: the changes go with it, and a gone key takes none.
    second.revoke(key.clone()).await.unwrap();
    assert_eq!(first.change(&key, vec![pass("files/B/q")]).await.unwrap(), Changed::Gone);
    let left: i64 = redis::cmd("EXISTS")
        .arg(format!("{PREFIX}prk:{{{key}}}"))
        .arg(changes_key)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(left, 0, "nothing of the key is left");
}

/// On a cluster, per-request keys live on every primary: counting them walks
/// all of them.
async fn keys_spread_over_the_cluster_are_all_counted(shape: &str) {
    let server = redis_server_or_skip!(shape);
    let store = dial_host::keys::from_config(Some(&server.connection().await), PREFIX);
    let mut minted = Vec::new();
    for _ in 0..30 {
        minted.push(store.mint(key_data(Duration::from_secs(60)), Duration::from_secs(60)).await.unwrap());
    }
    assert_eq!(store.alive().await.unwrap(), 30);
    if let RedisServer::Cluster(cluster) = &server {
        let slots: std::collections::BTreeSet<bool> =
            minted.iter().map(|key| cluster.slot_of(&format!("{PREFIX}prk:{{{key}}}")) <= 5460).collect();
        assert_eq!(slots.len(), 2, "keys are not pinned to one primary");
    }
    for key in minted {
        store.revoke(key).await.unwrap();
    }
    assert_eq!(store.alive().await.unwrap(), 0);
}

/// Every Redis test, once per shape.
macro_rules! on_shape {
    ($module:ident, $shape:literal) => {
        mod $module {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn locks_give_mutual_exclusion_across_instances() {
                super::redis_locks_give_mutual_exclusion_across_instances($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn second_acquirer_gets_lock_after_release() {
                super::redis_second_acquirer_gets_lock_after_release($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn acquire_times_out_naming_the_key() {
                super::redis_acquire_times_out_naming_the_key($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn renewal_keeps_lock_held_past_its_ttl() {
                super::redis_renewal_keeps_lock_held_past_its_ttl($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stale_holder_cannot_release_newer_holders_lock() {
                super::redis_stale_holder_cannot_release_newer_holders_lock($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn guard_reports_loss_when_key_is_deleted() {
                super::redis_guard_reports_loss_when_key_is_deleted($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn events_reach_subscribers_of_another_instance() {
                super::redis_events_reach_subscribers_of_another_instance($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn events_reach_local_subscribers_exactly_once() {
                super::redis_events_reach_local_subscribers_exactly_once($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn events_stay_within_their_key_prefix() {
                super::redis_events_stay_within_their_key_prefix($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn events_resume_after_an_outage() {
                super::redis_events_resume_after_an_outage($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn locks_are_refused_fast_during_an_outage_and_then_resume() {
                super::locks_are_refused_fast_during_an_outage_and_then_resume($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn keys_are_shared_by_instances_and_end_on_revoke_or_ttl() {
                super::redis_keys_are_shared_by_instances_and_end_on_revoke_or_ttl($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn key_changes_are_shared_and_live_and_die_with_the_key() {
                super::redis_key_changes_are_shared_and_live_and_die_with_the_key($shape).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn keys_spread_over_the_cluster_are_all_counted() {
                super::keys_spread_over_the_cluster_are_all_counted($shape).await;
            }
        }
    };
}

on_shape!(single, "single");
on_shape!(cluster, "cluster");
on_shape!(sentinel, "sentinel");
