//! Partitions, with real Redis and a real store (moto): an instance cut off
//! from Redis by a relay the test controls (`tests/partition.rs`) while
//! another instance goes on.
//!
//! - How long a cut-off holder keeps trusting a lease it can no longer renew,
//!   against when another instance can take the lock: the holder must stop
//!   first (measured and printed; the order is asserted, not the times).
//! - A commit the cut-off instance sends after the other instance has taken
//!   the lock and committed is refused by the store (the marker's ETag is
//!   the fence), and the other instance's write stands.
//!
//! The black-box side (instances answering 503 and recovering without a
//! restart, cut off from Redis and from the store) is in
//! `tests/blackbox/partitions.rs`.

#[path = "../../tests/instrumented_store.rs"]
mod instrumented_store;
#[path = "../../tests/partition.rs"]
mod partition;
#[path = "../../tests/services.rs"]
mod services;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dial_host::buckets::BucketLocation;
use dial_host::config::{FoldersConfig, HandlersConfig, LockConfig, RedisConfig};
use dial_host::etag::{EtagMatch, Preconditions};
use dial_host::events::{EventBus, InProcessEvents};
use dial_host::folders::{FolderEngine, FolderError, Node};
use dial_host::handlers::{Handler, HandlerRegistry, Runtime, RuntimeLimits};
use dial_host::locks::{LockError, LockService, RedisLocks};
use dial_host::redis_conn::{Redis, RedisConnection};
use dial_host::resource_url::{Intent, ResourceUrl};
use futures_util::stream;
use instrumented_store::InstrumentedStore;
use object_store::ObjectStore;
use tokio::time::Instant;

async fn connection(url: &str) -> RedisConnection {
    let config = RedisConfig { url: Some(url.into()), timeout_ms: 500, ..RedisConfig::default() };
    Redis::connect(&config).await.unwrap().unwrap().connection()
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap()
}

/// A lease of `ttl_ms` held through a link that is then cut: the holder's
/// `ensure_held` must fail before the other instance's acquisition succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_holder_stops_trusting_its_lease_before_another_can_take_it() {
    let Some(redis) = services::redis() else { return };
    let link = partition::Link::to(port_of(&redis.url)).await;
    let ttl_ms = 3_000;
    let config = LockConfig { ttl_ms, acquire_timeout_ms: 20_000 };
    let cut_off = RedisLocks::new(connection(&link.url("redis")).await, &config, "p:");
    let other = Arc::new(RedisLocks::new(connection(&redis.url).await, &config, "p:"));
    let guard = cut_off.acquire("resource:x").await.unwrap();
    // One renewal (at a third of the TTL) has landed before the cut.
    tokio::time::sleep(Duration::from_millis(ttl_ms / 3 + 300)).await;
    assert!(guard.ensure_held().is_ok());

    link.cut();
    let cut_at = Instant::now();
    let taker = tokio::spawn({
        let other = other.clone();
        async move {
            let guard = other.acquire("resource:x").await.unwrap();
            (Instant::now(), guard)
        }
    });
    let mut stopped_trusting = None;
    let mut declared_lost = None;
    while stopped_trusting.is_none() || declared_lost.is_none() {
        let now = Instant::now();
        if stopped_trusting.is_none() && guard.ensure_held().is_err() {
            stopped_trusting = Some(now);
        }
        if declared_lost.is_none() && guard.is_lost() {
            declared_lost = Some(now);
        }
        assert!(now < cut_at + Duration::from_millis(ttl_ms * 3), "the cut-off holder never noticed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (taken_at, taken) = taker.await.unwrap();
    let (stopped, lost) = (stopped_trusting.unwrap(), declared_lost.unwrap());
    eprintln!(
        "lease {ttl_ms} ms, cut {} ms after the last renewal could have been sent: the cut-off holder trusted it for \
         {:?} after the cut and declared it lost after {:?}; the other instance took the lock {:?} after the cut \
         (margin {:?})",
        ttl_ms / 3 + 300,
        stopped - cut_at,
        lost - cut_at,
        taken_at - cut_at,
        taken_at - stopped
    );
    assert!(stopped < taken_at, "the cut-off holder still trusted its lease when another instance took the lock");

    // Healed, the cut-off instance works again without a new connection: once the lock is free it takes it.
    link.heal();
    drop(guard);
    taken.release().await;
    let again = tokio::time::timeout(Duration::from_secs(10), cut_off.acquire("resource:x")).await;
    assert!(matches!(again, Ok(Ok(_))), "the healed instance could not lock again: {again:?}");
}

async fn skill_handler() -> Handler {
    let runtime = Runtime::new(RuntimeLimits::default(), None, false).unwrap();
    HandlerRegistry::load(runtime, &HandlersConfig::default()).await.unwrap().get("skills").unwrap()
}

fn node(path: &str) -> Node {
    let url = ResourceUrl::parse(&format!("skills/bucket1/{path}"), Intent::Write).unwrap();
    Node::new(url, BucketLocation::User("alice".into())).unwrap()
}

fn skill(description: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("SKILL.md", format!("---\nname: s\ndescription: {description}\n---\nbody\n").into_bytes()),
        ("data.txt", description.repeat(100).into_bytes()),
    ]
}

