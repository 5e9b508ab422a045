//! v2 listings from the folder indexes (issue 28): a cached listing agrees
//! with an uncached one whatever two instances commit meanwhile, a warm
//! page reads no marker, a page from a large folder pulls only what it
//! needs from a store that lists in key order, and a store laid out before
//! the indexes is moved to them once, losing nothing.

#[path = "../../tests/instrumented_store.rs"]
mod instrumented_store;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use dial_host::blobs::{BlobLimits, BlobService, BlobTarget};
use dial_host::buckets::BucketLocation;
use dial_host::config::{FoldersConfig, HandlersConfig, ListingsConfig, LockConfig};
use dial_host::etag::Preconditions;
use dial_host::events::{EventBus, InProcessEvents};
use dial_host::folders::migrate::LAYOUT_DOCUMENT;
use dial_host::folders::{FolderEngine, FolderError, ListedNode, Node};
use dial_host::handlers::{Handler, HandlerRegistry, Runtime, RuntimeLimits};
use dial_host::locks::{InProcessLocks, LockService};
use dial_host::resource_url::{Intent, ResourceUrl};
use dial_host::storage::SerializedUpdates;
use futures_util::TryStreamExt;
use futures_util::stream;
use instrumented_store::InstrumentedStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

async fn skill_handler() -> Handler {
    let runtime = Runtime::new(RuntimeLimits::default(), None, false).unwrap();
    let registry = HandlerRegistry::load(runtime, &HandlersConfig::default()).await.unwrap();
    registry.get("skills").unwrap()
}

/// One instance: its own listing cache (`entries` 0: none), shared store and locks.
fn instance(
    store: Arc<dyn ObjectStore>,
    locks: Arc<dyn LockService>,
    entries: usize,
    in_key_order: bool,
) -> Arc<FolderEngine> {
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    let listings = ListingsConfig { cache_entries: entries, ..ListingsConfig::default() };
    Arc::new(
        FolderEngine::new(store, locks, events, FoldersConfig::default(), BTreeMap::new())
            .with_listings(&listings, in_key_order),
    )
}

fn node(path: &str) -> Node {
    let url = ResourceUrl::parse(&format!("skills/bucket1/{path}"), Intent::Write).unwrap();
    Node::new(url, BucketLocation::User("alice".into())).unwrap()
}

fn folder(path: &str) -> Node {
    node(&format!("{path}/"))
}

async fn put(
    engine: &FolderEngine,
    handler: &Handler,
    target: &Node,
    description: &str,
) -> Result<String, FolderError> {
    let conditions = Preconditions::default();
    let mut staging = engine.stage(target, handler, &conditions).await?;
    let skill = format!("---\nname: s\ndescription: {description}\n---\nbody\n");
    staging.add_file("SKILL.md", stream::iter(vec![Ok::<_, std::io::Error>(Bytes::from(skill))])).await?;
    Ok(engine.commit(staging, handler, &conditions, Some("alice".into())).await?.marker.etag)
}

/// What a listing shows of each node: its URL and, for a resource, its etag
/// and description.
fn shown(items: &[ListedNode]) -> Vec<String> {
    items
        .iter()
        .map(|item| match item {
            ListedNode::Resource { url, marker } => {
                format!("{url} {} {:?}", marker.etag, marker.metadata.get("description"))
            }
            other => other.url().to_string(),
        })
        .collect()
}

/// Every page of a listing of `at`, `limit` at a time, joined.
async fn all_pages(engine: &FolderEngine, at: &Node, recursive: bool, limit: usize) -> Vec<String> {
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = engine.list(at, recursive, token.as_deref(), limit, &|_| true).await.unwrap();
        assert!(page.items.len() <= limit);
        items.extend(shown(&page.items));
        match page.next_token {
            Some(next) => token = Some(next),
            None => return items,
        }
    }
}

