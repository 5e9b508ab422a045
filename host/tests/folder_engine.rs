//! The folder engine against real stores: crash consistency with injected
//! storage failures, the GC sweep, and racing writers on S3 (moto) and Azure
//! (Azurite) with in-process and Redis locks.

#[path = "../../tests/instrumented_store.rs"]
mod instrumented_store;
#[path = "../../tests/services.rs"]
mod services;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dial_host::buckets::BucketLocation;
use dial_host::config::{FoldersConfig, HandlersConfig, LockConfig};
use dial_host::etag::{EtagMatch, Preconditions};
use dial_host::events::{EventBus, InProcessEvents};
use dial_host::folders::marker::ResourceMarker;
use dial_host::folders::{Becomes, FolderEngine, FolderError, Node, Order};
use dial_host::handlers::{Handler, HandlerRegistry, Runtime, RuntimeLimits};
use dial_host::locks::{InProcessLocks, LockService};
use dial_host::resource_url::{Intent, ResourceUrl};
use futures_util::stream::{self, TryStreamExt};
use instrumented_store::InstrumentedStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

// ----- fixtures -------------------------------------------------------------

async fn skill_handler() -> Handler {
    let runtime = Runtime::new(RuntimeLimits::default(), None, false).unwrap();
    let registry = HandlerRegistry::load(runtime, &HandlersConfig::default()).await.unwrap();
    registry.get("skills").unwrap()
}

fn engine_on(store: Arc<dyn ObjectStore>, locks: Arc<dyn LockService>) -> FolderEngine {
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    FolderEngine::new(store, locks, events, FoldersConfig::default(), BTreeMap::new())
}

/// An engine whose types keep `keep_versions` versions (and any younger
/// than `keep_days`).
fn engine_keeping(store: Arc<dyn ObjectStore>, keep_versions: u32, keep_days: f64) -> FolderEngine {
    engine_retaining(store, keep_versions, keep_days, FoldersConfig::default().grace_seconds)
}

fn engine_retaining(
    store: Arc<dyn ObjectStore>,
    keep_versions: u32,
    keep_days: f64,
    grace_seconds: u64,
) -> FolderEngine {
    let config =
        FoldersConfig { keep_versions, keep_versions_days: keep_days, grace_seconds, ..FoldersConfig::default() };
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    FolderEngine::new(store, in_process_locks(), events, config, BTreeMap::new())
}

fn in_process_locks() -> Arc<dyn LockService> {
    Arc::new(InProcessLocks::new(&LockConfig::default()))
}

fn node(path: &str) -> Node {
    let url = ResourceUrl::parse(&format!("skills/bucket1/{path}"), Intent::Write).unwrap();
    Node::new(url, BucketLocation::User("alice".into())).unwrap()
}

fn skill_md(description: &str) -> Vec<u8> {
    format!("---\nname: s\ndescription: {description}\n---\nbody\n").into_bytes()
}

fn body(content: &[u8]) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    stream::iter(vec![Ok(Bytes::copy_from_slice(content))])
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
        staging.add_file(path, body(content)).await?;
    }
    Ok(engine.commit(staging, handler, conditions, Some("alice".into())).await?.marker.etag)
}

/// The files a reader sees, read through the marker; `None` when absent.
async fn read_back(engine: &FolderEngine, node: &Node) -> Option<BTreeMap<String, Vec<u8>>> {
    let marker = engine.live_marker(node).await.unwrap()?;
    let mut files = BTreeMap::new();
    for path in marker.files.keys() {
        let (object, _) = engine.file_path(node, &marker, path).unwrap();
        let bytes =
            engine.store().get(&object).await.expect("every file the marker lists exists").bytes().await.unwrap();
        files.insert(path.clone(), bytes.to_vec());
    }
    Some(files)
}

fn as_map(files: &[(&str, Vec<u8>)]) -> BTreeMap<String, Vec<u8>> {
    files.iter().map(|(p, c)| (p.to_string(), c.clone())).collect()
}

/// Every object left is a marker, a file of a version the marker keeps
/// (current or retained), or a retained version's manifest; and every
/// version the marker keeps is whole. A deleted resource leaves nothing.
async fn assert_no_orphans(engine: &FolderEngine, node: &Node) {
    let all: Vec<Path> = engine.store().list(None).map_ok(|m| m.location).try_collect().await.unwrap();
    let marker = engine.live_marker(node).await.unwrap();
    let mut expected: Vec<Path> = Vec::new();
    if let Some(marker) = &marker {
        expected.push(node.paths().resource_marker());
        for version in marker.referenced_versions() {
            let kept = engine.version_for_read(node, version).await.expect("every version the marker keeps reads");
            if version != marker.current_version {
                expected.push(node.paths().version(version).join(".dial-resource"));
            }
            for path in kept.files.keys() {
                expected.push(node.paths().file(version, path));
            }
        }
    }
    for path in &expected {
        assert!(all.contains(path), "{path} is referenced but missing");
    }
    // A commit that failed after keeping the manifest of the version it was
    // to supersede leaves it beside that (still current) version: it goes
    // with the version, and is rewritten when the version is superseded.
    // The creation index names a live resource; an entry of one that never
    // committed (a crash) or is gone is skipped by readers, which remove it.
    let indexed: Vec<&str> = all.iter().map(|p| p.as_ref()).filter(|p| p.contains("/.dial-created/")).collect();
    if let Some(marker) = &marker {
        let entry = format!("/.dial-created/a/{:019}-", marker.created_at);
        assert!(
            indexed.iter().any(|p| p.contains(&entry)),
            "the live resource is not in the creation index: {indexed:?}"
        );
    }
    let current_manifest = marker.map(|m| node.paths().version(&m.current_version).join(".dial-resource"));
    let mut leftovers: Vec<String> = all
        .iter()
        .filter(|p| !expected.contains(p) && Some(*p) != current_manifest.as_ref())
        .filter(|p| !p.as_ref().contains("/.dial-folders/") && !p.as_ref().contains("/.dial-created/"))
        .map(|p| p.to_string())
        .collect();
    leftovers.sort();
    assert!(leftovers.is_empty(), "orphaned objects after the sweep: {leftovers:?}");
}

// ----- crash consistency ----------------------------------------------------

/// Runs `operation` with a failure injected at every write in turn, and
/// checks after each that readers see exactly the old or the new state and
/// that a sweep leaves no orphaned bytes.
async fn crash_at_every_step<F, Fut>(name: &str, old: &[(&str, Vec<u8>)], new: Option<&[(&str, Vec<u8>)]>, operation: F)
where
    F: Fn(Arc<FolderEngine>, Handler, Node) -> Fut,
    Fut: std::future::Future<Output = Result<(), FolderError>>,
{
    let handler = skill_handler().await;
    let target = node("team/s");
    let old_state = as_map(old);
    let new_state = new.map(as_map);
    // Keeping one version, the operation journals the one it supersedes;
    // keeping two, it keeps that one (its manifest written beside it) and
    // drops the older one the marker's history held.
    for keep_versions in [1, 2] {
        for fail_at in 1.. {
            let faulty = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
            let engine = Arc::new(engine_keeping(faulty.clone(), keep_versions, 0.0));
            let older = [("SKILL.md", skill_md("older"))];
            put_whole(&engine, &handler, &target, &older, &Preconditions::default()).await.unwrap();
            put_whole(&engine, &handler, &target, old, &Preconditions::default()).await.unwrap();
            faulty.arm(fail_at);
            let result = operation(engine.clone(), handler.clone(), target.clone()).await;
            let writes = faulty.writes();
            faulty.disarm();

            let seen = read_back(&engine, &target).await;
            match &result {
                Ok(()) => assert_eq!(seen, new_state, "{name}: a successful operation shows the new state"),
                Err(_) => assert!(
                    seen == Some(old_state.clone()) || seen == new_state,
                    "{name}, failure at write {fail_at}: readers see a mixed state {seen:?}"
                ),
            }
            engine.sweep_with_grace(Duration::ZERO).await.unwrap();
            assert_no_orphans(&engine, &target).await;
            assert_eq!(read_back(&engine, &target).await, seen, "{name}: the sweep never changes what readers see");
            if result.is_ok() && writes < fail_at {
                // The operation completed without reaching the failure point:
                // every earlier write has had its crash.
                assert!(fail_at > 2, "{name}: expected several write steps, saw {writes}");
                break;
            }
            assert!(fail_at < 100, "{name} never completed");
        }
    }
}