async fn put_whole(
    engine: &FolderEngine,
    handler: &Handler,
    node: &Node,
    files: &[(&str, Vec<u8>)],
    conditions: &Preconditions,
) -> Result<String, FolderError> {
    let mut staging = engine.stage(node, handler, conditions).await?;
    for (path, content) in files {
        staging.add_file(path, stream::iter(vec![Ok::<_, std::io::Error>(Bytes::copy_from_slice(content))])).await?;
    }
    Ok(engine.commit(staging, handler, conditions, Some("alice".into())).await?.marker.etag)
}

fn engine(store: Arc<dyn ObjectStore>, locks: Arc<dyn LockService>) -> FolderEngine {
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    FolderEngine::new(store, locks, events, FoldersConfig::default(), BTreeMap::new())
}

/// Instance A holds the resource lock and has its marker write in flight
/// when it is cut off from Redis; its lease runs out, instance B takes the
/// lock and commits; then A's write reaches the store — and is refused,
/// because the marker's ETag moved: B's version stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_commit_from_a_cut_off_instance_is_fenced_by_the_marker_etag() {
    let Some(moto) = services::moto() else { return };
    let Some(redis) = services::redis() else { return };
    moto.create_bucket("partition");
    let open = || dial_host::backends::open("s3://partition", &moto.storage_options()).unwrap();
    let link = partition::Link::to(port_of(&redis.url)).await;
    let config = LockConfig { ttl_ms: 1_500, acquire_timeout_ms: 20_000 };
    let a_store = Arc::new(InstrumentedStore::new(open()));
    let a_locks: Arc<dyn LockService> = Arc::new(RedisLocks::new(connection(&link.url("redis")).await, &config, "f:"));
    let b_locks: Arc<dyn LockService> = Arc::new(RedisLocks::new(connection(&redis.url).await, &config, "f:"));
    let a = Arc::new(engine(a_store.clone(), a_locks));
    let b = engine(open(), b_locks);
    let handler = skill_handler().await;
    let target = node("team/fenced");
    let first = put_whole(&b, &handler, &target, &skill("first"), &Preconditions::default()).await.unwrap();

    // A's commit stops at its marker write, lock held, marker re-read.
    let gate = a_store.hold_writes_to(target.paths().resource_marker().as_ref());
    let late = tokio::spawn({
        let (a, handler, target) = (a.clone(), handler.clone(), target.clone());
        let conditions = Preconditions { if_match: Some(EtagMatch::Tags(vec![first.clone()])), if_none_match: None };
        async move { put_whole(&a, &handler, &target, &skill("late"), &conditions).await }
    });
    gate.arrived.notified().await;
    link.cut();
    // B waits for A's lease to run out in Redis, then commits on the same version A read.
    let conditions = Preconditions { if_match: Some(EtagMatch::Tags(vec![first.clone()])), if_none_match: None };
    let won = put_whole(&b, &handler, &target, &skill("winner"), &conditions).await.unwrap();
    assert_ne!(won, first);

    // A's held writes now reach the store, after B's commit.
    gate.open();
    let outcome = late.await.unwrap();
    // The store refuses the held marker write (its ETag moved): the engine then answers 412 when it can
    // re-read, or 503 when what it tries next needs the lock service it is still cut off from.
    assert!(
        matches!(
            outcome,
            Err(FolderError::Precondition(_)) | Err(FolderError::Lock(LockError::Lost { .. } | LockError::Redis(_)))
        ),
        "the late commit must be refused: {outcome:?}"
    );
    let marker = b.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(marker.etag, won, "B's acknowledged write stands");
    eprintln!("the late commit of the cut-off instance was answered: {outcome:?}");

    // Healed, A commits again on what it reads now.
    link.heal();
    let conditions = Preconditions { if_match: Some(EtagMatch::Tags(vec![won.clone()])), if_none_match: None };
    let after =
        tokio::time::timeout(Duration::from_secs(20), put_whole(&a, &handler, &target, &skill("after"), &conditions))
            .await
            .expect("the healed instance commits without a restart");
    assert!(after.is_ok(), "{after:?}");
}