/// A small deterministic generator: the same interleavings on every run.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Names (as URLs spell them) that sort differently decoded and stored
/// (`#` and `%` are encoded in the store, `$` is not), and one in a folder.
const NAMES: [&str; 10] = ["a", "a%20b", "a%23b", "a%25b", "a$b", "ab", "A", "%C3%A9", "z-last", "sub/inner"];

/// Two instances `a` and `b` (each on its own store handle: on the local
/// disk, each with its own directory memo, as two processes would be)
/// against `reference`, which keeps nothing. `settle`: a directory whose
/// subdirectories are all made to look settled before each round, so that
/// the local disk's memo answers until a commit changes them.
async fn cached_listings_agree_with_uncached_ones(
    stores: [(Arc<dyn ObjectStore>, bool); 3],
    settle: Option<&std::path::Path>,
    seed: u64,
) {
    let handler = skill_handler().await;
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&LockConfig::default()));
    let [(a, a_order), (b, b_order), (reference, reference_order)] = stores;
    let a = instance(a, locks.clone(), 10_000, a_order);
    let b = instance(b, locks.clone(), 10_000, b_order);
    let reference = instance(reference, locks, 0, reference_order);
    let root = folder("p");
    let mut random = XorShift(seed);
    // What each name was last committed as, by either instance.
    let mut committed: BTreeMap<String, Option<String>> = BTreeMap::new();
    for round in 0..40 {
        if let Some(settle) = settle {
            settle_directories(settle);
        }
        // A few commits and deletes, on either instance, racing a listing on each.
        let mut changes = Vec::new();
        let mut picked = Vec::new();
        for _ in 0..1 + random.below(3) {
            let name = NAMES[random.below(NAMES.len())];
            if picked.contains(&name) {
                continue;
            }
            picked.push(name);
            let engine = if random.below(2) == 0 { a.clone() } else { b.clone() };
            let delete = random.below(4) == 0;
            let handler = handler.clone();
            let description = format!("round {round}");
            changes.push(tokio::spawn(async move {
                let target = node(&format!("p/{name}"));
                let outcome = if delete {
                    engine.delete_resource(&target, &Preconditions::default()).await.map(|()| None)
                } else {
                    put(&engine, &handler, &target, &description).await.map(Some)
                };
                (name, outcome)
            }));
        }
        let racing = [a.clone(), b.clone()].map(|engine| {
            let root = root.clone();
            tokio::spawn(
                async move { engine.list(&root, false, None, 100, &|_| true).await.map(|page| page.items.len()) },
            )
        });
        for change in changes {
            let (name, outcome) = change.await.unwrap();
            match outcome {
                Ok(etag) => _ = committed.insert(name.to_string(), etag),
                Err(FolderError::NotFound(_)) => {}
                Err(error) => panic!("{name}: {error}"),
            }
        }
        for listing in racing {
            // The folder may not exist yet in the first round.
            match listing.await.unwrap() {
                Ok(_) | Err(FolderError::NotFound(_)) => {}
                Err(error) => panic!("a listing racing commits: {error}"),
            }
        }
        if committed.values().all(Option::is_none) {
            continue;
        }
        let expected = all_pages(&reference, &root, false, 1000).await;
        // Every commit that returned is in the next listing, on both instances.
        for (name, etag) in &committed {
            let top = name.split('/').next().unwrap();
            let url = node(&format!("p/{top}")).url.to_string();
            let listed = expected.iter().find(|line| line.split(' ').next() == Some(url.as_str()));
            match (etag, name.contains('/')) {
                (Some(etag), false) => assert!(
                    listed.is_some_and(|line| line.contains(etag.as_str())),
                    "{name} committed as {etag}, listed as {listed:?}"
                ),
                (None, false) => assert!(listed.is_none(), "{name} was deleted, still listed: {listed:?}"),
                _ => {}
            }
        }
        for (instance, engine) in [("a", &a), ("b", &b)] {
            let limit = 1 + random.below(4);
            assert_eq!(
                all_pages(engine, &root, false, limit).await,
                expected,
                "round {round}, {instance}, limit {limit}"
            );
            assert_eq!(
                all_pages(engine, &root, true, limit).await,
                all_pages(&reference, &root, true, 1000).await,
                "round {round}, {instance}, recursive, limit {limit}"
            );
        }
    }
    assert!(a.listing_cache_size().0 > 0, "the instances did keep markers");
}