fn old_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![("SKILL.md", skill_md("old")), ("docs/a.md", b"a".to_vec()), ("docs/b.md", b"b".to_vec())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_put_is_atomic_under_crashes() {
    let new = vec![("SKILL.md", skill_md("new")), ("docs/c.md", b"c".to_vec())];
    let new_for_op = new.clone();
    crash_at_every_step("whole PUT", &old_files(), Some(&new), move |engine, handler, node| {
        let files = new_for_op.clone();
        async move { put_whole(&engine, &handler, &node, &files, &Preconditions::default()).await.map(drop) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_file_put_is_atomic_under_crashes() {
    let mut new = old_files();
    new[1].1 = b"a, edited".to_vec();
    crash_at_every_step("single-file PUT", &old_files(), Some(&new), |engine, handler, node| async move {
        engine
            .put_file(&node, "docs/a.md", body(b"a, edited"), &handler, &Preconditions::default(), None, None)
            .await
            .map(drop)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_file_delete_is_atomic_under_crashes() {
    let new: Vec<_> = old_files().into_iter().filter(|(p, _)| *p != "docs/b.md").collect();
    crash_at_every_step("single-file DELETE", &old_files(), Some(&new), |engine, handler, node| async move {
        engine.delete_file(&node, "docs/b.md", &handler, &Preconditions::default(), None).await.map(drop)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_atomic_under_crashes() {
    crash_at_every_step("DELETE", &old_files(), None, |engine, _handler, node| async move {
        engine.delete_resource(&node, &Preconditions::default()).await
    })
    .await;
}

// ----- the sweep ------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_waits_for_the_grace_period_and_only_touches_what_changed() {
    let handler = skill_handler().await;
    let engine = engine_keeping(Arc::new(InMemory::new()), 1, 0.0);
    let target = node("s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    let first = engine.live_marker(&target).await.unwrap().unwrap();
    put_whole(&engine, &handler, &target, &[("SKILL.md", skill_md("v2"))], &Preconditions::default()).await.unwrap();

    // Within the grace period nothing is removed: the old version is still there.
    let report = engine.sweep().await.unwrap();
    assert_eq!(report.versions_deleted, 0);
    let old_file = target.paths().file(&first.current_version, "docs/a.md");
    assert!(engine.store().head(&old_file).await.is_ok());

    let report = engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(report.versions_deleted, 1, "{report:?}");
    assert!(engine.store().head(&old_file).await.is_err());
    // Idempotent, and proportional to the journal: a second sweep sees nothing.
    let again = engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(again.entries_seen, 0, "{again:?}");
    assert_no_orphans(&engine, &target).await;

    // A tombstone within the window is restorable and kept by the sweep.
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    assert_eq!(engine.sweep().await.unwrap().tombstones_finished, 0);
    engine.restore(&target).await.unwrap();
    assert_eq!(read_back(&engine, &target).await.unwrap().len(), 1);
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    let report = engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(report.tombstones_finished, 1, "{report:?}");
    assert_no_orphans(&engine, &target).await;
    assert!(engine.restore(&target).await.is_err(), "nothing left to restore");
}

// ----- racing writers on the cloud emulators (S3 on moto, Azure on Azurite) ------

/// A fresh bucket (container) on the emulator, opened as the host opens it. Each call is a new client,
/// as another instance would have.
fn cloud_store(emulator: &services::Emulator, bucket: &str) -> Arc<dyn ObjectStore> {
    emulator.create(bucket);
    dial_host::backends::open(&emulator.url(bucket), &emulator.storage_options()).unwrap()
}

/// Another client of the same bucket.
fn same_bucket(emulator: &services::Emulator, bucket: &str) -> Arc<dyn ObjectStore> {
    dial_host::backends::open(&emulator.url(bucket), &emulator.storage_options()).unwrap()
}

/// The host's Redis connection to one server.
async fn redis_connection(url: &str) -> dial_host::redis_conn::RedisConnection {
    let config = dial_host::config::RedisConfig { url: Some(url.into()), ..Default::default() };
    dial_host::redis_conn::Redis::connect(&config).await.unwrap().unwrap().connection()
}

/// Eight writers with the same If-Match: exactly one commits, the others get
/// a precondition failure, and the winner's files are what readers see.
async fn race(engines: Vec<Arc<FolderEngine>>) {
    let handler = skill_handler().await;
    let target = node("raced");
    let etag = put_whole(&engines[0], &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    let conditions = Preconditions { if_match: Some(EtagMatch::Tags(vec![etag])), if_none_match: None };
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..8 {
        let engine = engines[writer % engines.len()].clone();
        let (handler, target, conditions) = (handler.clone(), target.clone(), conditions.clone());
        writers.spawn(async move {
            let files = vec![("SKILL.md", skill_md(&format!("writer {writer}")))];
            (writer, put_whole(&engine, &handler, &target, &files, &conditions).await)
        });
    }
    let results = writers.join_all().await;
    let winners: Vec<usize> = results.iter().filter(|(_, r)| r.is_ok()).map(|(w, _)| *w).collect();
    assert_eq!(winners.len(), 1, "exactly one writer wins: {results:?}");
    for (_, result) in &results {
        if let Err(error) = result {
            assert!(matches!(error, FolderError::Precondition(_)), "losers get 412, not {error}");
        }
    }
    let seen = read_back(&engines[0], &target).await.unwrap();
    assert_eq!(seen["SKILL.md"], skill_md(&format!("writer {}", winners[0])));
}

async fn eight_writers_with_in_process_locks(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    let store = cloud_store(&emulator, "race-local");
    race(vec![Arc::new(engine_on(store, in_process_locks()))]).await;
}

async fn eight_writers_across_two_instances_with_redis_locks(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    let Some(redis) = services::redis() else { return };
    emulator.create("race-redis");
    let mut engines = Vec::new();
    for _ in 0..2 {
        let connection = redis_connection(&redis.url).await;
        let locks = dial_host::locks::from_config(Some(&connection), &LockConfig::default(), "race:");
        engines.push(Arc::new(engine_on(same_bucket(&emulator, "race-redis"), locks)));
    }
    race(engines).await;
}

/// Without any lock (instances sharing only the store), the conditional
/// marker write alone still lets exactly one writer win.
async fn eight_writers_fenced_by_the_marker_etag_alone(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    emulator.create("race-fence");
    let engines =
        (0..8).map(|_| Arc::new(engine_on(same_bucket(&emulator, "race-fence"), in_process_locks()))).collect();
    race(engines).await;
}

// ----- change events ----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_commit_publishes_one_change_event() {
    use dial_host::events::EventAction;
    let handler = skill_handler().await;
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    let mut received = events.subscribe();
    let engine = FolderEngine::new(
        Arc::new(InMemory::new()),
        in_process_locks(),
        events,
        FoldersConfig::default(),
        BTreeMap::new(),
    );
    let target = node("team/s");
    let created = put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    let updated = put_whole(&engine, &handler, &target, &[("SKILL.md", skill_md("second"))], &Preconditions::default())
        .await
        .unwrap();
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    let folder = Node::new(
        ResourceUrl::parse("skills/bucket1/other/", Intent::Write).unwrap(),
        BucketLocation::User("alice".into()),
    )
    .unwrap();
    engine.create_folder(&folder, None).await.unwrap();

    let mut seen = Vec::new();
    while let Ok(event) = received.try_recv() {
        seen.push((event.action, event.url, event.etag));
    }
    assert_eq!(
        seen,
        [
            (EventAction::Create, "skills/bucket1/team/s".to_string(), Some(created)),
            (EventAction::Update, "skills/bucket1/team/s".to_string(), Some(updated.clone())),
            (EventAction::Delete, "skills/bucket1/team/s".to_string(), Some(updated)),
            (EventAction::Create, "skills/bucket1/other/".to_string(), None),
        ]
    );
}

/// Eight creators with `If-None-Match: *`: one creates, seven are told the
/// resource already exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_let_exactly_one_win() {
    let handler = skill_handler().await;
    let engine = Arc::new(engine_on(Arc::new(InMemory::new()), in_process_locks()));
    let create_only = Preconditions { if_match: None, if_none_match: Some(EtagMatch::Any) };
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..8 {
        let (engine, handler, conditions) = (engine.clone(), handler.clone(), create_only.clone());
        writers.spawn(async move {
            let files = vec![("SKILL.md", skill_md(&format!("creator {writer}")))];
            put_whole(&engine, &handler, &node("new/s"), &files, &conditions).await
        });
    }
    let results = writers.join_all().await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
    for error in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(matches!(error, FolderError::Precondition(p) if p.0 == "Resource already exists"), "{error}");
    }
}

/// A writer slower than half the grace period does not commit: by then the
/// sweep may already have judged its staged version unreferenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_slower_than_the_commit_deadline_gives_up() {
    let handler = skill_handler().await;
    let config = FoldersConfig { grace_seconds: 1, ..FoldersConfig::default() };
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    let engine = FolderEngine::new(Arc::new(InMemory::new()), in_process_locks(), events, config, BTreeMap::new());
    let target = node("slow");
    let mut staging = engine.stage(&target, &handler, &Preconditions::default()).await.unwrap();
    staging.add_file("SKILL.md", body(&skill_md("slow"))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let error = engine.commit(staging, &handler, &Preconditions::default(), None).await.unwrap_err();
    assert!(matches!(error, FolderError::TooSlow { .. }), "{error}");
    assert!(engine.live_marker(&target).await.unwrap().is_none());
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
}

// ----- the sweep against writers in flight (code review, issue 16) -------------

fn engine_with_grace(store: Arc<dyn ObjectStore>, grace_seconds: u64) -> FolderEngine {
    let config = FoldersConfig { grace_seconds, ..FoldersConfig::default() };
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    FolderEngine::new(store, in_process_locks(), events, config, BTreeMap::new())
}

/// A re-create whose files are staged while the sweep finishes the old
/// tombstone: the sweep deletes only the tombstone's own version, never the
/// staged one, so the re-created resource has every file it lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_finishing_a_tombstone_spares_a_re_create_staged_meanwhile() {
    let handler = skill_handler().await;
    let engine = engine_with_grace(Arc::new(InMemory::new()), 1);
    let target = node("team/s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    // The tombstone is now past its restore window (the grace period)…
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // …while a re-create stages its files.
    let new = vec![("SKILL.md", skill_md("re-created")), ("scripts/run.py", b"print(1)".to_vec())];
    let mut staging = engine.stage(&target, &handler, &Preconditions::default()).await.unwrap();
    for (path, content) in &new {
        staging.add_file(path, body(content)).await.unwrap();
    }
    let report = engine.sweep().await.unwrap();
    assert_eq!(report.tombstones_finished, 1, "{report:?}");
    engine.commit(staging, &handler, &Preconditions::default(), None).await.unwrap();

    assert_eq!(read_back(&engine, &target).await, Some(as_map(&new)), "every listed file is readable");
    // Once everything is due, only the re-created version is left.
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(read_back(&engine, &target).await, Some(as_map(&new)));
    assert_no_orphans(&engine, &target).await;
}

/// A re-create and the sweep's purge of the tombstone it replaces, both at
/// their marker write at once: whichever lands first, the re-create commits
/// (over the purged tombstone, or the purge fails its conditional write and
/// leaves the new resource alone) and keeps every file.
async fn re_create_racing_the_purge(purge_first: bool) {
    let handler = skill_handler().await;
    let store = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let engine = Arc::new(engine_with_grace(store.clone(), 1));
    let target = node("s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Both marker writes wait at the gate; the first to arrive is let go first.
    let gate = store.hold_writes_to(target.paths().resource_marker().as_ref());
    let sweep = || {
        let engine = engine.clone();
        tokio::spawn(async move { engine.sweep().await })
    };
    let new = vec![("SKILL.md", skill_md("back"))];
    let recreate = || {
        let (engine, handler, target, new) = (engine.clone(), handler.clone(), target.clone(), new.clone());
        tokio::spawn(async move { put_whole(&engine, &handler, &target, &new, &Preconditions::default()).await })
    };
    let (sweep, recreate) = if purge_first {
        let sweep = sweep();
        gate.arrived.notified().await;
        (sweep, recreate())
    } else {
        let recreate = recreate();
        gate.arrived.notified().await;
        (sweep(), recreate)
    };
    gate.arrived.notified().await;
    for _ in 0..4 {
        gate.release_one(); // enough for a retried write too
    }
    recreate.await.unwrap().expect("the re-create commits whatever the sweep does");
    sweep.await.unwrap().unwrap();
    assert_eq!(read_back(&engine, &target).await, Some(as_map(&new)));
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(read_back(&engine, &target).await, Some(as_map(&new)), "the re-created resource survives");
    assert_no_orphans(&engine, &target).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_create_commits_over_a_tombstone_purged_meanwhile() {
    re_create_racing_the_purge(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purge_leaves_a_re_create_that_committed_first_alone() {
    re_create_racing_the_purge(false).await;
}

/// Every object of the resources under `prefix`.
async fn objects_below(engine: &FolderEngine, prefix: &Path) -> Vec<String> {
    engine.store().list(Some(prefix)).map_ok(|meta| meta.location.to_string()).try_collect().await.unwrap()
}

/// Deleted resources leave nothing once swept (issue 23), so they cost a
/// listing nothing: after the sweep, the store holds no object of them, and
/// listing their folder reads as much as listing a folder that only ever
/// held the live ones.
async fn swept_tombstones_leave_nothing(store: Arc<InstrumentedStore>, locks: Arc<dyn LockService>) {
    const LIVE: usize = 3;
    const DELETED: usize = 20;
    let handler = skill_handler().await;
    let engine = engine_on(store.clone(), locks);
    for i in 0..LIVE {
        for folder in ["few", "many"] {
            let target = node(&format!("{folder}/live-{i}"));
            put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
        }
    }
    for i in 0..DELETED {
        let target = node(&format!("many/gone-{i}"));
        put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
        engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    }
    let report = engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(report.tombstones_finished, DELETED, "{report:?}");
    let many = node("many/");
    let left: Vec<String> =
        objects_below(&engine, many.paths().base()).await.into_iter().filter(|p| p.contains("/gone-")).collect();
    assert!(left.is_empty(), "objects of deleted resources after the sweep: {left:?}");

    let mut reads = Vec::new();
    for folder in ["few/", "many/"] {
        store.take_reads();
        let listing = engine.list(&node(folder), false, None, 100, &|_| true).await.unwrap();
        assert_eq!(listing.items.len(), LIVE);
        reads.push(store.take_reads());
    }
    assert_eq!(reads[0], reads[1], "(reads, listings) of a folder of {LIVE} with and without {DELETED} deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swept_tombstones_leave_nothing_in_memory() {
    let store = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    swept_tombstones_leave_nothing(store, in_process_locks()).await;
}

async fn swept_tombstones_leave_nothing_with_redis_locks(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    let Some(redis) = services::redis() else { return };
    let connection = redis_connection(&redis.url).await;
    let locks = dial_host::locks::from_config(Some(&connection), &LockConfig::default(), "swept:");
    let store = Arc::new(InstrumentedStore::new(cloud_store(&emulator, "swept-tombstones")));
    swept_tombstones_leave_nothing(store, locks).await;
}

/// Two instances sweep the same journal: both list a superseded version and
/// both delete its objects, so one of them finds some already gone. That is
/// progress, not a failure: S3 answers such a delete 204, but Azure's batch
/// delete answers 404 per missing blob, and the entry failed at every sweep
/// from then on (found by the chaos run on Azurite).
async fn a_sweep_deleting_what_another_sweep_just_deleted_finishes(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    let handler = skill_handler().await;
    let inner = cloud_store(&emulator, "raced-sweeps");
    let store = Arc::new(InstrumentedStore::new(inner.clone()));
    let engine = Arc::new(engine_keeping(store.clone(), 1, 0.0));
    let target = node("s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    let first = engine.live_marker(&target).await.unwrap().unwrap();
    put_whole(&engine, &handler, &target, &[("SKILL.md", skill_md("v2"))], &Preconditions::default()).await.unwrap();

    // The sweep has listed the superseded version; its delete of one file waits
    // while the other instance's sweep deletes that file.
    let old_file = target.paths().file(&first.current_version, "docs/a.md");
    let gate = store.hold_writes_to("docs/a.md");
    let sweep = tokio::spawn({
        let engine = engine.clone();
        async move { engine.sweep_with_grace(Duration::ZERO).await }
    });
    tokio::time::timeout(Duration::from_secs(30), gate.arrived.notified()).await.expect("the sweep deletes the file");
    inner.delete(&old_file).await.unwrap();
    gate.open();

    let report = sweep.await.unwrap().unwrap();
    assert_eq!((report.entries_failed, report.versions_deleted), (0, 1), "{report:?}");
    let again = engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(again.entries_seen, 0, "the journal entry is done: {again:?}");
    assert_no_orphans(&engine, &target).await;
}

/// The sweep deletes a purged tombstone's marker under the resource lock,
/// which a re-create holds from its read of the marker to its write. Here
/// the delete goes first: the re-create, staged meanwhile, waits for the
/// lock, finds no marker and creates one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_create_waiting_for_the_purged_markers_delete_creates_it_anew() {
    let handler = skill_handler().await;
    let store = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let engine = Arc::new(engine_with_grace(store.clone(), 1));
    let target = node("s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let new = vec![("SKILL.md", skill_md("back"))];
    let mut staging = engine.stage(&target, &handler, &Preconditions::default()).await.unwrap();
    for (path, content) in &new {
        staging.add_file(path, body(content)).await.unwrap();
    }
    // The sweep's purge (a marker write), then its delete of the marker, wait at the gate.
    let gate = store.hold_writes_to(target.paths().resource_marker().as_ref());
    let sweep = tokio::spawn({
        let engine = engine.clone();
        async move { engine.sweep().await }
    });
    gate.arrived.notified().await;
    gate.release_one();
    tokio::time::timeout(Duration::from_secs(30), gate.arrived.notified())
        .await
        .expect("the sweep deletes the purged tombstone's marker");
    assert!(store.get(&target.paths().resource_marker()).await.is_ok(), "held before the marker's delete");
    let recreate = tokio::spawn({
        let (engine, handler) = (engine.clone(), handler.clone());
        async move { engine.commit(staging, &handler, &Preconditions::default(), None).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!recreate.is_finished(), "the re-create waits for the lock the delete holds");
    gate.open();
    sweep.await.unwrap().unwrap();
    let committed = recreate.await.unwrap().expect("the re-create commits after the delete");
    assert!(committed.created);
    assert_eq!(read_back(&engine, &target).await, Some(as_map(&new)));
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(read_back(&engine, &target).await, Some(as_map(&new)), "the re-created resource survives");
    assert_no_orphans(&engine, &target).await;
}

/// The other order: a re-create holding the resource lock at its marker
/// write over a purged tombstone (a sweep that stopped before deleting the
/// marker left it) commits; the sweep, waiting for the lock to delete the
/// marker, then finds it live and leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_waiting_to_delete_a_purged_marker_leaves_a_re_create_that_got_in_first() {
    let handler = skill_handler().await;
    let store = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let engine = Arc::new(engine_with_grace(store.clone(), 1));
    let target = node("s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // What a sweep that stopped right before the marker's delete leaves: the
    // tombstone purged, its version deleted, its journal entry still there.
    let marker = target.paths().resource_marker();
    let mut purged: ResourceMarker =
        serde_json::from_slice(&store.get(&marker).await.unwrap().bytes().await.unwrap()).unwrap();
    let versions: Vec<String> = purged.referenced_versions().map(str::to_owned).collect();
    purged.purged_at = Some(1);
    purged.files.clear();
    store.put(&marker, purged.to_json().into()).await.unwrap();
    for version in versions {
        for path in objects_below(&engine, &target.paths().version(&version)).await {
            store.delete(&Path::from(path)).await.unwrap();
        }
    }

    let new = vec![("SKILL.md", skill_md("back"))];
    let gate = store.hold_writes_to(target.paths().resource_marker().as_ref());
    let recreate = tokio::spawn({
        let (engine, handler, target, new) = (engine.clone(), handler.clone(), target.clone(), new.clone());
        async move { put_whole(&engine, &handler, &target, &new, &Preconditions::default()).await }
    });
    gate.arrived.notified().await; // the re-create's marker write, under the lock
    let sweep = tokio::spawn({
        let engine = engine.clone();
        async move { engine.sweep().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!sweep.is_finished(), "the sweep waits for the lock to delete the marker");
    gate.open();
    recreate.await.unwrap().expect("the re-create commits");
    sweep.await.unwrap().unwrap();
    assert_eq!(read_back(&engine, &target).await, Some(as_map(&new)), "the re-created resource survives");
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(read_back(&engine, &target).await, Some(as_map(&new)));
    assert_no_orphans(&engine, &target).await;
}

/// A journal entry that cannot be processed does not stop the sweep: it is
/// counted, kept for the next sweep, and the other entries are settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_journal_entry_does_not_stop_the_sweep() {
    let handler = skill_handler().await;
    let engine = engine_keeping(Arc::new(InMemory::new()), 1, 0.0);
    let (a, b) = (node("a"), node("b"));
    for target in [&a, &b] {
        put_whole(&engine, &handler, target, &old_files(), &Preconditions::default()).await.unwrap();
        put_whole(&engine, &handler, target, &[("SKILL.md", skill_md("v2"))], &Preconditions::default()).await.unwrap();
    }
    // A damaged marker makes a's entries fail.
    engine.store().put(&a.paths().resource_marker(), b"{not json".to_vec().into()).await.unwrap();
    let report = engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert!(report.entries_failed > 0, "{report:?}");
    assert!(report.versions_deleted >= 1, "b's superseded version is still swept: {report:?}");
    let current = engine.live_marker(&b).await.unwrap().unwrap().current_version;
    let left: Vec<Path> =
        engine.store().list(Some(&b.paths().versions())).map_ok(|m| m.location).try_collect().await.unwrap();
    assert!(left.iter().all(|p| p.prefix_matches(&b.paths().version(&current))), "{left:?}");
    let again = engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(again.entries_seen, report.entries_failed, "failed entries are kept, settled ones gone: {again:?}");
}

/// A body that yields its first chunk, then waits for the test.
fn held_body(
    first: &'static [u8],
    rest: tokio::sync::oneshot::Receiver<Vec<u8>>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    use futures_util::StreamExt;
    let rest = futures_util::stream::once(async move { Ok(Bytes::from(rest.await.unwrap_or_default())) });
    Box::pin(stream::iter(vec![Ok(Bytes::from_static(first))]).chain(rest))
}

/// A single-file upload holds no lock while its body arrives: a DELETE of
/// the resource goes through at once, and the upload then finds it gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_file_upload_holds_no_lock_while_its_body_arrives() {
    use futures_util::StreamExt;
    let handler = skill_handler().await;
    let engine = Arc::new(engine_on(Arc::new(InMemory::new()), in_process_locks()));
    let target = node("team/s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    let (send_rest, rest) = tokio::sync::oneshot::channel();
    let upload = tokio::spawn({
        let (engine, handler, target) = (engine.clone(), handler.clone(), target.clone());
        async move {
            let body = held_body(b"first part, ", rest);
            engine
                .put_file(&target, "docs/slow.md", body.boxed(), &handler, &Preconditions::default(), None, None)
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The lock wait is 30 s by default; the delete must not wait for the upload.
    tokio::time::timeout(Duration::from_secs(10), engine.delete_resource(&target, &Preconditions::default()))
        .await
        .expect("the delete waited for the upload's lock")
        .unwrap();
    send_rest.send(b"second part".to_vec()).unwrap();
    let error = upload.await.unwrap().unwrap_err();
    assert!(matches!(error, FolderError::NotFound(_)), "{error}");
    assert!(engine.live_marker(&target).await.unwrap().is_none());
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
}

/// Two single-file changes in flight at once both land: the later commit
/// is rebuilt on the version the first one committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_single_file_changes_both_land() {
    use futures_util::StreamExt;
    let handler = skill_handler().await;
    let engine = Arc::new(engine_on(Arc::new(InMemory::new()), in_process_locks()));
    let target = node("s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    let (send_rest, rest) = tokio::sync::oneshot::channel();
    let slow = tokio::spawn({
        let (engine, handler, target) = (engine.clone(), handler.clone(), target.clone());
        async move {
            let body = held_body(b"slow ", rest);
            engine.put_file(&target, "docs/a.md", body.boxed(), &handler, &Preconditions::default(), None, None).await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    engine
        .put_file(&target, "docs/new.md", body(b"fast"), &handler, &Preconditions::default(), None, None)
        .await
        .unwrap();
    engine.delete_file(&target, "docs/b.md", &handler, &Preconditions::default(), None).await.unwrap();
    send_rest.send(b"edit".to_vec()).unwrap();
    slow.await.unwrap().unwrap();
    let seen = read_back(&engine, &target).await.unwrap();
    assert_eq!(seen["docs/a.md"], b"slow edit");
    assert_eq!(seen["docs/new.md"], b"fast");
    assert!(!seen.contains_key("docs/b.md"));
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
}

/// Unconditional single-file changes racing on one resource from engines
/// that share no lock (instances without Redis, fenced by the marker's
/// compare-and-swap alone) all land (issue 23): a change that loses the
/// marker write is rebuilt on what won, until the commit deadline, instead
/// of being refused after a few tries.
async fn file_changes_from_many_instances_all_land(engines: Vec<Arc<FolderEngine>>, changes: usize) {
    let handler = skill_handler().await;
    let target = node("raced-files");
    put_whole(&engines[0], &handler, &target, &[("SKILL.md", skill_md("raced"))], &Preconditions::default())
        .await
        .unwrap();
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..changes {
        let engine = engines[writer % engines.len()].clone();
        let (handler, target) = (handler.clone(), target.clone());
        writers.spawn(async move {
            let content = format!("writer {writer}").into_bytes();
            let path = format!("parts/{writer}.txt");
            engine.put_file(&target, &path, body(&content), &handler, &Preconditions::default(), None, None).await
        });
    }
    for result in writers.join_all().await {
        result.expect("an unconditional change is never refused for others' writes");
    }
    let seen = read_back(&engines[0], &target).await.unwrap();
    for writer in 0..changes {
        assert_eq!(seen[&format!("parts/{writer}.txt")], format!("writer {writer}").into_bytes());
    }
    assert_eq!(seen.len(), changes + 1);
    engines[0].sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engines[0], &target).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_changes_under_one_lock_all_land() {
    let engine = Arc::new(engine_on(Arc::new(InMemory::new()), in_process_locks()));
    file_changes_from_many_instances_all_land(vec![engine], 64).await;
}

async fn file_changes_fenced_by_the_marker_etag_alone_all_land(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    emulator.create("files-fence");
    let engines =
        (0..4).map(|_| Arc::new(engine_on(same_bucket(&emulator, "files-fence"), in_process_locks()))).collect();
    file_changes_from_many_instances_all_land(engines, 16).await;
}

/// The engine's tests that need a real cloud store, once per emulated backend.
macro_rules! on_backend {
    ($module:ident, $backend:literal) => {
        mod $module {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn eight_writers_with_in_process_locks() {
                super::eight_writers_with_in_process_locks($backend).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn eight_writers_across_two_instances_with_redis_locks() {
                super::eight_writers_across_two_instances_with_redis_locks($backend).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn eight_writers_fenced_by_the_marker_etag_alone() {
                super::eight_writers_fenced_by_the_marker_etag_alone($backend).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn swept_tombstones_leave_nothing_with_redis_locks() {
                super::swept_tombstones_leave_nothing_with_redis_locks($backend).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn file_changes_fenced_by_the_marker_etag_alone_all_land() {
                super::file_changes_fenced_by_the_marker_etag_alone_all_land($backend).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_sweep_deleting_what_another_sweep_just_deleted_finishes() {
                super::a_sweep_deleting_what_another_sweep_just_deleted_finishes($backend).await;
            }
        }
    };
}

on_backend!(s3, "s3");
on_backend!(azure, "azure");

/// A single-file upload slower than the commit deadline writes nothing more
/// and does not commit (the sweep may already have judged it garbage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_file_upload_slower_than_the_deadline_gives_up() {
    use futures_util::StreamExt;
    let handler = skill_handler().await;
    let engine = engine_with_grace(Arc::new(InMemory::new()), 1);
    let target = node("s");
    let etag = put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    let (send_rest, rest) = tokio::sync::oneshot::channel();
    let body = held_body(b"first ", rest);
    let trickle = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        send_rest.send(b"late".to_vec()).unwrap();
    };
    let unconditional = Preconditions::default();
    let put = engine.put_file(&target, "docs/a.md", body.boxed(), &handler, &unconditional, None, None);
    let (result, ()) = tokio::join!(put, trickle);
    assert!(matches!(result, Err(FolderError::TooSlow { .. })), "{result:?}");
    assert_eq!(engine.live_marker(&target).await.unwrap().unwrap().etag, etag, "nothing was committed");
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
}

/// A staged file that is gone when the handler reads it is the host's
/// failure (a storage error), not a problem of the upload (400).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_file_the_store_cannot_give_is_a_storage_error() {
    let handler = skill_handler().await;
    let engine = engine_on(Arc::new(InMemory::new()), in_process_locks());
    let target = node("s");
    let mut staging = engine.stage(&target, &handler, &Preconditions::default()).await.unwrap();
    staging.add_file("SKILL.md", body(&skill_md("x"))).await.unwrap();
    staging.flush().await.unwrap();
    let staged: Vec<Path> =
        engine.store().list(Some(&target.paths().versions())).map_ok(|meta| meta.location).try_collect().await.unwrap();
    for path in &staged {
        engine.store().delete(path).await.unwrap();
    }
    let error = engine.commit(staging, &handler, &Preconditions::default(), None).await.unwrap_err();
    assert!(matches!(error, FolderError::Storage(_)), "{error}");
}

/// Where the lock is more than an optimisation — a create relies on the
/// bucket lock for the structure it checked — a lease lost mid-commit
/// aborts the commit instead of writing on a stale check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_bucket_lock_is_lost_mid_commit_does_not_commit() {
    let Some(redis) = services::redis() else { return };
    let handler = skill_handler().await;
    let mut connection = redis_connection(&redis.url).await;
    let lock_config = LockConfig { ttl_ms: 300, acquire_timeout_ms: 5_000 };
    let locks = dial_host::locks::from_config(Some(&connection), &lock_config, "lost:");
    let store = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    let engine = Arc::new(FolderEngine::new(store.clone(), locks, events, FoldersConfig::default(), BTreeMap::new()));
    let target = node("team/s");
    // Creating team/s writes the team/ folder marker under the bucket lock.
    let gate = store.hold_writes_to(".dial-folders/team");
    let create = tokio::spawn({
        let (engine, handler, target) = (engine.clone(), handler.clone(), target.clone());
        async move { put_whole(&engine, &handler, &target, &[("SKILL.md", skill_md("x"))], &Preconditions::default()).await }
    });
    gate.arrived.notified().await;
    // Another holder takes the bucket lock (as after an expired lease).
    let keys: Vec<String> = redis::cmd("KEYS").arg("lost:lock:bucket:*").query_async(&mut connection).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let _: () = redis::cmd("SET").arg(&keys[0]).arg("someone-else").query_async(&mut connection).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await; // renewal (every 100 ms) notices
    gate.release_one();
    let error = create.await.unwrap().unwrap_err();
    assert!(
        matches!(error, FolderError::Lock(dial_host::locks::LockError::Lost { .. })),
        "the commit must give up, not write on a lost lock: {error}"
    );
    assert!(engine.live_marker(&target).await.unwrap().is_none(), "nothing was committed");
}

// ----- the upload path ---------------------------------------------------------

/// A body of `content` in chunks of `chunk` bytes, as a network delivers it.
fn chunked(content: &[u8], chunk: usize) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    let chunks: Vec<_> = content.chunks(chunk.max(1)).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    stream::iter(chunks)
}

fn md5_hex(bytes: &[u8]) -> String {
    use md5::{Digest, Md5};
    Md5::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Small files are written in the background and large ones streamed;
/// either way each file's etag is the MD5 of its bytes and the bytes read
/// back are the bytes sent, at every size around the switch between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_path_stores_the_bytes_and_their_md5() {
    let handler = skill_handler().await;
    let dir = tempfile::tempdir().unwrap();
    let local = dial_host::backends::open(&format!("file://{}", dir.path().display()), &Default::default()).unwrap();
    for store in [Arc::new(InMemory::new()) as Arc<dyn ObjectStore>, local] {
        let engine = engine_on(store, in_process_locks());
        let target = node("sizes");
        let small = 1 << 20;
        let mut files: Vec<(String, Vec<u8>)> = vec![("SKILL.md".into(), skill_md("sizes"))];
        for (i, size) in [0, 1, small - 1, small, small + 1, 3 * small + 17, 9 << 20].into_iter().enumerate() {
            let content: Vec<u8> = (0..size).map(|b| (b * 31 + i) as u8).collect();
            files.push((format!("data/f{i}.bin"), content));
        }
        let mut staging = engine.stage(&target, &handler, &Preconditions::default()).await.unwrap();
        for (path, content) in &files {
            staging.add_file(path, chunked(content, 64 << 10)).await.unwrap();
        }
        let marker = engine.commit(staging, &handler, &Preconditions::default(), None).await.unwrap().marker;
        for (path, content) in &files {
            assert_eq!(marker.files[path].etag, md5_hex(content), "{path}");
            assert_eq!(marker.files[path].size, content.len() as u64, "{path}");
        }
        let expected: BTreeMap<String, Vec<u8>> = files.into_iter().collect();
        assert_eq!(read_back(&engine, &target).await.unwrap(), expected);
    }
}

/// While the store is slow, an upload holds at most eight small files in
/// flight: the ninth waits for one of them instead of piling up in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_waits_for_the_store_with_at_most_eight_small_files_in_flight() {
    let handler = skill_handler().await;
    let store = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let engine = Arc::new(engine_on(store.clone(), in_process_locks()));
    let gate = store.hold_writes_to(".bin");
    let added = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let upload = tokio::spawn({
        let (engine, handler, added) = (engine.clone(), handler.clone(), added.clone());
        async move {
            let target = node("slow");
            let mut staging = engine.stage(&target, &handler, &Preconditions::default()).await?;
            staging.add_file("SKILL.md", body(&skill_md("slow"))).await?;
            for i in 0..20 {
                staging.add_file(&format!("f{i:02}.bin"), body(&[i as u8; 1024])).await?;
                added.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            engine.commit(staging, &handler, &Preconditions::default(), None).await
        }
    });
    let eight_held = async {
        while gate.waiting.load(std::sync::atomic::Ordering::SeqCst) < 8 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), eight_held).await.expect("eight writes reach the store at once");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(gate.waiting.load(std::sync::atomic::Ordering::SeqCst), 8, "eight writes in flight, no more");
    assert_eq!(added.load(std::sync::atomic::Ordering::SeqCst), 8, "the ninth file waits for a slot");
    assert!(!upload.is_finished());
    gate.open();
    let committed = upload.await.unwrap().unwrap();
    assert_eq!(committed.marker.files.len(), 21);
    assert_eq!(committed.marker.files["f07.bin"].etag, md5_hex(&[7u8; 1024]));
}

/// A small file's write that fails in the background fails the upload: no
/// commit, and the sweep leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_write_that_fails_fails_the_upload() {
    let handler = skill_handler().await;
    let store = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let engine = engine_on(store.clone(), in_process_locks());
    let target = node("failing");
    let mut staging = engine.stage(&target, &handler, &Preconditions::default()).await.unwrap();
    // The third file's write fails (and every later one, as after a crash).
    store.arm(3);
    let mut outcome = Ok(());
    let files =
        [("SKILL.md", skill_md("failing")), ("a.md", vec![1; 10]), ("b.md", vec![2; 10]), ("c.md", vec![3; 10])];
    for (path, content) in &files {
        outcome = staging.add_file(path, body(content)).await;
        if outcome.is_err() {
            break;
        }
    }
    let outcome = match outcome {
        Ok(()) => engine.commit(staging, &handler, &Preconditions::default(), None).await.map(|_| ()),
        Err(error) => Err(error),
    };
    assert!(matches!(outcome, Err(FolderError::Storage(_))), "{outcome:?}");
    store.disarm();
    assert!(engine.live_marker(&target).await.unwrap().is_none(), "nothing was committed");
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
}

/// A client that stalls in the middle of a large file holds no blocking
/// thread: the MD5 runs on the blocking pool only while it hashes a batch.
/// (With one blocking thread, anything else needing the pool would wait for
/// the stalled client otherwise.)
#[test]
fn a_stalled_large_upload_holds_no_blocking_thread() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let handler = skill_handler().await;
        let engine = engine_on(Arc::new(InMemory::new()), in_process_locks());
        let target = node("stalled");
        let mut staging = engine.stage(&target, &handler, &Preconditions::default()).await.unwrap();
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let body = Box::pin(stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        }));
        let upload = tokio::spawn(async move { staging.add_file("big.bin", body).await.map(|()| staging) });
        // Past the small-file size, then nothing more for a while.
        sender.send(Ok(Bytes::from(vec![7u8; 3 << 20]))).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let other = tokio::task::spawn_blocking(|| 42);
        let answered = tokio::time::timeout(Duration::from_secs(5), other).await;
        assert_eq!(answered.expect("the blocking pool is free while the client stalls").unwrap(), 42);
        sender.send(Ok(Bytes::from(vec![8u8; 1 << 20]))).await.unwrap();
        drop(sender);
        let staging = upload.await.unwrap().unwrap();
        assert_eq!(staging.file_count(), 1);
    });
}

// ----- version history and retention (issue 14 part 1) ----------------------

/// The files of one version as a reader of `?version=` gets them.
async fn read_version(
    engine: &FolderEngine,
    node: &Node,
    version: &str,
) -> Result<BTreeMap<String, Vec<u8>>, FolderError> {
    let marker = engine.version_for_read(node, version).await?;
    let mut files = BTreeMap::new();
    for path in marker.files.keys() {
        let (object, _) = engine.file_path(node, &marker, path)?;
        let bytes = engine.store().get(&object).await?.bytes().await?;
        files.insert(path.clone(), bytes.to_vec());
    }
    Ok(files)
}

/// Version `n` of the test skill: its own SKILL.md and one file of its own.
fn version_files(n: usize) -> Vec<(&'static str, Vec<u8>)> {
    vec![("SKILL.md", skill_md(&format!("v{n}"))), ("docs/n.md", format!("{n}").into_bytes())]
}

/// Commits versions 1..=count; their version ids, oldest first.
async fn commit_versions(engine: &FolderEngine, handler: &Handler, target: &Node, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 1..=count {
        put_whole(engine, handler, target, &version_files(n), &Preconditions::default()).await.unwrap();
        ids.push(engine.live_marker(target).await.unwrap().unwrap().current_version);
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_keeps_the_newest_versions_and_the_sweep_reclaims_the_rest() {
    let handler = skill_handler().await;
    let engine = engine_keeping(Arc::new(InMemory::new()), 3, 0.0);
    let target = node("s");
    let ids = commit_versions(&engine, &handler, &target, 5).await;
    let marker = engine.live_marker(&target).await.unwrap().unwrap();
    let history: Vec<&str> = marker.history.iter().map(|r| r.version.as_str()).collect();
    assert_eq!(history, [ids[3].as_str(), ids[2].as_str()], "newest first, the current one counted");
    assert!(
        marker.history.iter().all(|r| r.files == 2 && r.author.as_deref() == Some("alice") && r.keep_until.is_none())
    );
    for (n, id) in ids.iter().enumerate().skip(2) {
        assert_eq!(
            read_version(&engine, &target, id).await.unwrap(),
            as_map(&version_files(n + 1)),
            "version {}",
            n + 1
        );
    }
    // Dropped versions are gone for readers at once, for the store after the grace period.
    for id in &ids[..2] {
        let error = read_version(&engine, &target, id).await.unwrap_err();
        assert!(matches!(&error, FolderError::VersionNotFound(v) if v == id), "{error}");
        assert_eq!(error.to_string(), format!("Version {id} not found"));
    }
    assert_eq!(engine.sweep().await.unwrap().versions_deleted, 0, "nothing before the grace period");
    assert!(engine.store().head(&target.paths().file(&ids[0], "docs/n.md")).await.is_ok());
    let report = engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_eq!(report.versions_deleted, 2, "{report:?}");
    assert_no_orphans(&engine, &target).await;

    // A restore is a new commit of the old files, checked against the current etag.
    let stale =
        Preconditions { if_match: Some(EtagMatch::Tags(vec![marker.history[0].etag.clone()])), if_none_match: None };
    let refused = engine.restore_version(&target, &ids[2], &handler, Some("bob".into()), &stale).await;
    assert!(matches!(refused, Err(FolderError::Precondition(_))), "{refused:?}");
    assert_eq!(engine.live_marker(&target).await.unwrap().unwrap(), marker, "a refused restore changes nothing");
    let current = Preconditions { if_match: Some(EtagMatch::Tags(vec![marker.etag.clone()])), if_none_match: None };
    let restored = engine.restore_version(&target, &ids[2], &handler, Some("bob".into()), &current).await.unwrap();
    assert_eq!(read_back(&engine, &target).await.unwrap(), as_map(&version_files(3)));
    assert_eq!(restored.etag, marker.history[1].etag, "the etag of the files restored");
    assert!(!ids.contains(&restored.current_version), "a restore commits a new version");
    assert_eq!(restored.committed_by.as_deref(), Some("bob"));
    let history: Vec<&str> = restored.history.iter().map(|r| r.version.as_str()).collect();
    assert_eq!(history, [ids[4].as_str(), ids[3].as_str()]);
    // Naming the current version changes nothing; an unknown one is 404.
    let none = Preconditions::default();
    let same = engine.restore_version(&target, &restored.current_version, &handler, None, &none);
    assert_eq!(same.await.unwrap(), restored);
    let unknown = engine.restore_version(&target, "nope", &handler, None, &Preconditions::default()).await;
    assert!(matches!(unknown, Err(FolderError::VersionNotFound(_))), "{unknown:?}");

    // A single-file change keeps history too, and a delete + re-create starts it anew.
    engine
        .put_file(&target, "docs/x.md", body(b"x"), &handler, &Preconditions::default(), Some("carol".into()), None)
        .await
        .unwrap();
    let marker = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(marker.history[0].version, restored.current_version);
    assert_eq!(marker.committed_by.as_deref(), Some("carol"));
    assert_eq!(read_version(&engine, &target, &restored.current_version).await.unwrap(), as_map(&version_files(3)));
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    assert!(matches!(
        engine.version_for_read(&target, &marker.history[0].version).await,
        Err(FolderError::NotFound(_))
    ));
    put_whole(&engine, &handler, &target, &version_files(9), &Preconditions::default()).await.unwrap();
    assert!(engine.live_marker(&target).await.unwrap().unwrap().history.is_empty(), "a re-create starts a new history");
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
}

/// `keep_versions_days` as a duration in milliseconds, for tests that wait.
fn days(ms: u64) -> f64 {
    ms as f64 / 86_400_000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_kept_for_their_age_expire_after_their_days() {
    let handler = skill_handler().await;
    let engine = engine_retaining(Arc::new(InMemory::new()), 2, days(3000), 1);
    let target = node("s");
    let ids = commit_versions(&engine, &handler, &target, 4).await;
    let marker = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(marker.history.len(), 3, "one by count, two for their age");
    assert!(marker.history[0].keep_until.is_none());
    assert!(marker.history[1..].iter().all(|r| r.keep_until.is_some_and(|until| until - r.created_at == 3000)));

    // Before their time is out, the sweep keeps them (and their entries).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let early = engine.sweep().await.unwrap();
    assert_eq!(early.versions_deleted, 0, "{early:?}");
    assert_eq!(engine.live_marker(&target).await.unwrap().unwrap(), marker);
    // After it, readers stop seeing them at once; the store keeps them a grace period more.
    let expiry = marker.history.iter().filter_map(|r| r.keep_until).max().unwrap();
    tokio::time::sleep(Duration::from_millis((expiry - dial_host::clock::now_ms()).max(0) as u64 + 20)).await;
    engine.sweep().await.unwrap();
    for id in &ids[..2] {
        assert!(matches!(engine.version_for_read(&target, id).await, Err(FolderError::VersionNotFound(_))));
        assert!(engine.store().head(&target.paths().file(id, "docs/n.md")).await.is_ok(), "kept for the grace period");
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    engine.sweep().await.unwrap();
    let expired = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(expired.history.iter().map(|r| r.version.as_str()).collect::<Vec<_>>(), [ids[2].as_str()]);
    for id in &ids[..2] {
        assert!(engine.store().head(&target.paths().file(id, "docs/n.md")).await.is_err(), "reclaimed after it");
    }
    assert_eq!(read_version(&engine, &target, &ids[2]).await.unwrap(), as_map(&version_files(3)));
    assert_no_orphans(&engine, &target).await;
}

/// A reader that resolved a retained version keeps reading it for the grace
/// period after commits drop it, whatever the sweep does meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_being_read_outlives_its_retention_by_the_grace_period() {
    let handler = skill_handler().await;
    let engine = engine_with_grace(Arc::new(InMemory::new()), 60);
    let target = node("s");
    let ids = commit_versions(&engine, &handler, &target, 2).await;
    let reading = engine.version_for_read(&target, &ids[0]).await.unwrap();
    // Ten more commits push it out (the default keeps ten), sweeps run between them.
    for n in 3..13 {
        put_whole(&engine, &handler, &target, &version_files(n), &Preconditions::default()).await.unwrap();
        engine.sweep().await.unwrap();
    }
    assert!(matches!(engine.version_for_read(&target, &ids[0]).await, Err(FolderError::VersionNotFound(_))));
    for path in reading.files.keys() {
        let (object, record) = engine.file_path(&target, &reading, path).unwrap();
        let bytes =
            engine.store().get(&object).await.expect("still there within the grace period").bytes().await.unwrap();
        assert_eq!(bytes.len() as u64, record.size);
    }
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert!(engine.store().head(&target.paths().file(&ids[0], "SKILL.md")).await.is_err());
    assert_no_orphans(&engine, &target).await;
}

/// A version dropped soon after it was staged: its staging entry falls due
/// before the drop's, yet its readers still get a whole grace period from
/// the drop.
#[tokio::test]
async fn a_version_dropped_soon_after_its_staging_outlives_the_drop_by_the_grace_period() {
    let handler = skill_handler().await;
    let engine = engine_keeping(Arc::new(InMemory::new()), 1, 0.0);
    let target = node("s");
    let first = commit_versions(&engine, &handler, &target, 1).await.remove(0);
    let reading = engine.version_for_read(&target, &first).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    commit_versions(&engine, &handler, &target, 1).await; // drops `first` (keeping one)
    // A grace of 250 ms: the staging entry of `first` is due, its drop's is not.
    engine.sweep_with_grace(Duration::from_millis(250)).await.unwrap();
    for path in reading.files.keys() {
        let (object, _) = engine.file_path(&target, &reading, path).unwrap();
        assert!(engine.store().head(&object).await.is_ok(), "{path} of the dropped version went early");
    }
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert!(engine.store().head(&target.paths().file(&first, "SKILL.md")).await.is_err());
    assert_no_orphans(&engine, &target).await;
}

/// Restores race commits that push the restored version out of the history
/// and a sweep with a one-second grace: each restore either commits exactly
/// the files of the version it named, all present, or answers that the
/// version is gone — never a half-copied version or a storage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_racing_commits_and_the_sweep_restore_whole_versions_or_name_them_gone() {
    let handler = skill_handler().await;
    let engine = Arc::new(engine_retaining(Arc::new(InMemory::new()), 2, 0.0, 1));
    let target = node("s");
    commit_versions(&engine, &handler, &target, 2).await;
    let until = std::time::Instant::now() + Duration::from_secs(3);
    let sweeper = {
        let engine = engine.clone();
        tokio::spawn(async move {
            while std::time::Instant::now() < until {
                engine.sweep().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let writer = {
        let (engine, handler, target) = (engine.clone(), handler.clone(), target.clone());
        tokio::spawn(async move {
            let mut n = 3;
            while std::time::Instant::now() < until {
                put_whole(&engine, &handler, &target, &version_files(n), &Preconditions::default()).await.unwrap();
                n += 1;
            }
        })
    };
    let (mut restored, mut gone) = (0, 0);
    while std::time::Instant::now() < until {
        // The oldest retained version: the next commit drops it.
        let marker = engine.live_marker(&target).await.unwrap().unwrap();
        let Some(oldest) = marker.history.last().map(|record| record.version.clone()) else { continue };
        let Ok(source) = engine.version_for_read(&target, &oldest).await else {
            gone += 1;
            continue;
        };
        match engine.restore_version(&target, &oldest, &handler, None, &Preconditions::default()).await {
            Ok(committed) => {
                restored += 1;
                let etags =
                    |m: &ResourceMarker| m.files.iter().map(|(p, f)| (p.clone(), f.etag.clone())).collect::<Vec<_>>();
                assert_eq!(etags(&committed), etags(&source), "the restored files are the version's");
                for path in committed.files.keys() {
                    let (object, _) = engine.file_path(&target, &committed, path).unwrap();
                    assert!(engine.store().head(&object).await.is_ok(), "{path} of the restored version is missing");
                }
            }
            Err(FolderError::VersionNotFound(_)) => gone += 1,
            Err(error) => panic!("a restore failed otherwise: {error}"),
        }
    }
    writer.await.unwrap();
    sweeper.await.unwrap();
    assert!(restored > 0, "no restore landed ({gone} found their version gone)");
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
}

/// The sweep expiring age-kept versions rewrites live markers: it does so
/// under the resource lock, so commits racing it are never refused, and no
/// version a marker keeps loses a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_expiring_versions_never_fails_a_commit() {
    const GRACE_SECONDS: u64 = 4;
    let handler = skill_handler().await;
    let engine = Arc::new(engine_retaining(Arc::new(InMemory::new()), 1, days(300), GRACE_SECONDS));
    let target = node("s");
    commit_versions(&engine, &handler, &target, 1).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sweeper = {
        let (engine, stop) = (engine.clone(), stop.clone());
        tokio::spawn(async move {
            let mut expired = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let report = engine.sweep().await.unwrap();
                expired += report.entries_done;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            expired
        })
    };
    // Writers run past the grace period, so entries of age-kept versions
    // fall due and expire while commits land: whole PUTs on `s`, and
    // single-file changes on a resource of their own, which only the sweep
    // changes besides them (a single-file change rebuilds when another
    // commit lands first, and gives up with 409 after a few).
    let until = std::time::Instant::now() + Duration::from_secs(GRACE_SECONDS * 2);
    let own = node("own");
    commit_versions(&engine, &handler, &own, 1).await;
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (engine, handler) = (engine.clone(), handler.clone());
            let target = if w == 0 { own.clone() } else { target.clone() };
            tokio::spawn(async move {
                let mut n: usize = 0;
                while std::time::Instant::now() < until {
                    n += 1;
                    if w == 0 {
                        engine
                            .put_file(
                                &target,
                                "docs/own.md",
                                body(&n.to_le_bytes()),
                                &handler,
                                &Preconditions::default(),
                                None,
                                None,
                            )
                            .await
                            .map(drop)
                    } else {
                        put_whole(&engine, &handler, &target, &version_files(w * 1000 + n), &Preconditions::default())
                            .await
                            .map(drop)
                    }
                    .unwrap_or_else(|error| panic!("writer {w}, change {n}: {error}"));
                }
                n
            })
        })
        .collect();
    let mut commits = 0;
    for writer in writers {
        commits += writer.await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let settled = sweeper.await.unwrap();
    assert!(settled > 0 && commits > 8, "the sweep settled {settled} entries while {commits} commits landed");
    tokio::time::sleep(Duration::from_secs(GRACE_SECONDS) + Duration::from_millis(400)).await;
    engine.sweep().await.unwrap();
    for target in [&target, &own] {
        assert!(
            engine.live_marker(target).await.unwrap().unwrap().history.is_empty(),
            "every age-kept version expired"
        );
    }
    tokio::time::sleep(Duration::from_secs(GRACE_SECONDS) + Duration::from_millis(100)).await;
    engine.sweep().await.unwrap();
    let all_objects: Vec<Path> = engine.store().list(None).map_ok(|m| m.location).try_collect().await.unwrap();
    for target in [&target, &own] {
        let marker = engine.live_marker(target).await.unwrap().unwrap();
        let left: Vec<&Path> = all_objects
            .iter()
            .filter(|p| p.prefix_matches(&target.paths().versions()))
            .filter(|p| !p.prefix_matches(&target.paths().version(&marker.current_version)))
            .collect();
        assert!(left.is_empty(), "only the current version is left: {left:?}");
    }
}

// ----- numbered versions, a version that does not become current (issue 27) --

/// Stages version `n`'s files and commits it as `becomes`.
async fn commit_as(engine: &FolderEngine, handler: &Handler, target: &Node, n: usize, becomes: Becomes) -> String {
    let mut staging = engine.stage(target, handler, &Preconditions::default()).await.unwrap();
    for (path, content) in version_files(n) {
        staging.add_file(path, body(&content)).await.unwrap();
    }
    engine.commit_as(staging, handler, &Preconditions::default(), Some("alice".into()), becomes).await.unwrap().version
}

fn numbers(marker: &ResourceMarker) -> (Option<u64>, Vec<Option<u64>>) {
    (marker.number, marker.history.iter().map(|record| record.number).collect())
}

/// What the hosted skills APIs rely on: versions numbered in commit order,
/// a number never given twice, a version committed without becoming
/// current (and retention never dropping it while it is the newest), a
/// retained version made current again as it is (no copy, same id), and
/// one retained version dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_are_numbered_and_the_current_one_can_move_without_a_commit() {
    let handler = skill_handler().await;
    // The current version and one more: retention is as tight as it gets.
    let engine = engine_keeping(Arc::new(InMemory::new()), 2, 0.0);
    let target = node("s");
    let ids = commit_versions(&engine, &handler, &target, 2).await;
    let marker = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(numbers(&marker), (Some(2), vec![Some(1)]));

    // Version 3 is kept but not current: readers still get version 2.
    let third = commit_as(&engine, &handler, &target, 3, Becomes::Retained).await;
    let marker = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(marker.current_version, ids[1]);
    assert_eq!(numbers(&marker), (Some(2), vec![Some(3)]), "version 1 made room; the newest stays");
    assert_eq!(read_back(&engine, &target).await.unwrap(), as_map(&version_files(2)));
    assert_eq!(read_version(&engine, &target, &third).await.unwrap(), as_map(&version_files(3)));
    assert_eq!(marker.history[0].metadata.get("description").map(String::as_str), Some("v3"));
    // Even keeping only the current version, the newest is not dropped.
    let tight = engine_keeping(engine.store().clone(), 1, 0.0);
    let fourth = commit_as(&tight, &handler, &target, 4, Becomes::Retained).await;
    let marker = tight.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(numbers(&marker), (Some(2), vec![Some(4)]));

    // Making version 4 current copies nothing: same id, same files, same number.
    let moved = engine.make_current(&target, &fourth, &handler, &Preconditions::default()).await.unwrap();
    assert_eq!((moved.current_version.as_str(), moved.number), (fourth.as_str(), Some(4)));
    assert_eq!(read_back(&engine, &target).await.unwrap(), as_map(&version_files(4)));
    assert_eq!(numbers(&moved), (Some(4), vec![Some(2)]));
    assert_eq!(read_version(&engine, &target, &ids[1]).await.unwrap(), as_map(&version_files(2)));
    // …and back, with conditions checked against the current version.
    let stale = Preconditions { if_match: Some(EtagMatch::Tags(vec!["stale".into()])), if_none_match: None };
    let refused = engine.make_current(&target, &ids[1], &handler, &stale).await;
    assert!(matches!(refused, Err(FolderError::Precondition(_))), "{refused:?}");
    let back = engine.make_current(&target, &ids[1], &handler, &Preconditions::default()).await.unwrap();
    assert_eq!(numbers(&back), (Some(2), vec![Some(4)]));
    assert!(back.history[0].keep_until.is_none(), "the newest is kept for as long as it is the newest");
    let unknown = engine.make_current(&target, "nope", &handler, &Preconditions::default()).await;
    assert!(matches!(unknown, Err(FolderError::VersionNotFound(_))), "{unknown:?}");

    // Dropping: the current version stays; a retained one goes; its number is not given again.
    let current = engine.drop_version(&target, &ids[1]).await;
    assert!(matches!(current, Err(FolderError::BadRequest(_))), "{current:?}");
    let dropped = engine.drop_version(&target, &fourth).await.unwrap();
    assert_eq!(numbers(&dropped), (Some(2), vec![]));
    assert!(matches!(read_version(&engine, &target, &fourth).await, Err(FolderError::VersionNotFound(_))));
    assert!(matches!(engine.drop_version(&target, &fourth).await, Err(FolderError::VersionNotFound(_))));
    put_whole(&engine, &handler, &target, &version_files(5), &Preconditions::default()).await.unwrap();
    let marker = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(numbers(&marker), (Some(5), vec![Some(2)]), "4 was given once");

    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
    for version in marker.referenced_versions() {
        read_version(&engine, &target, version).await.expect("every kept version is whole after the sweep");
    }
}

/// A marker written before numbering gets the numbers of its commit order,
/// and the next commit goes on from them.
#[test]
fn markers_before_numbering_are_numbered_in_commit_order() {
    let record = |version: &str, created_at| dial_host::folders::marker::VersionRecord {
        version: version.into(),
        etag: "e".into(),
        created_at,
        author: None,
        files: 1,
        bytes: 1,
        keep_until: None,
        number: None,
        metadata: Default::default(),
    };
    let json = serde_json::json!({"type": "skill", "schemaVersion": 1, "state": "ready", "currentVersion": "c",
        "etag": "e", "createdAt": 1, "updatedAt": 3, "commitId": "x", "files": {}});
    let mut marker: ResourceMarker = serde_json::from_value(json).unwrap();
    marker.history = vec![record("b", 2), record("a", 1)];
    let numbered = marker.clone().numbered();
    assert_eq!(numbers(&numbered), (Some(3), vec![Some(2), Some(1)]));
    assert_eq!(marker.next_number(), 4);
    let listed: Vec<(String, bool)> =
        marker.versions_newest_first(10).into_iter().map(|(record, current)| (record.version, current)).collect();
    assert_eq!(listed, [("c".to_string(), true), ("b".into(), false), ("a".into(), false)]);
}

/// Moves of the current version race commits and a sweep with no grace to
/// speak of: every marker a reader meets serves whole versions — the
/// current one and each one kept — and the numbers stay unique.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_the_current_version_races_commits_and_the_sweep() {
    let handler = skill_handler().await;
    let engine = Arc::new(engine_retaining(Arc::new(InMemory::new()), 3, 0.0, 1));
    let target = node("s");
    commit_versions(&engine, &handler, &target, 2).await;
    let until = std::time::Instant::now() + Duration::from_secs(3);
    let sweeper = {
        let engine = engine.clone();
        tokio::spawn(async move {
            while std::time::Instant::now() < until {
                engine.sweep().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let writer = {
        let (engine, handler, target) = (engine.clone(), handler.clone(), target.clone());
        tokio::spawn(async move {
            let mut n = 3;
            while std::time::Instant::now() < until {
                let becomes = if n % 2 == 0 { Becomes::Current } else { Becomes::Retained };
                commit_as(&engine, &handler, &target, n, becomes).await;
                n += 1;
            }
        })
    };
    let (mut moved, mut gone) = (0, 0);
    while std::time::Instant::now() < until {
        let marker = engine.live_marker(&target).await.unwrap().unwrap();
        let Some(oldest) = marker.history.last().map(|record| record.version.clone()) else { continue };
        match engine.make_current(&target, &oldest, &handler, &Preconditions::default()).await {
            Ok(current) => {
                moved += 1;
                let mut seen: Vec<u64> = current.history.iter().filter_map(|r| r.number).collect();
                seen.push(current.number.unwrap());
                let count = seen.len();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len(), count, "numbers are unique: {current:?}");
                for version in current.referenced_versions() {
                    if let Err(error) = read_version(&engine, &target, version).await {
                        // Only a version a later commit dropped may be gone.
                        assert!(matches!(error, FolderError::VersionNotFound(_)), "{error}");
                    }
                }
                assert_eq!(read_back(&engine, &target).await.map(|files| files.len()), Some(2));
            }
            Err(FolderError::VersionNotFound(_)) => gone += 1,
            Err(error) => panic!("moving the current version failed: {error}"),
        }
    }
    writer.await.unwrap();
    sweeper.await.unwrap();
    assert!(moved > 0, "no move succeeded ({gone} found their version gone)");
    engine.sweep_with_grace(Duration::ZERO).await.unwrap();
    assert_no_orphans(&engine, &target).await;
}

/// Issue 39: every file of a version carries the SHA-256 of its bytes,
/// computed as the upload streams (a small file and a streamed large one);
/// a version written before that gets them once, read from its files,
/// without a new commit: the same etag and version, the digests kept.
#[tokio::test]
async fn files_carry_their_sha256_and_older_versions_get_theirs_once() {
    use dial_host::hashing::sha256_hex;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let engine = engine_on(store.clone(), in_process_locks());
    let handler = skill_handler().await;
    let target = node("digests");
    let large: Vec<u8> = (0..(3u32 << 20)).map(|n| (n % 251) as u8).collect();
    let files = vec![("SKILL.md", skill_md("digests")), ("data/large.bin", large.clone())];
    put_whole(&engine, &handler, &target, &files, &Preconditions::default()).await.unwrap();
    let marker = engine.live_marker(&target).await.unwrap().unwrap();
    for (path, content) in &files {
        assert_eq!(marker.files[*path].sha256.as_deref(), Some(sha256_hex(content).as_str()), "{path}");
    }

    // As a version written before the digests were kept.
    let mut old = marker.clone();
    old.files.values_mut().for_each(|record| record.sha256 = None);
    let stored = target.paths().resource_marker();
    store.put(&stored, PutPayload::from(old.to_json())).await.unwrap();
    let old = engine.live_marker(&target).await.unwrap().unwrap();
    let hashed = engine.file_digests(&target, old.clone()).await.unwrap();
    assert_eq!(hashed.files, marker.files, "the same digests, read back from the files");
    let kept = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(kept.files, marker.files, "kept in the marker");
    assert_eq!((kept.etag, kept.current_version, kept.commit_id), (old.etag, old.current_version, old.commit_id));
}

/// Issue 39: the skill's frontmatter is kept in its marker as JSON (what the
/// MCP Skills Extension serves verbatim, read with no file); a version
/// committed before the handler wrote it gets it once, from its own files,
/// without a new commit — and a version the handler gives none for is
/// remembered, not asked again.
#[tokio::test]
async fn the_frontmatter_is_kept_and_older_versions_get_theirs_once() {
    use dial_host::folders::marker::FRONTMATTER_METADATA;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let engine = engine_on(store.clone(), in_process_locks());
    let handler = skill_handler().await;
    let target = node("frontmatter");
    put_whole(&engine, &handler, &target, &[("SKILL.md", skill_md("kept"))], &Preconditions::default()).await.unwrap();
    let marker = engine.live_marker(&target).await.unwrap().unwrap();
    let kept = marker.metadata[FRONTMATTER_METADATA].clone();
    let frontmatter: serde_json::Value = serde_json::from_str(&kept).unwrap();
    assert_eq!(frontmatter["description"], "kept", "{kept}");

    // As a version written before the frontmatter was kept.
    let mut old = marker.clone();
    old.metadata.shift_remove(FRONTMATTER_METADATA);
    store.put(&target.paths().resource_marker(), PutPayload::from(old.to_json())).await.unwrap();
    let old = engine.live_marker(&target).await.unwrap().unwrap();
    let derived = engine.kept_metadata(&target, &old, &handler, FRONTMATTER_METADATA).await.unwrap();
    assert_eq!(derived.as_deref(), Some(kept.as_str()), "derived from SKILL.md as the commit would have");
    let stored = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(stored.metadata[FRONTMATTER_METADATA], kept, "kept in the marker");
    assert_eq!(
        (&stored.etag, &stored.current_version, &stored.commit_id),
        (&old.etag, &old.current_version, &old.commit_id)
    );

    // An entry the handler does not give is remembered as none.
    let none = engine.kept_metadata(&target, &stored, &handler, "no-such-entry").await.unwrap();
    assert_eq!(none, None);
    let stored = engine.live_marker(&target).await.unwrap().unwrap();
    assert_eq!(stored.metadata.get("no-such-entry").map(String::as_str), Some(""), "not asked again");
}

/// The names the creation index lists for alice's `skills` bucket, newest first.
async fn created_names(engine: &FolderEngine) -> Vec<String> {
    let root = ResourceUrl::parse("skills/bucket1/", Intent::Read).unwrap();
    let root = Node::new(root, BucketLocation::User("alice".into())).unwrap();
    let page = engine.list_created(&root, Order::NewestFirst, None, 10).await.unwrap();
    page.items.iter().map(|(url, _)| url.to_string()).collect()
}

/// A list that meets a tombstone's entry while a restore is under way (the
/// restore has written the entry and not yet the marker) leaves the entry:
/// the restored resource stays in the creation index, so the skills APIs
/// keep listing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_racing_a_restore_leaves_the_restored_resource_listed() {
    let handler = skill_handler().await;
    let store = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let engine = Arc::new(engine_on(store.clone(), in_process_locks()));
    let target = node("s");
    put_whole(&engine, &handler, &target, &old_files(), &Preconditions::default()).await.unwrap();
    assert_eq!(created_names(&engine).await, ["skills/bucket1/s"]);
    engine.delete_resource(&target, &Preconditions::default()).await.unwrap();
    let gate = store.hold_writes_to(target.paths().resource_marker().as_ref());
    let restore = tokio::spawn({
        let (engine, target) = (engine.clone(), target.clone());
        async move { engine.restore(&target).await }
    });
    gate.arrived.notified().await;
    let list = tokio::spawn({
        let engine = engine.clone();
        async move { created_names(&engine).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    gate.open();
    restore.await.unwrap().expect("the restore commits");
    list.await.unwrap();
    assert_eq!(created_names(&engine).await, ["skills/bucket1/s"], "the restored resource is listed");
}
