//! Per-type quotas (`handlers.types.<group>.quota`) in the folder engine:
//! counted at commit, freed by deletes, held by commits racing on two
//! instances that share no lock, and counted afresh when a quota is set
//! again after a time without one.

#[path = "../../tests/instrumented_store.rs"]
mod instrumented_store;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use dial_host::buckets::BucketLocation;
use dial_host::config::{FoldersConfig, HandlersConfig, LockConfig, TypeQuota, TypeSettings};
use dial_host::etag::Preconditions;
use dial_host::events::{EventBus, InProcessEvents};
use dial_host::folders::{FolderEngine, FolderError, Node};
use dial_host::handlers::{Handler, HandlerRegistry, Runtime, RuntimeLimits};
use dial_host::locks::{InProcessLocks, LockService};
use dial_host::resource_url::{Intent, ResourceUrl};
use futures_util::stream;
use instrumented_store::InstrumentedStore;
use object_store::ObjectStore;
use object_store::memory::InMemory;

async fn skill_handler() -> Handler {
    let runtime = Runtime::new(RuntimeLimits::default(), None, false).unwrap();
    let registry = HandlerRegistry::load(runtime, &HandlersConfig::default()).await.unwrap();
    registry.get("skills").unwrap()
}

/// An engine (one instance: its own locks) whose skills have `quota`.
async fn engine_with(store: &Arc<dyn ObjectStore>, quota: Option<TypeQuota>) -> FolderEngine {
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&LockConfig::default()));
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    let types = BTreeMap::from([("skills".to_string(), TypeSettings { quota, ..Default::default() })]);
    let engine = FolderEngine::new(store.clone(), locks, events, FoldersConfig::default(), types);
    engine.settle_quotas().await.unwrap();
    engine
}

fn node_in(bucket: &str, name: &str) -> Node {
    let url = ResourceUrl::parse(&format!("skills/{bucket}/{name}"), Intent::Write).unwrap();
    Node::new(url, BucketLocation::User(bucket.into())).unwrap()
}

fn node(name: &str) -> Node {
    node_in("bucket1", name)
}

/// A skill whose SKILL.md is `size` bytes or a little more.
fn skill_md(name: &str, size: usize) -> Vec<u8> {
    let mut text = format!("---\nname: {name}\ndescription: A skill for the quota tests.\n---\n");
    while text.len() < size {
        text.push_str("body\n");
    }
    text.into_bytes()
}

async fn put(engine: &FolderEngine, handler: &Handler, node: &Node, size: usize) -> Result<(), FolderError> {
    let conditions = Preconditions::default();
    let mut staging = engine.stage(node, handler, &conditions).await?;
    let name = node.url.name().unwrap().to_string();
    let content = Bytes::from(skill_md(&name, size));
    staging.add_file("SKILL.md", stream::iter(vec![Ok::<_, std::io::Error>(content)])).await?;
    engine.commit(staging, handler, &conditions, Some("alice".into())).await.map(|_| ())
}