#[tokio::test]
async fn cached_listings_agree_with_uncached_ones_on_a_store_listing_in_key_order() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    cached_listings_agree_with_uncached_ones(
        [(store.clone(), true), (store.clone(), true), (store, true)],
        None,
        0x2028,
    )
    .await;
}

#[tokio::test]
async fn cached_listings_agree_with_uncached_ones_on_a_store_listing_in_no_order() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    cached_listings_agree_with_uncached_ones(
        [(store.clone(), false), (store.clone(), false), (store, false)],
        None,
        0x2029,
    )
    .await;
}

/// The production local disk: two store handles with a directory memo
/// each (two processes), directories settled before every round so the
/// memos answer, against the bare local disk without one.
#[tokio::test]
async fn cached_listings_agree_with_uncached_ones_on_the_local_disk() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let open = || dial_host::storage::open_local(&url).unwrap().unwrap();
    let bare: Arc<dyn ObjectStore> =
        Arc::new(SerializedUpdates::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap()));
    cached_listings_agree_with_uncached_ones([(open(), true), (open(), true), (bare, false)], Some(dir.path()), 0x2030)
        .await;
}

/// Every directory below `root` dated 10 s back, as if it had settled.
fn settle_directories(root: &std::path::Path) {
    let at = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    let mut pending = vec![root.to_path_buf()];
    // A directory the store's background work removes meanwhile (a
    // discarded staging folder) is skipped: it has nothing left to settle.
    let gone = |error: &std::io::Error| error.kind() == std::io::ErrorKind::NotFound;
    while let Some(directory) = pending.pop() {
        let entries = match std::fs::read_dir(&directory) {
            Ok(entries) => entries,
            Err(error) if gone(&error) => continue,
            Err(error) => panic!("{}: {error}", directory.display()),
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(entry.path());
            }
        }
        match std::fs::File::open(&directory).and_then(|file| file.set_modified(at)) {
            Ok(()) => {}
            Err(error) if gone(&error) => {}
            Err(error) => panic!("{}: {error}", directory.display()),
        }
    }
}

/// A warm page reads no marker; markers changed on another instance are
/// read again, and only they.
#[tokio::test]
async fn a_warm_listing_reads_only_the_markers_that_changed() {
    const SKILLS: usize = 30;
    let handler = skill_handler().await;
    let counting = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&LockConfig::default()));
    let a = instance(counting.clone(), locks.clone(), 10_000, true);
    let b = instance(counting.clone(), locks, 10_000, true);
    for i in 0..SKILLS {
        put(&b, &handler, &node(&format!("team/s{i:02}")), "one").await.unwrap();
    }
    let team = folder("team");
    let mut costs = Vec::new();
    let mut listed = Vec::new();
    for changed in [0, 0, 3] {
        for i in 0..changed {
            put(&b, &handler, &node(&format!("team/s{i:02}")), "two").await.unwrap();
        }
        counting.take_reads();
        let page = a.list(&team, false, None, 100, &|_| true).await.unwrap();
        costs.push(counting.take_reads());
        listed.push(shown(&page.items));
    }
    assert_eq!(costs[0], (SKILLS, 2), "a cold page reads every marker, with one listing of each index");
    assert_eq!(costs[1], (0, 2), "a warm page reads no marker");
    assert_eq!(costs[2], (3, 2), "three changed markers are read again, nothing else");
    let differ: Vec<usize> = (0..SKILLS).filter(|i| listed[1][*i] != listed[2][*i]).collect();
    assert_eq!(differ, [0, 1, 2], "the changes show at once");
    assert!(listed[2][0].contains("two"));

    // An empty page asks whether the folder exists; a page with children does not.
    let missing = a.list(&folder("nothing-here"), false, None, 100, &|_| true).await;
    assert!(matches!(missing, Err(FolderError::NotFound(_))), "{missing:?}");
}

