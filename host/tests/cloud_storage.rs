//! The cloud backends against real emulators — S3 on moto, Azure Blob on Azurite — through
//! `dial_host::backends::open`: the conditional writes commits rely on (and the start-up check of them),
//! sixteen racing compare-and-swap writers, delimiter listings and paging, multipart uploads of large
//! files, URL prefixes, readiness and documents updated from two clients. Every test runs once per
//! backend (`mod s3`, `mod azure` at the bottom).
//!
//! Each test starts its own emulator (see `tests/services.rs`); without one installed they skip with a
//! note, except under `CI=true`. `scripts/test` installs both. GCS has no emulator that speaks the API
//! object_store uses (docs/operations.md), so it is not here.

#[path = "../../tests/services.rs"]
mod services;

use std::sync::Arc;

use dial_host::backends;
use dial_host::storage::{self, Fencing, StorageError};
use futures_util::TryStreamExt;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, UpdateVersion, WriteMultipart};

/// An emulator of `backend` with one fresh bucket, and the store `<scheme>://<bucket><suffix>` opened on it.
fn cloud_store(backend: &str, bucket: &str, suffix: &str) -> Option<(services::Emulator, Arc<dyn ObjectStore>)> {
    let emulator = services::emulator(backend)?;
    emulator.create(bucket);
    let store = backends::open(&format!("{}{suffix}", emulator.url(bucket)), &emulator.storage_options()).unwrap();
    Some((emulator, store))
}

fn update(version: impl Into<UpdateVersion>) -> PutOptions {
    PutOptions::from(PutMode::Update(version.into()))
}

async fn read(store: &dyn ObjectStore, path: &Path) -> String {
    String::from_utf8(store.get(path).await.unwrap().bytes().await.unwrap().to_vec()).unwrap()
}

async fn conditional_writes(backend: &str) {
    let Some((_emulator, store)) = cloud_store(backend, "conditional", "") else { return };
    let marker = Path::from("bucket/r/marker.json");

    let created = store.put_opts(&marker, "one".into(), PutMode::Create.into()).await.unwrap();
    let again = store.put_opts(&marker, "two".into(), PutMode::Create.into()).await;
    assert!(matches!(again, Err(object_store::Error::AlreadyExists { .. })), "{again:?}");
    assert_eq!(read(store.as_ref(), &marker).await, "one");

    // The version from `head` works as well as the one from the put.
    let head = store.head(&marker).await.unwrap();
    assert_eq!(head.e_tag, created.e_tag);
    let updated = store.put_opts(&marker, "two".into(), update(created.clone())).await.unwrap();
    assert_ne!(updated.e_tag, created.e_tag);
    assert_eq!(read(store.as_ref(), &marker).await, "two");

    let stale = store.put_opts(&marker, "three".into(), update(created)).await;
    assert!(matches!(stale, Err(object_store::Error::Precondition { .. })), "{stale:?}");
    assert_eq!(read(store.as_ref(), &marker).await, "two");

    let missing = store.put_opts(&Path::from("bucket/none/marker.json"), "x".into(), update(updated)).await;
    assert!(matches!(missing, Err(object_store::Error::Precondition { .. })), "{missing:?}");
}

async fn concurrent_updates_with_one_etag_have_one_winner(backend: &str) {
    let Some((_emulator, store)) = cloud_store(backend, "race", "") else { return };
    let marker = Path::from("marker.json");
    let base = store.put_opts(&marker, "base".into(), PutMode::Create.into()).await.unwrap();

    let mut writers = tokio::task::JoinSet::new();
    for i in 0..16 {
        let (store, marker, base) = (store.clone(), marker.clone(), base.clone());
        writers.spawn(async move { (i, store.put_opts(&marker, format!("writer {i}").into(), update(base)).await) });
    }
    let mut winners = Vec::new();
    let mut losers = 0;
    while let Some(joined) = writers.join_next().await {
        match joined.unwrap() {
            (i, Ok(_)) => winners.push(i),
            (_, Err(object_store::Error::Precondition { .. })) => losers += 1,
            (i, Err(other)) => panic!("writer {i}: unexpected {other:?}"),
        }
    }
    assert_eq!((winners.len(), losers), (1, 15), "winners {winners:?}");
    assert_eq!(read(store.as_ref(), &marker).await, format!("writer {}", winners[0]));
}

