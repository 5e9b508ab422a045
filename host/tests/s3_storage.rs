//! The S3 backend against a real S3 server (moto), through `dial_host::storage::open`: the conditional
//! writes commits rely on, listing, multipart uploads, URL prefixes and readiness.
//!
//! Each test starts its own moto (see `tests/services.rs`); without moto installed they skip with a note,
//! except under `CI=true`. `scripts/test` installs it.

#[path = "../../tests/services.rs"]
mod services;

use std::sync::Arc;

use dial_host::storage::{self, StorageError};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, UpdateVersion, WriteMultipart};

/// A moto with one fresh bucket, and the store `s3://<bucket><suffix>` opened on it.
fn s3_store(bucket: &str, suffix: &str) -> Option<(services::Moto, Arc<dyn ObjectStore>)> {
    let moto = services::moto()?;
    moto.create_bucket(bucket);
    let store = storage::open(&format!("s3://{bucket}{suffix}"), &moto.storage_options()).unwrap();
    Some((moto, store))
}

fn update(version: impl Into<UpdateVersion>) -> PutOptions {
    PutOptions::from(PutMode::Update(version.into()))
}

async fn read(store: &dyn ObjectStore, path: &Path) -> String {
    String::from_utf8(store.get(path).await.unwrap().bytes().await.unwrap().to_vec()).unwrap()
}

#[tokio::test]
async fn conditional_writes() {
    let Some((_moto, store)) = s3_store("conditional", "") else { return };
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_updates_with_one_etag_have_one_winner() {
    let Some((_moto, store)) = s3_store("race", "") else { return };
    let marker = Path::from("marker.json");
    let base = store.put_opts(&marker, "base".into(), PutMode::Create.into()).await.unwrap();

    let mut writers = tokio::task::JoinSet::new();
    for i in 0..8 {
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
    assert_eq!((winners.len(), losers), (1, 7), "winners {winners:?}");
    assert_eq!(read(store.as_ref(), &marker).await, format!("writer {}", winners[0]));
}

#[tokio::test]
async fn list_with_delimiter() {
    let Some((_moto, store)) = s3_store("listing", "") else { return };
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
}

#[tokio::test]
async fn multipart_upload_reads_back_intact() {
    let Some((_moto, store)) = s3_store("multipart", "") else { return };
    let path = Path::from("v/1/big.bin");
    // 11 MiB: three parts at WriteMultipart's 5 MiB chunks, the last one short.
    let data: Vec<u8> = (0..11 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();

    let mut upload = WriteMultipart::new(store.put_multipart(&path).await.unwrap());
    for chunk in data.chunks(1024 * 1024 + 7) {
        upload.wait_for_capacity(4).await.unwrap();
        upload.write(chunk);
    }
    let result = upload.finish().await.unwrap();

    assert!(result.e_tag.as_deref().is_some_and(|tag| tag.ends_with("-3\"")), "multipart ETag {:?}", result.e_tag);
    assert_eq!(store.head(&path).await.unwrap().size, data.len() as u64);
    let read_back = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert!(read_back == data, "11 MiB read back differ");
}

#[tokio::test]
async fn url_prefix_keeps_objects_under_it() {
    let Some((moto, prefixed)) = s3_store("prefixed", "/some/prefix") else { return };
    let whole = storage::open("s3://prefixed", &moto.storage_options()).unwrap();

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

#[tokio::test]
async fn check_ready_follows_the_server() {
    let Some((mut moto, store)) = s3_store("ready", "") else { return };
    storage::check_ready(store.as_ref()).await.unwrap();

    moto.stop();
    let started = std::time::Instant::now();
    let stopped = storage::check_ready(store.as_ref()).await;
    assert!(matches!(stopped, Err(StorageError::NoAnswer(_) | StorageError::Store(_))), "{stopped:?}");
    assert!(started.elapsed() < storage::READY_TIMEOUT + std::time::Duration::from_secs(3));
}

#[tokio::test]
async fn a_missing_bucket_is_not_ready() {
    let Some(moto) = services::moto() else { return };
    let store = storage::open("s3://never-created", &moto.storage_options()).unwrap();
    let result = storage::check_ready(store.as_ref()).await;
    assert!(matches!(result, Err(StorageError::Store(_))), "{result:?}");
}

/// Sharing grants, invitations and publications are documents updated by
/// compare-and-swap: concurrent writers from several instances (separate
/// store clients on one S3 bucket) must all land, none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_document_updates_from_two_clients_all_land() {
    use dial_host::documents::{DocumentError, Documents, Update, global_path};
    let Some((moto, first)) = s3_store("documents", "") else { return };
    let second = storage::open("s3://documents", &moto.storage_options()).unwrap();
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