/// On a store that lists in key order, a page from the middle of a large
/// folder pulls about a page of entries, not the folder; pages join into
/// the whole listing. On one that does not, the index is read whole.
#[tokio::test]
async fn a_page_from_a_large_folder_pulls_only_what_it_needs() {
    const SKILLS: usize = 1200;
    let handler = skill_handler().await;
    let counting = Arc::new(InstrumentedStore::new(Arc::new(InMemory::new())));
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&LockConfig::default()));
    let ordered = instance(counting.clone(), locks.clone(), 10_000, true);
    let unordered = instance(counting.clone(), locks, 10_000, false);
    let writes = stream::iter(0..SKILLS).map(|i| {
        let (engine, handler) = (ordered.clone(), handler.clone());
        async move { put(&engine, &handler, &node(&format!("big/s{i:05}")), "x").await }
    });
    use futures_util::StreamExt;
    let written: Vec<_> = writes.buffer_unordered(8).try_collect().await.unwrap();
    assert_eq!(written.len(), SKILLS);
    let big = folder("big");
    for (engine, whole) in [(&ordered, false), (&unordered, true)] {
        counting.take_listed_objects();
        counting.take_reads();
        let page = engine.list(&big, false, Some("s00600"), 100, &|_| true).await.unwrap();
        let pulled = counting.take_listed_objects();
        let (_, listings) = counting.take_reads();
        assert_eq!(page.items.first().unwrap().url().name(), Some("s00601"));
        assert_eq!(page.next_token.as_deref(), Some("s00700"));
        assert_eq!(listings, 2, "one listing of each index");
        if whole {
            assert_eq!(pulled, 0, "listed in no order, each index is one delimiter listing, read whole");
        } else {
            assert!(pulled <= 100 + 2 * 16 + 2, "a page of 100 pulled {pulled} entries from a folder of {SKILLS}");
        }
    }
    let paged = all_pages(&ordered, &big, false, 100).await;
    assert_eq!(paged.len(), SKILLS);
    assert_eq!(paged, all_pages(&unordered, &big, false, 1000).await);
}