async fn list_with_delimiter(backend: &str) {
    let Some((_emulator, store)) = cloud_store(backend, "listing", "") else { return };
    for path in ["r/marker.json", "r/v/1/a.txt", "r/v/2/a.txt", "r/v/2/sub/b.txt", "r/v/3/a.txt", "rest/x"] {
        store.put(&Path::from(path), "x".into()).await.unwrap();
    }

    let top = store.list_with_delimiter(Some(&Path::from("r"))).await.unwrap();
    assert_eq!(top.common_prefixes, vec![Path::from("r/v")]);
    let objects: Vec<_> = top.objects.iter().map(|meta| meta.location.as_ref()).collect();
    assert_eq!(objects, ["r/marker.json"]);

    let versions = store.list_with_delimiter(Some(&Path::from("r/v"))).await.unwrap();
    let mut prefixes: Vec<_> = versions.common_prefixes.iter().map(|path| path.as_ref()).collect();
    prefixes.sort();
    assert_eq!(prefixes, ["r/v/1", "r/v/2", "r/v/3"]);
    assert!(versions.objects.is_empty());

    // Recursive listing below a prefix, and from an offset (the sweep and v1 listings page this way).
    let mut below: Vec<String> =
        store.list(Some(&Path::from("r/v"))).map_ok(|meta| meta.location.to_string()).try_collect().await.unwrap();
    below.sort();
    assert_eq!(below, ["r/v/1/a.txt", "r/v/2/a.txt", "r/v/2/sub/b.txt", "r/v/3/a.txt"]);
    let mut after: Vec<String> = store
        .list_with_offset(Some(&Path::from("r/v")), &Path::from("r/v/2/a.txt"))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    after.sort();
    // Azurite ignores the offset (object_store filters for it only in emulator mode), so callers filter
    // too: what matters here is that nothing at or before the offset is missing a later object.
    after.retain(|path| path.as_str() > "r/v/2/a.txt");
    assert_eq!(after, ["r/v/2/sub/b.txt", "r/v/3/a.txt"]);
}

