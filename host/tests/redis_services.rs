//! Locks and change events, in-process and against a real `redis-server`.
//!
//! Each Redis test starts its own throwaway server on a free port. Without
//! `redis-server` installed the Redis tests are skipped with a note, except
//! in CI (`CI=true`), where a missing server is a failure: a skipped suite
//! there would hide regressions.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use dial_host::config::LockConfig;
use dial_host::events::{EventAction, EventBus, InProcessEvents, RedisEvents, ResourceEvent};
use dial_host::locks::{InProcessLocks, LockError, LockService, RedisLocks};
use redis::aio::ConnectionManager;
use tokio::time::{Instant, sleep, timeout};

/// Long enough for a slow CI machine; only ever waited out when a test fails.
const PATIENCE: Duration = Duration::from_secs(10);
const PREFIX: &str = "test:";

struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// A fresh server, or `None` (after a note) when `redis-server` is not
    /// installed and this is not CI.
    async fn start() -> Option<Self> {
        if let Err(error) = Command::new("redis-server").arg("--version").stdout(Stdio::null()).status() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "redis-server is required in CI (apt-get install redis-server): {error}"
            );
            eprintln!("note: skipping Redis test, redis-server is not installed ({error})");
            return None;
        }
        // A port picked this way can be taken before the server binds it;
        // retry with another one if the server exits at once.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).unwrap().port();
            let mut server = Self { child: spawn_server(port), port };
            if server.wait_until_ready().await {
                return Some(server);
            }
        }
        panic!("redis-server did not start");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap()
    }

    async fn connection(&self) -> ConnectionManager {
        self.client().get_connection_manager().await.unwrap()
    }

    /// Kills the server and starts a new, empty one on the same port.
    async fn restart(&mut self) {
        self.stop();
        self.child = spawn_server(self.port);
        assert!(self.wait_until_ready().await, "redis-server did not restart on port {}", self.port);
    }

    /// Whether the server answers PING before [`PATIENCE`] runs out; false
    /// at once if it exited.
    async fn wait_until_ready(&mut self) -> bool {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if let Ok(mut connection) = self.client().get_multiplexed_async_connection().await
                && redis::cmd("PING").query_async::<String>(&mut connection).await.is_ok()
            {
                return true;
            }
            sleep(Duration::from_millis(20)).await;
        }
        self.stop();
        false
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn_server(port: u16) -> Child {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Starts a server or returns from the test (see [`RedisServer::start`]).
macro_rules! redis_server_or_skip {
    () => {
        match RedisServer::start().await {
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
    RedisEvents::connect(server.client(), server.connection().await, key_prefix).await.unwrap()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_locks_give_mutual_exclusion_across_instances() {
    let server = redis_server_or_skip!();
    let hosts = [redis_locks(&server, 10_000, 30_000).await, redis_locks(&server, 10_000, 30_000).await];
    assert_mutual_exclusion(&hosts).await;
}

#[tokio::test]
async fn in_process_second_acquirer_gets_lock_after_release() {
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&lock_config(1_000, 30_000)));
    assert_waiter_gets_lock_after_release(locks.clone(), locks).await;
}

#[tokio::test]
async fn redis_second_acquirer_gets_lock_after_release() {
    let server = redis_server_or_skip!();
    let (first, second) = (redis_locks(&server, 10_000, 30_000).await, redis_locks(&server, 10_000, 30_000).await);
    assert_waiter_gets_lock_after_release(first, second).await;
}

#[tokio::test]
async fn in_process_acquire_times_out_naming_the_key() {
    let locks = InProcessLocks::new(&lock_config(1_000, 100));
    assert_acquire_times_out(&locks, &locks).await;
}

#[tokio::test]
async fn redis_acquire_times_out_naming_the_key() {
    let server = redis_server_or_skip!();
    let (holder, impatient) = (redis_locks(&server, 10_000, 30_000).await, redis_locks(&server, 10_000, 100).await);
    assert_acquire_times_out(holder.as_ref(), impatient.as_ref()).await;
}

// ---------------------------------------------------------------------------
// Redis leases
// ---------------------------------------------------------------------------

#[tokio::test]
async fn redis_renewal_keeps_lock_held_past_its_ttl() {
    let server = redis_server_or_skip!();
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

#[tokio::test]
async fn redis_stale_holder_cannot_release_newer_holders_lock() {
    let server = redis_server_or_skip!();
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

#[tokio::test]
async fn redis_guard_reports_loss_when_key_is_deleted() {
    let server = redis_server_or_skip!();
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
    let server = redis_server_or_skip!();
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

#[tokio::test]
async fn redis_events_reach_subscribers_of_another_instance() {
    let server = redis_server_or_skip!();
    let (host_a, host_b) = (redis_events(&server, PREFIX).await, redis_events(&server, PREFIX).await);
    let mut on_b = host_b.subscribe();
    let updated = event(EventAction::Update, "files/abc/dir/a b.txt", Some("\"9f86d08\""));
    host_a.publish(updated.clone()).await;
    let received = timeout(PATIENCE, on_b.recv()).await.expect("no event reached the other instance").unwrap();
    assert_eq!(received, updated);
}

#[tokio::test]
async fn redis_events_reach_local_subscribers_exactly_once() {
    let server = redis_server_or_skip!();
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

#[tokio::test]
async fn redis_events_stay_within_their_key_prefix() {
    let server = redis_server_or_skip!();
    let (ours, theirs) = (redis_events(&server, PREFIX).await, redis_events(&server, "other:").await);
    let mut on_theirs = theirs.subscribe();
    ours.publish(event(EventAction::Update, "files/abc/ours", None)).await;
    let their_event = event(EventAction::Update, "files/abc/theirs", None);
    theirs.publish(their_event.clone()).await;
    // Redis delivers in publish order, so a leak would arrive first.
    assert_eq!(timeout(PATIENCE, on_theirs.recv()).await.unwrap().unwrap(), their_event);
}

#[tokio::test]
async fn redis_events_resume_after_redis_restarts() {
    let mut server = redis_server_or_skip!();
    let (host_a, host_b) = (redis_events(&server, PREFIX).await, redis_events(&server, PREFIX).await);
    let mut on_b = host_b.subscribe();
    server.restart().await;
    // Events sent before the subscriber is back are lost (at-most-once), so
    // keep publishing until one gets through.
    let deadline = Instant::now() + PATIENCE * 2;
    let probe = event(EventAction::Update, "files/abc/after-restart", Some("e2"));
    loop {
        assert!(Instant::now() < deadline, "events did not resume after Redis restarted");
        host_a.publish(probe.clone()).await;
        if let Ok(received) = timeout(Duration::from_millis(200), on_b.recv()).await {
            assert_eq!(received.unwrap(), probe);
            break;
        }
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
    }
}

/// A key minted by one instance works on every other until it is revoked
/// or its TTL runs out; instances see the same data.
#[tokio::test]
async fn redis_keys_are_shared_by_instances_and_end_on_revoke_or_ttl() {
    let server = redis_server_or_skip!();
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
#[tokio::test]
async fn redis_key_changes_are_shared_and_live_and_die_with_the_key() {
    use dial_host::keys::{Changed, KeyChange, KeyGrant, MAX_KEY_CHANGES};
    let server = redis_server_or_skip!();
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
    let changes_key = format!("{PREFIX}prk-changes:{key}");
    assert!((1..=400).contains(&pttl(changes_key.clone()).await), "held for the key's lease");
    assert!(second.renew(&key, Duration::from_secs(50)).await.unwrap());
    assert!(pttl(changes_key.clone()).await > 40_000, "renewed with the key");
    assert!(pttl(format!("{PREFIX}prk:{key}")).await > 40_000);
    let many = vec![pass("files/B/z"); MAX_KEY_CHANGES];
    assert_eq!(first.change(&key, many).await.unwrap(), Changed::Full);

    // Revoked: the changes go with it, and a gone key takes none.
    second.revoke(key.clone()).await.unwrap();
    assert_eq!(first.change(&key, vec![pass("files/B/q")]).await.unwrap(), Changed::Gone);
    let left: Vec<String> = redis::cmd("KEYS").arg(format!("{PREFIX}prk*")).query_async(&mut redis).await.unwrap();
    assert!(left.is_empty(), "nothing of the key is left: {left:?}");
}