/// Markers written inside each node's prefix (before issue 28) are moved to
/// the indexes once: everything lists and reads as before, a second run
/// does nothing, and a run cut short is finished by the next.
#[tokio::test]
async fn a_store_in_the_old_layout_is_moved_to_the_indexes_once() {
    let handler = skill_handler().await;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&LockConfig::default()));
    let engine = instance(store.clone(), locks, 10_000, true);
    for path in ["team/one", "team/deep/two", "three", "a%23b"] {
        put(&engine, &handler, &node(path), "kept").await.unwrap();
        put(&engine, &handler, &node(path), "current").await.unwrap();
    }
    put(&engine, &handler, &node("gone"), "deleted").await.unwrap();
    engine.delete_resource(&node("gone"), &Preconditions::default()).await.unwrap();
    let root = node("");
    let before = all_pages(&engine, &root, true, 1000).await;
    let versions_before = engine.live_marker(&node("team/one")).await.unwrap().unwrap().history.len();

    // Put every marker back where the old layout kept it.
    let fresh = || async {
        let all: Vec<Path> = store.list(None).map_ok(|meta| meta.location).try_collect().await.unwrap();
        all
    };
    let nodes = ["team/one", "team/deep/two", "three", "a%23b", "gone"].map(node);
    let folders = ["team", "team/deep"].map(folder);
    let mut moved_back = 0;
    for (from, to) in nodes
        .iter()
        .map(|n| (n.paths().resource_marker(), n.paths().legacy_resource_marker()))
        .chain(folders.iter().map(|n| (n.paths().folder_marker(), n.paths().legacy_folder_marker())))
    {
        let bytes = store.get(&from).await.unwrap().bytes().await.unwrap();
        store.put(&to, bytes.into()).await.unwrap();
        store.delete(&from).await.unwrap();
        moved_back += 1;
    }
    // A v1 item named like an old marker (v1 groups share the tree) is an
    // item, not a marker: it stays, whole.
    let blobs = BlobService::new(
        store.clone(),
        Arc::new(InProcessLocks::new(&LockConfig::default())),
        Arc::new(InProcessEvents::new()),
        BlobLimits { max_size: 1 << 20, max_file_size: 1 << 20 },
        false,
    );
    let item_url = ResourceUrl::parse("files/bucket1/notes/.dial-folder", Intent::Write).unwrap();
    let item = BlobTarget::new(item_url, BucketLocation::User("alice".into())).unwrap();
    let content = Bytes::from_static(b"{\"schemaVersion\": 1, \"createdAt\": 1}");
    let body = stream::iter(vec![Ok::<_, std::io::Error>(content.clone())]);
    blobs.put_file(&item, body, Some("application/json"), &Preconditions::default(), None, None).await.unwrap();

    // A migration cut short: one marker already copied, its old one still there.
    let half = &nodes[2];
    store.copy(&half.paths().legacy_resource_marker(), &half.paths().resource_marker()).await.unwrap();
    assert!(!fresh().await.iter().any(|path| path.as_ref() == LAYOUT_DOCUMENT));

    let moved = engine.migrate_layout().await.unwrap().expect("a store without a layout document is migrated");
    assert_eq!((moved.resources + moved.folders + moved.already_moved), moved_back, "{moved:?}");
    assert_eq!(moved.already_moved, 1);
    assert_eq!(moved.folders, 2);
    let left: Vec<Path> = fresh().await.into_iter().filter(|path| path.as_ref().ends_with(".dial-folder")).collect();
    assert_eq!(left, [item.path().clone()], "only the v1 item keeps the old marker's name");
    let old_markers = fresh()
        .await
        .into_iter()
        .filter(|path| path.as_ref().ends_with(".dial-resource") && !path.as_ref().contains("/v/"))
        .count();
    assert_eq!(old_markers, 0);
    assert_eq!(all_pages(&engine, &root, true, 1000).await, before);
    assert_eq!(moved.left_alone, 1, "{moved:?}");
    let kept = blobs.download(&item, &Preconditions::default()).await.expect("the v1 item is where it was");
    drop(kept);
    assert!(store.head(item.path()).await.is_ok());
    assert_eq!(engine.live_marker(&node("team/one")).await.unwrap().unwrap().history.len(), versions_before);
    assert!(engine.restore(&node("gone")).await.is_ok(), "a tombstone moved is still restorable");
    assert_eq!(engine.migrate_layout().await.unwrap(), None, "the second run does nothing");
}

/// A node named like an index (allowed before issue 28) cannot be moved
/// into its parent's index: the migration refuses, naming it, and moves
/// nothing it would have to undo.
#[tokio::test]
async fn a_node_named_like_an_index_stops_the_migration() {
    let handler = skill_handler().await;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&LockConfig::default()));
    let engine = instance(store.clone(), locks, 10_000, true);
    put(&engine, &handler, &node("ok"), "x").await.unwrap();
    let marker = store.get(&node("ok").paths().resource_marker()).await.unwrap().bytes().await.unwrap();
    // The old layout's marker of a node `.dial-resources` at the bucket root.
    let parent = node("").paths().base().clone();
    store.put(&parent.join(".dial-resources").join(".dial-resource"), marker.into()).await.unwrap();
    let refused = engine.migrate_layout().await;
    assert!(matches!(&refused, Err(FolderError::BadRequest(why)) if why.contains("'.dial-resources'")), "{refused:?}");
    assert!(
        !store
            .list(None)
            .map_ok(|m| m.location.to_string())
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .iter()
            .any(|p| p == LAYOUT_DOCUMENT)
    );
}