async fn delimiter_listings_page(backend: &str) {
    let Some((emulator, _store)) = cloud_store(backend, "paging", "") else { return };
    // Paging is a capability of the concrete cloud stores, not of `dyn ObjectStore`.
    let options = emulator.storage_options();
    let paginated: Box<dyn PaginatedListStore> = match emulator.name() {
        "s3" => Box::new(
            options
                .iter()
                .fold(object_store::aws::AmazonS3Builder::new().with_bucket_name("paging"), |b, (k, v)| {
                    b.with_config(k.parse().unwrap(), v)
                })
                .build()
                .unwrap(),
        ),
        _ => Box::new(
            options
                .iter()
                .fold(object_store::azure::MicrosoftAzureBuilder::new().with_container_name("paging"), |b, (k, v)| {
                    b.with_config(k.parse().unwrap(), v)
                })
                .build()
                .unwrap(),
        ),
    };
    let store = backends::open(&emulator.url("paging"), &options).unwrap();
    for version in 1..=5 {
        store.put(&Path::from(format!("r/v/{version}/a.txt")), "x".into()).await.unwrap();
    }
    let mut pages = 0;
    let mut prefixes = Vec::new();
    let mut token = None;
    loop {
        let options = PaginatedListOptions {
            delimiter: Some("/".into()),
            max_keys: Some(2),
            page_token: token.take(),
            ..Default::default()
        };
        let page = paginated.list_paginated(Some("r/v/"), options).await.unwrap();
        pages += 1;
        assert!(page.result.common_prefixes.len() <= 2, "a page holds at most max_keys prefixes");
        prefixes.extend(page.result.common_prefixes.iter().map(|p| p.to_string()));
        match page.page_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    assert_eq!(prefixes, ["r/v/1", "r/v/2", "r/v/3", "r/v/4", "r/v/5"]);
    assert_eq!(pages, 3);
}

async fn multipart_upload_reads_back_intact(backend: &str) {
    let Some((_emulator, store)) = cloud_store(backend, "multipart", "") else { return };
    let path = Path::from("v/1/big.bin");
    // 11 MiB: three parts at WriteMultipart's 5 MiB chunks (Azure: three blocks), the last one short.
    let data: Vec<u8> = (0..11 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();

    let mut upload = WriteMultipart::new(store.put_multipart(&path).await.unwrap());
    for chunk in data.chunks(1024 * 1024 + 7) {
        upload.wait_for_capacity(4).await.unwrap();
        upload.write(chunk);
    }
    let result = upload.finish().await.unwrap();

    if backend == "s3" {
        // S3's multipart ETag counts the parts; Azure's is as opaque as any other.
        assert!(result.e_tag.as_deref().is_some_and(|tag| tag.ends_with("-3\"")), "multipart ETag {:?}", result.e_tag);
    }
    assert_eq!(store.head(&path).await.unwrap().size, data.len() as u64);
    let read_back = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert!(read_back == data, "11 MiB read back differ");
}

async fn url_prefix_keeps_objects_under_it(backend: &str) {
    let Some((emulator, prefixed)) = cloud_store(backend, "prefixed", "/some/prefix") else { return };
    let whole = backends::open(&emulator.url("prefixed"), &emulator.storage_options()).unwrap();

    let created = prefixed.put_opts(&Path::from("r/marker.json"), "one".into(), PutMode::Create.into()).await.unwrap();
    prefixed.put_opts(&Path::from("r/marker.json"), "two".into(), update(created)).await.unwrap();
    assert_eq!(read(whole.as_ref(), &Path::from("some/prefix/r/marker.json")).await, "two");

    whole.put(&Path::from("outside.txt"), "x".into()).await.unwrap();
    let listed = prefixed.list_with_delimiter(None).await.unwrap();
    assert_eq!(listed.common_prefixes, vec![Path::from("r")]);
    assert!(listed.objects.is_empty(), "{:?}", listed.objects);
    let under_r = prefixed.list_with_delimiter(Some(&Path::from("r"))).await.unwrap();
    assert_eq!(under_r.objects[0].location, Path::from("r/marker.json"));
}

async fn check_ready_follows_the_server(backend: &str) {
    let Some((mut emulator, store)) = cloud_store(backend, "ready", "") else { return };
    storage::check_ready(store.as_ref()).await.unwrap();

    emulator.stop();
    let started = std::time::Instant::now();
    let stopped = storage::check_ready(store.as_ref()).await;
    assert!(matches!(stopped, Err(StorageError::NoAnswer(_) | StorageError::Store(_))), "{stopped:?}");
    assert!(started.elapsed() < storage::READY_TIMEOUT + std::time::Duration::from_secs(3));
}

async fn a_missing_bucket_is_not_ready(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    let store = backends::open(&emulator.url("never-created"), &emulator.storage_options()).unwrap();
    let result = storage::check_ready(store.as_ref()).await;
    assert!(matches!(result, Err(StorageError::Store(_))), "{result:?}");
}

/// Sharing grants, invitations and publications are documents updated by
/// compare-and-swap: concurrent writers from several instances (separate
/// store clients on one S3 bucket) must all land, none lost.
async fn concurrent_document_updates_from_two_clients_all_land(backend: &str) {
    use dial_host::documents::{DocumentError, Documents, Update, global_path};
    let Some((emulator, first)) = cloud_store(backend, "documents", "") else { return };
    let second = backends::open(&emulator.url("documents"), &emulator.storage_options()).unwrap();
    let path = global_path("test", "set");
    let mut writers = tokio::task::JoinSet::new();
    for i in 0..12 {
        let documents = Documents::new(if i % 2 == 0 { first.clone() } else { second.clone() });
        let path = path.clone();
        writers.spawn(async move {
            documents
                .update(&path, |set: &mut std::collections::BTreeSet<u32>| {
                    set.insert(i);
                    Ok::<_, DocumentError>(Update::Changed(()))
                })
                .await
        });
    }
    for result in writers.join_all().await {
        result.unwrap();
    }
    let set: std::collections::BTreeSet<u32> = Documents::new(first).read(&path).await.unwrap();
    assert_eq!(set.len(), 12, "{set:?}");
}

/// The start-up check finds the emulator's conditional writes working, and refuses the same store once
/// object_store is told not to make them (S3's `conditional_put = disabled`, the setting for S3-compatible
/// stores without them).
async fn the_fence_check_tells_fenced_from_unfenced(backend: &str) {
    let Some((emulator, store)) = cloud_store(backend, "fence", "") else { return };
    assert_eq!(storage::check_fencing(store.as_ref()).await.unwrap(), Fencing::Fenced);
    let probes: Vec<_> = store.list(Some(&Path::from(".dial-host/fence-probe"))).try_collect().await.unwrap();
    assert!(probes.is_empty(), "the probe is deleted: {probes:?}");
    if backend == "s3" {
        let mut options = emulator.storage_options();
        options.insert("conditional_put".into(), "disabled".into());
        let unfenced = backends::open(&emulator.url("fence"), &options).unwrap();
        let verdict = storage::check_fencing(unfenced.as_ref()).await.unwrap();
        assert!(matches!(&verdict, Fencing::Unfenced(why) if why.contains("create-only")), "{verdict:?}");
    }
}

/// Every test above, on each emulated backend.
macro_rules! on_backend {
    ($module:ident, $backend:literal) => {
        mod $module {
            #[tokio::test]
            async fn conditional_writes() {
                super::conditional_writes($backend).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sixteen_updates_with_one_etag_have_one_winner() {
                super::concurrent_updates_with_one_etag_have_one_winner($backend).await;
            }
            #[tokio::test]
            async fn list_with_delimiter() {
                super::list_with_delimiter($backend).await;
            }
            #[tokio::test]
            async fn delimiter_listings_page() {
                super::delimiter_listings_page($backend).await;
            }
            #[tokio::test]
            async fn multipart_upload_reads_back_intact() {
                super::multipart_upload_reads_back_intact($backend).await;
            }
            #[tokio::test]
            async fn url_prefix_keeps_objects_under_it() {
                super::url_prefix_keeps_objects_under_it($backend).await;
            }
            #[tokio::test]
            async fn check_ready_follows_the_server() {
                super::check_ready_follows_the_server($backend).await;
            }
            #[tokio::test]
            async fn a_missing_bucket_is_not_ready() {
                super::a_missing_bucket_is_not_ready($backend).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_document_updates_from_two_clients_all_land() {
                super::concurrent_document_updates_from_two_clients_all_land($backend).await;
            }
            #[tokio::test]
            async fn the_fence_check_tells_fenced_from_unfenced() {
                super::the_fence_check_tells_fenced_from_unfenced($backend).await;
            }
        }
    };
}

on_backend!(s3, "s3");
on_backend!(azure, "azure");

/// A store that cannot make compare-and-swap writes at all (the bare local filesystem, which the host
/// only ever uses behind its single-process wrapper) is reported as unfenced.
#[tokio::test]
async fn a_store_without_compare_and_swap_is_unfenced() {
    let dir = tempfile::tempdir().unwrap();
    let bare = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    let verdict = storage::check_fencing(&bare).await.unwrap();
    assert!(matches!(&verdict, Fencing::Unfenced(why) if why.contains("compare-and-swap")), "{verdict:?}");
    let wrapped = backends::open(&format!("file://{}/w", dir.path().display()), &Default::default()).unwrap();
    assert_eq!(storage::check_fencing(wrapped.as_ref()).await.unwrap(), Fencing::Fenced);
}