fn refused_by(result: Result<(), FolderError>, quota: &str) -> String {
    match result {
        Err(FolderError::TooLarge(message)) => {
            assert!(message.contains(&format!("handlers.types.skills.quota.{quota}")), "{message}");
            message
        }
        other => panic!("expected a 413 naming {quota}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_bucket_holds_at_most_max_resources_and_a_delete_frees_a_slot() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let handler = skill_handler().await;
    let engine = engine_with(&store, Some(TypeQuota { max_resources: Some(2), max_bytes: None })).await;
    put(&engine, &handler, &node("a"), 100).await.unwrap();
    put(&engine, &handler, &node("b"), 100).await.unwrap();
    // Replacing one is no new resource.
    put(&engine, &handler, &node("a"), 200).await.unwrap();
    let message = refused_by(put(&engine, &handler, &node("c"), 100).await, "max_resources");
    assert!(message.contains("already holds 2 skills of the 2"), "{message}");
    assert!(engine.live_marker(&node("c")).await.unwrap().is_none(), "nothing of the refused skill is live");
    // Another bucket has a quota of its own.
    put(&engine, &handler, &node_in("bucket2", "c"), 100).await.unwrap();

    engine.delete_resource(&node("a"), &Preconditions::default()).await.unwrap();
    put(&engine, &handler, &node("c"), 100).await.unwrap();
    // A restore makes one more: refused while the bucket is full.
    refused_by(engine.restore(&node("a")).await.map(|_| ()), "max_resources");
    engine.delete_resource(&node("b"), &Preconditions::default()).await.unwrap();
    engine.restore(&node("a")).await.unwrap();
    assert_eq!(engine.usage(&node("a")).await.unwrap().resources, 2);
}

#[tokio::test]
async fn max_bytes_counts_current_versions_and_file_changes() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let handler = skill_handler().await;
    let engine = engine_with(&store, Some(TypeQuota { max_resources: None, max_bytes: Some(3_000) })).await;
    put(&engine, &handler, &node("a"), 1_000).await.unwrap();
    put(&engine, &handler, &node("b"), 1_000).await.unwrap();
    let message = refused_by(put(&engine, &handler, &node("c"), 1_500).await, "max_bytes");
    assert!(message.contains("over the 3000"), "{message}");
    // A bigger version of one: refused; a smaller one frees bytes.
    refused_by(put(&engine, &handler, &node("a"), 2_500).await, "max_bytes");
    put(&engine, &handler, &node("a"), 100).await.unwrap();
    put(&engine, &handler, &node("c"), 1_500).await.unwrap();
    let usage = engine.usage(&node("a")).await.unwrap();
    let mut expected = 0;
    for name in ["a", "b", "c"] {
        let marker = engine.live_marker(&node(name)).await.unwrap().unwrap();
        expected += marker.files.values().map(|file| file.size).sum::<u64>();
    }
    assert_eq!((usage.resources, usage.bytes), (3, expected));

    // A file added through the single-file route counts too.
    let extra = Bytes::from(vec![b'x'; 1_000]);
    let added = engine
        .put_file(
            &node("b"),
            "notes.txt",
            stream::iter(vec![Ok::<_, std::io::Error>(extra)]),
            &handler,
            &Preconditions::default(),
            None,
            None,
        )
        .await;
    refused_by(added.map(|_| ()), "max_bytes");
    assert_eq!(engine.usage(&node("a")).await.unwrap().bytes, expected, "a refused change counts nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_racing_on_two_instances_cannot_both_take_the_last_slot() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let handler = skill_handler().await;
    let quota = Some(TypeQuota { max_resources: Some(3), max_bytes: None });
    // Two instances that share the store and no lock.
    let (first, second) = (engine_with(&store, quota).await, engine_with(&store, quota).await);
    put(&first, &handler, &node("seed"), 100).await.unwrap();
    for round in 0..5 {
        let names: Vec<String> = (0..8).map(|i| format!("r{round}-{i}")).collect();
        let commits = names.iter().enumerate().map(|(i, name)| {
            let (engine, handler) = (if i % 2 == 0 { &first } else { &second }, &handler);
            async move { put(engine, handler, &node(name), 100).await }
        });
        let outcomes = futures_util::future::join_all(commits).await;
        let live = futures_util::future::join_all(names.iter().map(|name| is_live(&first, name))).await;
        let committed = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
        assert_eq!(committed, live.iter().filter(|live| **live).count(), "what was answered is what is live");
        let usage = first.usage(&node("seed")).await.unwrap();
        assert!(usage.resources <= 3, "round {round}: {usage:?} after {outcomes:?}");
        for outcome in outcomes.into_iter().filter(Result::is_err) {
            refused_by(outcome, "max_resources");
        }
        // Empty the bucket but the seed for the next round.
        for (name, live) in names.iter().zip(live) {
            if live {
                first.delete_resource(&node(name), &Preconditions::default()).await.unwrap();
            }
        }
        assert_eq!(first.usage(&node("seed")).await.unwrap().resources, 1);
    }
}

/// The two count updates reach the store together, each having read the
/// count with one slot left: only the compare-and-swap tells them apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_commits_that_read_the_same_count_cannot_both_take_the_last_slot() {
    let instrumented = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let store: Arc<dyn ObjectStore> = instrumented.clone();
    let handler = skill_handler().await;
    let quota = Some(TypeQuota { max_resources: Some(2), max_bytes: None });
    let (first, second) = (engine_with(&store, quota).await, engine_with(&store, quota).await);
    put(&first, &handler, &node("seed"), 100).await.unwrap();
    let gate = instrumented.hold_writes_to(".dial-usage");
    let (one, two) = (node("one"), node("two"));
    let racing = async { tokio::join!(put(&first, &handler, &one, 100), put(&second, &handler, &two, 100)) };
    let opener = async {
        while gate.waiting.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            gate.arrived.notified().await;
        }
        gate.open();
    };
    let ((one, two), ()) = tokio::join!(racing, opener);
    assert!(one.is_ok() != two.is_ok(), "exactly one gets the slot: {one:?} {two:?}");
    refused_by(if one.is_err() { one } else { two }, "max_resources");
    assert_eq!(first.usage(&node("seed")).await.unwrap().resources, 2);
}

async fn is_live(engine: &FolderEngine, name: &str) -> bool {
    engine.live_marker(&node(name)).await.unwrap().is_some()
}

#[tokio::test]
async fn a_quota_set_again_counts_what_was_written_without_one() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let handler = skill_handler().await;
    let quota = Some(TypeQuota { max_resources: Some(3), max_bytes: None });
    let limited = engine_with(&store, quota).await;
    put(&limited, &handler, &node("a"), 100).await.unwrap();
    assert_eq!(limited.usage(&node("a")).await.unwrap().resources, 1);
    // A restart without the quota: writes nobody counts.
    let unlimited = engine_with(&store, None).await;
    for name in ["b", "c", "d"] {
        put(&unlimited, &handler, &node(name), 100).await.unwrap();
    }
    // The quota again (a later restart): the bucket holds 4, over 3.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let limited = engine_with(&store, quota).await;
    refused_by(put(&limited, &handler, &node("e"), 100).await, "max_resources");
    assert_eq!(limited.usage(&node("a")).await.unwrap().resources, 4);
}
