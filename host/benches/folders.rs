//! Folder resources (v2), measured against a baseline in the same run:
//!
//! 1. whole-resource PUT and GET of a 100-file, 5 MiB skill through the
//!    engine on the local filesystem backend, on S3 (moto) and on Azure Blob
//!    (Azurite), versus the
//!    same 100 files written and read straight through `object_store`;
//! 2. peak RSS of the real server process while it streams a 1 GiB skill as
//!    a ZIP, versus its idle RSS;
//! 3. a page (100) of a folder of 1 000 skills on the local disk and on S3
//!    (moto), versus the raw store listing of the index that page needs,
//!    with the marker reads and store requests a warm page, a cold one and
//!    one after 10 changed cost; the same for a v1 folder of 1 000 files;
//!    a page of a folder of 100 000 skills on S3 versus one of 1 000
//!    (`listing-100k`); the memory of the marker cache (`listing-rss`);
//! 4. 200 sequential GETs of a small skill's ZIP on one keep-alive
//!    connection to the real server (p50/p99), versus a fresh connection per
//!    GET and keep-alive `GET /health`;
//! 5. a 1 GiB skill uploaded through the real server to S3 (moto):
//!    throughput and the server's peak RSS, versus the same bytes written
//!    straight through `object_store`'s multipart upload;
//! 6. what version history costs a commit: whole and single-file PUTs of a
//!    small skill on S3 (moto) keeping ten versions, versus keeping one;
//! 7. the names of a 1 000-file upload checked as one file system would
//!    see them (`FoldedNames`: NFD, case folding, NFC per path and folder),
//!    versus the path and file/folder checks every file already met
//!    (`names`).
//!
//! `cargo bench -p dial-host --bench folders` prints Markdown tables for
//! `docs/benchmarks.md`; `… -- keep-alive` (or `put-get`, `put-get-local`,
//! `put-get-s3`, `put-get-azure`, `download`, `listing`, `listing-v1`, `listing-100k`, `listing-rss`, `upload-s3`, `history`, `names`) runs only the items named. Latencies are medians over
//! iterations unless a table says otherwise.

mod common;
#[path = "../../tests/instrumented_store.rs"]
mod instrumented_store;
#[path = "../../tests/random_bytes.rs"]
mod random_bytes;
#[path = "../../tests/services.rs"]
mod services;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{API_KEY, ServerProcess, cpu_model, load_average, memory_of, nproc, percentile};
use dial_host::blobs::{BlobLimits, BlobService, BlobTarget};
use dial_host::buckets::BucketLocation;
use dial_host::config::{FoldersConfig, HandlersConfig, ListingsConfig, LockConfig};
use dial_host::etag::Preconditions;
use dial_host::events::{EventBus, InProcessEvents};
use dial_host::folders::archive::stream_zip;
use dial_host::folders::layout::RESOURCE_INDEX;
use dial_host::folders::{FolderEngine, Node};
use dial_host::handlers::{Handler, HandlerRegistry, Runtime, RuntimeLimits};
use dial_host::locks::{InProcessLocks, LockService};
use dial_host::resource_url::{Intent, ResourceUrl};
use dial_host::storage::SerializedUpdates;
use futures_util::stream::{self, StreamExt};
use instrumented_store::InstrumentedStore;
use md5::{Digest, Md5};
use object_store::aws::AmazonS3Builder;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use random_bytes::random_bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const COMMAND: &str = "cargo bench -p dial-host --bench folders";

/// Item 1: files in the skill besides SKILL.md, and their total size.
const BLOBS: usize = 99;
const BLOB_BYTES: usize = (5 << 20) / BLOBS;
const WARMUP: usize = 2;
const ITERATIONS: usize = 21;

/// Item 2: the skill fills the default per-resource limit exactly (1 GiB).
const BIG_TOTAL: u64 = 1 << 30;
const BIG_BLOBS: usize = 4;
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// Item 3.
const FOLDER_SKILLS: usize = 1000;
const PAGE: usize = 100;
const LIST_ROUNDS: usize = 31;

/// Item 4.
const KEEP_ALIVE_GETS: usize = 200;
const KEEP_ALIVE_WARMUP: usize = 20;

fn main() {
    // Items named on the command line (after `--`), or all of them.
    let named: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    if let [walk, dir, bound] = &named[..]
        && walk == "listing-rss-walk"
    {
        return listing_rss_walk(dir, bound.parse().unwrap());
    }
    let started = Instant::now();
    let load_before = load_average();
    println!("## `{COMMAND}`");
    println!();
    println!("machine: nproc {}, {}; load average (1/5/15 min) before: {load_before}", nproc(), cpu_model());
    println!();

    let wanted = |item: &str| named.is_empty() || named.iter().any(|name| name == item);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let handler =
        (wanted("put-get") || wanted("listing") || wanted("history")).then(|| runtime.block_on(skill_handler()));
    let handler = (handler.is_none() && (wanted("put-get-local") || wanted("put-get-s3") || wanted("put-get-azure")))
        .then(|| runtime.block_on(skill_handler()))
        .or(handler);
    if let (true, Some(handler)) = (wanted("put-get") || wanted("put-get-local"), &handler) {
        let dir = tempfile::tempdir().unwrap();
        runtime.block_on(put_and_get(handler, "local filesystem backend", local_store(&dir)));
    }
    if let (true, Some(handler)) = (wanted("put-get") || wanted("put-get-s3"), &handler) {
        let moto = services::moto().expect("moto for the S3 rows: run scripts/test once to install it");
        moto.create_bucket("bench");
        let store = dial_host::backends::open("s3://bench", &moto.storage_options()).unwrap();
        runtime.block_on(put_and_get(handler, "S3 (moto on the same machine)", store));
    }
    if let (true, Some(handler)) = (wanted("put-get") || wanted("put-get-azure"), &handler) {
        let azurite = services::azurite().expect("Azurite for the Azure rows: run scripts/test once to install it");
        azurite.create_container("bench");
        let store = dial_host::backends::open("az://bench", &azurite.storage_options()).unwrap();
        runtime.block_on(put_and_get(handler, "Azure Blob (Azurite on the same machine)", store));
    }
    if wanted("upload-s3") {
        runtime.block_on(big_upload_to_s3());
    }
    if wanted("names") {
        names();
    }
    if wanted("download") {
        runtime.block_on(big_download());
    }
    if let (true, Some(handler)) = (wanted("listing"), &handler) {
        let moto = services::moto();
        runtime.block_on(listing(handler, moto.as_ref()));
    }
    if !wanted("listing") && wanted("listing-v1") {
        let moto = services::moto();
        runtime.block_on(v1_listing(moto.as_ref()));
    }
    if wanted("listing-100k") {
        let moto = services::moto().expect("moto for the 100 000-skill listing: run scripts/test once to install it");
        runtime.block_on(listing_100k(&moto));
    }
    if wanted("listing-rss") {
        runtime.block_on(listing_rss());
    }
    if wanted("keep-alive") {
        runtime.block_on(keep_alive_gets());
    }
    if let (true, Some(handler)) = (wanted("history"), &handler) {
        let moto = services::moto().expect("moto for the history item: run scripts/test once to install it");
        moto.create_bucket("bench-history");
        let store = dial_host::backends::open("s3://bench-history", &moto.storage_options()).unwrap();
        runtime.block_on(history(handler, store));
    }

    println!(
        "load average (1/5/15 min) after: {}; total bench time {:.0} s",
        load_average(),
        started.elapsed().as_secs_f64()
    );
}

// ----- fixtures -------------------------------------------------------------

async fn skill_handler() -> Handler {
    let config = HandlersConfig::default();
    let runtime = Runtime::new(RuntimeLimits::from_config(&config), None, config.pooling).unwrap();
    let registry = HandlerRegistry::load(runtime, &config).await.unwrap();
    registry.get("skills").unwrap()
}

fn engine_on(store: Arc<dyn ObjectStore>) -> FolderEngine {
    engine_with(store, FoldersConfig::default())
}

fn engine_with(store: Arc<dyn ObjectStore>, config: FoldersConfig) -> FolderEngine {
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&LockConfig::default()));
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    FolderEngine::new(store, locks, events, config, BTreeMap::new())
}

/// The local filesystem backend, as the server opens it.
fn local_store(dir: &tempfile::TempDir) -> Arc<dyn ObjectStore> {
    dial_host::backends::open(&format!("file://{}", dir.path().display()), &Default::default()).unwrap()
}

fn node(path: &str) -> Node {
    let url = ResourceUrl::parse(&format!("skills/bucket1/{path}"), Intent::Write).unwrap();
    Node::new(url, BucketLocation::User("bench".into())).unwrap()
}

fn skill_md(name: &str) -> Bytes {
    Bytes::from(format!(
        "---\nname: {name}\ndescription: Benchmark fixture. Use when measuring the folder engine.\n---\n# {name}\n"
    ))
}

fn one_chunk(content: &Bytes) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    stream::iter([Ok(content.clone())])
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Decimal megabytes per second.
fn mb_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

// ----- 1. whole-resource PUT and GET ----------------------------------------

async fn put_and_get(handler: &Handler, backend: &str, store: Arc<dyn ObjectStore>) {
    // Counts the engine's store requests (one PUT's worth per iteration).
    let counting = Arc::new(InstrumentedStore::new(store.clone()));
    let engine = engine_on(counting.clone());
    let mut engine_requests = (0, 0, 0);
    let blobs: Vec<(String, Bytes)> = (0..BLOBS)
        .map(|i| (format!("assets/blob-{i:02}.bin"), Bytes::from(random_bytes(i as u64 + 1, BLOB_BYTES))))
        .collect();
    let files_of = |name: &str| {
        let mut files = vec![("SKILL.md".to_string(), skill_md(name))];
        files.extend(blobs.iter().cloned());
        files
    };
    let payload: u64 = files_of("put-0000").iter().map(|(_, c)| c.len() as u64).sum();
    let conditions = Preconditions::default();

    let (mut raw_put, mut engine_put, mut raw_get, mut engine_get) = (vec![], vec![], vec![], vec![]);
    let (mut raw_streamed, mut hashing) = (vec![], vec![]);
    let mut zip_bytes = 0u64;
    for iteration in 0..WARMUP + ITERATIONS {
        let name = format!("put-{iteration:04}");
        let files = files_of(&name);

        // Raw: 100 puts, then 100 gets, straight through object_store.
        let prefix = format!("raw/{name}");
        let start = Instant::now();
        for (path, content) in &files {
            store.put(&Path::from(format!("{prefix}/{path}")), PutPayload::from(content.clone())).await.unwrap();
        }
        let raw_put_time = start.elapsed();
        let start = Instant::now();
        let mut read = 0u64;
        for (path, _) in &files {
            read +=
                store.get(&Path::from(format!("{prefix}/{path}"))).await.unwrap().bytes().await.unwrap().len() as u64;
        }
        let raw_get_time = start.elapsed();
        assert_eq!(read, payload);

        // Diagnostics: the same reads drained as streams (how `stream_zip`
        // reads), and the MD5 `add_file` computes over every byte.
        let start = Instant::now();
        let mut read = 0u64;
        for (path, _) in &files {
            let mut chunks = store.get(&Path::from(format!("{prefix}/{path}"))).await.unwrap().into_stream();
            while let Some(chunk) = chunks.next().await {
                read += chunk.unwrap().len() as u64;
            }
        }
        let raw_streamed_time = start.elapsed();
        assert_eq!(read, payload);
        let start = Instant::now();
        for (_, content) in &files {
            black_box(Md5::digest(content));
        }
        let hashing_time = start.elapsed();

        // Engine: stage + 100 add_file + commit; then the marker and the whole ZIP.
        let target = node(&format!("bench/{name}"));
        counting.arm(usize::MAX);
        counting.take_reads();
        let start = Instant::now();
        let mut staging = engine.stage(&target, handler, &conditions).await.unwrap();
        for (path, content) in &files {
            staging.add_file(path, one_chunk(content)).await.unwrap();
        }
        engine.commit(staging, handler, &conditions, Some("bench".into())).await.unwrap();
        let engine_put_time = start.elapsed();
        let (reads, listings) = counting.take_reads();
        engine_requests = (counting.writes(), reads, listings);
        let start = Instant::now();
        let marker = engine.resource_for_read(&target).await.unwrap();
        let mut zip = stream_zip(engine.store().clone(), target.paths().clone(), marker, None);
        let mut streamed = 0u64;
        while let Some(chunk) = zip.next().await {
            streamed += chunk.unwrap().len() as u64;
        }
        let engine_get_time = start.elapsed();
        assert!(streamed > payload - 4096, "the ZIP holds every file (stored, not deflated): {streamed}");
        zip_bytes = streamed;

        if iteration >= WARMUP {
            raw_put.push(raw_put_time);
            engine_put.push(engine_put_time);
            raw_get.push(raw_get_time);
            engine_get.push(engine_get_time);
            raw_streamed.push(raw_streamed_time);
            hashing.push(hashing_time);
        }
    }

    println!("### 1. Whole-resource PUT / GET, 100 files ({}), {backend} — `{COMMAND}`", mib(payload));
    println!();
    println!("| operation | raw `object_store` (baseline) | engine | engine / raw | target |");
    println!("|---|---|---|---|---|");
    for (label, raw, through_engine) in [
        ("PUT: 100 `put`s vs stage + 100 `add_file` + commit", median(raw_put), median(engine_put)),
        ("GET: 100 `get().bytes()` vs `resource_for_read` + drain `stream_zip`", median(raw_get), median(engine_get)),
    ] {
        let (raw_rate, engine_rate) = (mb_per_s(payload, raw), mb_per_s(payload, through_engine));
        println!(
            "| {label} | {raw_rate:.0} MB/s ({}) | {engine_rate:.0} MB/s ({}) | {:.0} % | engine ≥ 80 % of raw |",
            ms(raw),
            ms(through_engine),
            engine_rate / raw_rate * 100.0
        );
    }
    println!();
    println!(
        "{payload} payload bytes (SKILL.md + {BLOBS} × {BLOB_BYTES} B random `.bin`); MB = 10^6 B of payload (the ZIP \
         is {zip_bytes} B); median of {ITERATIONS} iterations after {WARMUP} warm-up, raw and engine interleaved, \
         fresh names each time; one task; raw puts in sequence; the engine PUT includes the skill handler's (wasm) \
         check."
    );
    println!();
    println!("Where the engine's time goes (same run, same files):");
    println!();
    println!("| diagnostic | median | rate |");
    println!("|---|---|---|");
    for (label, time) in [
        (
            "raw: 100 `get()` drained through `into_stream()` (the local backend reads 8 KiB per blocking task)",
            median(raw_streamed),
        ),
        ("MD5 of the payload alone (`add_file` hashes every byte, on another thread than the writes)", median(hashing)),
    ] {
        println!("| {label} | {} | {:.0} MB/s |", ms(time), mb_per_s(payload, time));
    }
    let (writes, reads, listings) = engine_requests;
    println!(
        "| store requests of one engine PUT (raw: {} writes) | {writes} writes, {reads} reads, {listings} listings | – |",
        files_of("x").len()
    );
    println!();
}

// ----- 3. listing ------------------------------------------------------------

async fn listing(handler: &Handler, moto: Option<&services::Moto>) {
    let dir = tempfile::tempdir().unwrap();
    let local = Arc::new(InstrumentedStore::new(local_store(&dir)));
    let bare: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let memo_off: Arc<dyn ObjectStore> =
        Arc::new(SerializedUpdates::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap()));
    // As the server opens it: the directory memo lists an index in key order.
    listing_on(
        handler,
        "local disk (`file://`)",
        local,
        Arc::new(InstrumentedStore::new(bare)),
        Some(memo_off),
        None,
        true,
    )
    .await;
    if let Some(moto) = moto {
        moto.create_bucket("bench-listing");
        let (store, requests) = counted_s3(moto, "bench-listing");
        let counting = Arc::new(InstrumentedStore::new(store.clone()));
        let raw = Arc::new(InstrumentedStore::new(store));
        listing_on(handler, "S3 (moto on the same machine)", counting, raw, None, Some(requests), true).await;
    }
    v1_listing(moto).await;
}

/// Item 3 on one store: a folder of 1 000 skills made through the engine;
/// the raw listing of the index a page needs through bare `object_store`
/// (`raw`, the baseline), a warm page, a cold one, and one after another
/// instance changed 10 of the skills; on the local disk also a warm page
/// with the directory memo off (`memo_off`, the store without it).
async fn listing_on(
    handler: &Handler,
    backend: &str,
    counting: Arc<InstrumentedStore>,
    raw: Arc<InstrumentedStore>,
    memo_off: Option<Arc<dyn ObjectStore>>,
    http: Option<Arc<AtomicUsize>>,
    in_key_order: bool,
) {
    let instance = || Arc::new(engine_on(counting.clone()).with_listings(&ListingsConfig::default(), in_key_order));
    let (engine, other) = (instance(), instance());
    let conditions = Preconditions::default();
    let start = Instant::now();
    let created = stream::iter(0..FOLDER_SKILLS)
        .map(|i| {
            let (engine, conditions) = (&engine, &conditions);
            async move { commit_skill(engine, handler, conditions, &format!("bench/listing/skill-{i:04}"), "one").await }
        })
        .buffer_unordered(8)
        .count()
        .await;
    let populate = start.elapsed();
    assert_eq!(created, FOLDER_SKILLS);
    // A directory the local disk's memo keeps must have settled (2 s).
    tokio::time::sleep(Duration::from_millis(2500)).await;

    let folder = node("bench/listing/");
    let index = folder.paths().index(RESOURCE_INDEX);
    // What a store request is: each HTTP request to S3; on the local disk,
    // each read or listing call.
    let requests = || {
        let (reads, listings) = counting.take_reads();
        let (raw_reads, raw_listings) = raw.take_reads();
        let calls = reads + listings + raw_reads + raw_listings;
        let http = http.as_ref().map_or(calls, |http| http.swap(0, Ordering::SeqCst));
        (reads + raw_reads, http)
    };
    // The raw listing a page needs: the index from its start, as far as a
    // page takes it — the whole index where the store lists in no order.
    let raw_listing = || async {
        // Bare object_store: S3 lists in key order and a page stops early;
        // the local disk lists a directory in no order, so all of it.
        let taken = if http.is_some() {
            raw.list(Some(&index)).take(PAGE + 1).collect::<Vec<_>>().await.len()
        } else {
            raw.list_with_delimiter(Some(&index)).await.unwrap().objects.len()
        };
        assert!(taken > PAGE);
    };
    let memo_off = memo_off.map(|store| Arc::new(engine_on(store).with_listings(&ListingsConfig::default(), false)));
    let page = |engine: Arc<FolderEngine>| {
        let folder = folder.clone();
        async move {
            let page = engine.list(&folder, false, None, PAGE, &|_| true).await.unwrap();
            assert_eq!(page.items.len(), PAGE);
            assert!(page.next_token.is_some());
        }
    };

    requests();
    let start = Instant::now();
    page(engine.clone()).await;
    let cold = (start.elapsed(), requests());
    let (mut raw_times, mut page_times, mut memo_off_times) = (vec![], vec![], vec![]);
    let (mut raw_counts, mut page_counts) = ((0, 0), (0, 0));
    if let Some(memo_off) = &memo_off {
        page(memo_off.clone()).await;
    }
    for round in 0..LIST_ROUNDS + 1 {
        requests();
        let start = Instant::now();
        raw_listing().await;
        let raw_time = start.elapsed();
        raw_counts = requests();
        let start = Instant::now();
        page(engine.clone()).await;
        let page_time = start.elapsed();
        page_counts = requests();
        if let Some(memo_off) = &memo_off {
            let start = Instant::now();
            page(memo_off.clone()).await;
            memo_off_times.push(start.elapsed());
        }
        if round > 0 {
            raw_times.push(raw_time);
            page_times.push(page_time);
        }
    }
    let (raw, warm) = (median(raw_times), median(page_times));
    // Another instance changes 10 skills of the first page.
    for i in 0..10 {
        commit_skill(&other, handler, &conditions, &format!("bench/listing/skill-{i:04}"), "two").await;
    }
    requests();
    let start = Instant::now();
    page(engine.clone()).await;
    let changed = (start.elapsed(), requests());

    println!("### 3. A page of {PAGE} from a folder of {FOLDER_SKILLS} skills, {backend} — `{COMMAND} -- listing`");
    println!();
    println!("| case | median latency | marker reads per page | store requests per page |");
    println!("|---|---|---|---|");
    println!(
        "| raw listing of the index the page needs (baseline) | {} | {} | {} |",
        ms(raw),
        raw_counts.0,
        raw_counts.1
    );
    println!(
        "| warm page: `engine.list(folder, false, None, {PAGE})` | {} | {} | {} |",
        ms(warm),
        page_counts.0,
        page_counts.1
    );
    println!("| **warm page / raw listing** | **{:.2}×** | | |", warm.as_secs_f64() / raw.as_secs_f64());
    if !memo_off_times.is_empty() {
        let memo_off = median(memo_off_times);
        println!(
            "| warm page with the directory memo off (`SerializedUpdates` without it) | {} ({:.2}× raw) | 0 | 2 |",
            ms(memo_off),
            memo_off.as_secs_f64() / raw.as_secs_f64()
        );
    }
    println!("| cold page (cache empty, once) | {} | {} | {} |", ms(cold.0), cold.1.0, cold.1.1);
    println!(
        "| after another instance changed 10 of the page (once) | {} | {} | {} |",
        ms(changed.0),
        changed.1.0,
        changed.1.1
    );
    println!();
    println!(
        "Median of {LIST_ROUNDS} rounds after one warm-up, raw and engine interleaved; store requests counted {}; \
         the {FOLDER_SKILLS} skills were created through the engine in {:.1} s.",
        if http.is_some() { "as HTTP requests to S3 (a counting connector)" } else { "as read and listing calls" },
        populate.as_secs_f64()
    );
    println!();
}

async fn commit_skill(engine: &FolderEngine, handler: &Handler, conditions: &Preconditions, path: &str, body: &str) {
    let target = node(path);
    let name = target.url.name().unwrap().to_string();
    let mut staging = engine.stage(&target, handler, conditions).await.unwrap();
    staging.add_file("SKILL.md", one_chunk(&skill_md(&name))).await.unwrap();
    staging.add_file("body.txt", one_chunk(&Bytes::from(body.to_string()))).await.unwrap();
    engine.commit(staging, handler, conditions, Some("bench".into())).await.unwrap();
}

/// v1: a page of 100 from a folder of 1 000 files, versus the store's
/// delimiter listing of the folder (what DIAL Core answers from).
async fn v1_listing(moto: Option<&services::Moto>) {
    let dir = tempfile::tempdir().unwrap();
    let counting = Arc::new(InstrumentedStore::new(local_store(&dir)));
    // The baseline: the folder's delimiter listing through bare `object_store`.
    let bare = Arc::new(InstrumentedStore::new(Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap())));
    v1_listing_on("local disk (`file://`)", counting, bare, true).await;
    if let Some(moto) = moto {
        moto.create_bucket("bench-v1-listing");
        let (store, _) = counted_s3(moto, "bench-v1-listing");
        let counting = Arc::new(InstrumentedStore::new(store.clone()));
        v1_listing_on("S3 (moto on the same machine)", counting, Arc::new(InstrumentedStore::new(store)), false).await;
    }
}

async fn v1_listing_on(backend: &str, counting: Arc<InstrumentedStore>, raw: Arc<InstrumentedStore>, local: bool) {
    let locks: Arc<dyn LockService> = Arc::new(InProcessLocks::new(&LockConfig::default()));
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    let limits = BlobLimits { max_size: 1 << 20, max_file_size: 1 << 20 };
    let blobs = BlobService::new(counting.clone(), locks, events, limits, local);
    let file = |i: usize| {
        let url = ResourceUrl::parse(&format!("files/bucket1/docs/f{i:04}.txt"), Intent::Write).unwrap();
        BlobTarget::new(url, BucketLocation::User("bench".into())).unwrap()
    };
    stream::iter(0..FOLDER_SKILLS)
        .for_each_concurrent(8, |i| {
            let (blobs, target) = (&blobs, file(i));
            async move {
                let content = Bytes::from(format!("file {i}"));
                let body = one_chunk(&content);
                blobs.put_file(&target, body, Some("text/plain"), &Preconditions::default(), None, None).await.unwrap();
            }
        })
        .await;
    let folder_url = ResourceUrl::parse("files/bucket1/docs/", Intent::Read).unwrap();
    let folder = BlobTarget::new(folder_url, BucketLocation::User("bench".into())).unwrap();
    let page = || async {
        let page = blobs.list(&folder, false, None, PAGE, &|_| true).await.unwrap();
        assert_eq!(page.items.len(), PAGE);
    };
    tokio::time::sleep(Duration::from_millis(2500)).await;
    page().await;
    let (mut raw_times, mut page_times) = (vec![], vec![]);
    let (mut raw_counts, mut page_counts) = ((0, 0), (0, 0));
    for round in 0..LIST_ROUNDS + 1 {
        counting.take_reads();
        let start = Instant::now();
        let listed = raw.list_with_delimiter(Some(folder.path())).await.unwrap();
        let raw_time = start.elapsed();
        raw_counts = raw.take_reads();
        assert_eq!(listed.objects.len(), FOLDER_SKILLS);
        let start = Instant::now();
        page().await;
        let page_time = start.elapsed();
        page_counts = counting.take_reads();
        if round > 0 {
            raw_times.push(raw_time);
            page_times.push(page_time);
        }
    }
    let (raw, warm) = (median(raw_times), median(page_times));
    println!("### 3b. v1: a page of {PAGE} from a folder of {FOLDER_SKILLS} files, {backend} — `{COMMAND} -- listing`");
    println!();
    println!("| case | median latency | item reads per page | listings per page |");
    println!("|---|---|---|---|");
    println!(
        "| raw `list_with_delimiter` of the folder, bare `object_store` (baseline) | {} | {} | {} |",
        ms(raw),
        raw_counts.0,
        raw_counts.1
    );
    println!(
        "| warm page: `blobs.list(folder, false, None, {PAGE})` | {} | {} | {} |",
        ms(warm),
        page_counts.0,
        page_counts.1
    );
    println!("| **warm page / raw listing** | **{:.2}×** | | |", warm.as_secs_f64() / raw.as_secs_f64());
    println!();
}

/// Item 3c: a page of 100 from a folder of 100 000 skills on S3, versus
/// one of 1 000: store requests per page do not grow with the folder. The
/// markers are written straight into the index (copies of one real
/// marker): a listing reads nothing else.
async fn listing_100k(moto: &services::Moto) {
    const BIG: usize = 100_000;
    moto.create_bucket("bench-100k");
    let (store, http) = counted_s3(moto, "bench-100k");
    let engine = Arc::new(engine_on(store.clone()).with_listings(&ListingsConfig::default(), true));
    let handler = skill_handler().await;
    let conditions = Preconditions::default();
    commit_skill(&engine, &handler, &conditions, "template/skill", "one").await;
    let template = store.get(&node("template/skill").paths().resource_marker()).await.unwrap().bytes().await.unwrap();
    let start = Instant::now();
    for (size, name) in [(FOLDER_SKILLS, "small"), (BIG, "big")] {
        let index = node(&format!("{name}/")).paths().index(RESOURCE_INDEX);
        stream::iter(0..size)
            .for_each_concurrent(32, |i| {
                let (store, template, path) = (&store, template.clone(), index.clone().join(format!("skill-{i:06}")));
                async move { store.put(&path, PutPayload::from(template)).await.map(drop).unwrap() }
            })
            .await;
        // Folder markers, so the folders exist.
        store
            .put(&node(&format!("{name}/")).paths().folder_marker(), PutPayload::from(template.clone()))
            .await
            .unwrap();
    }
    let populate = start.elapsed();
    println!("### 3c. A page of {PAGE} from a folder of {BIG} skills on S3 (moto) — `{COMMAND} -- listing-100k`");
    println!();
    println!("| folder | page | median latency | store requests per page (warm) | objects in the folder's index |");
    println!("|---|---|---|---|---|");
    for (size, name) in [(FOLDER_SKILLS, "small"), (BIG, "big")] {
        let folder = node(&format!("{name}/"));
        for (label, token) in [("first", None), ("from the middle", Some(format!("skill-{:06}", size / 2)))] {
            let page = || async {
                let page = engine.list(&folder, false, token.as_deref(), PAGE, &|_| true).await.unwrap();
                assert_eq!(page.items.len(), PAGE);
            };
            page().await;
            let mut times = Vec::new();
            let mut count = 0;
            for _ in 0..LIST_ROUNDS {
                http.swap(0, Ordering::SeqCst);
                let start = Instant::now();
                page().await;
                times.push(start.elapsed());
                count = http.swap(0, Ordering::SeqCst);
            }
            println!("| {size} skills | {label} | {} | {count} | {size} |", ms(median(times)));
        }
    }
    println!();
    println!(
        "Requests counted as HTTP requests to S3 by a counting connector; median of {LIST_ROUNDS} pages after one; \
         index written in {:.0} s.",
        populate.as_secs_f64()
    );
    println!();
}

/// Item 3d: the process's RSS while listings fill the marker cache, with
/// `listings.cache_mib` = 16 and 64 versus 0 (the baseline, same run): 4 000
/// skills of 100 files each (a 7 KiB marker), every page listed twice.
async fn listing_rss() {
    const SKILLS: usize = 4000;
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(&dir);
    let handler = skill_handler().await;
    let conditions = Preconditions::default();
    let writer = engine_on(store.clone());
    let target = node("template/wide");
    let mut staging = writer.stage(&target, &handler, &conditions).await.unwrap();
    staging.add_file("SKILL.md", one_chunk(&skill_md("wide"))).await.unwrap();
    for i in 0..100 {
        staging.add_file(&format!("references/file-{i:03}.md"), one_chunk(&Bytes::from(format!("{i}")))).await.unwrap();
    }
    writer.commit(staging, &handler, &conditions, None).await.unwrap();
    let template = store.get(&target.paths().resource_marker()).await.unwrap().bytes().await.unwrap();
    let index = node("wide/").paths().index(RESOURCE_INDEX);
    stream::iter(0..SKILLS)
        .for_each_concurrent(16, |i| {
            let (store, template, path) = (&store, template.clone(), index.clone().join(format!("skill-{i:05}")));
            async move { store.put(&path, PutPayload::from(template)).await.map(drop).unwrap() }
        })
        .await;
    store.put(&node("wide/").paths().folder_marker(), PutPayload::from(template.clone())).await.unwrap();
    println!("### 3d. Memory of the marker cache — `{COMMAND} -- listing-rss`");
    println!();
    println!(
        "| `listings.cache_mib` | entries kept | cache's own estimate | RSS growth over the walk | peak RSS growth | \
         growth − growth with 0 |"
    );
    println!("|---|---|---|---|---|---|");
    let mut baseline = None;
    for bound in [0, 16, 64] {
        // Each bound in a process of its own: an allocator warmed by one
        // would hide what the next one holds.
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["listing-rss-walk", &dir.path().display().to_string(), &bound.to_string()])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let line = String::from_utf8(output.stdout).unwrap();
        let numbers: Vec<u64> = line.split_whitespace().filter_map(|n| n.parse().ok()).collect();
        let [entries, bytes, grown, peak] = numbers[..] else { panic!("the walk printed {line:?}") };
        let over = grown.saturating_sub(*baseline.get_or_insert(grown));
        println!("| {bound} | {entries} | {} | {} | {} | {} |", mib(bytes), mib(grown), mib(peak), mib(over));
    }
    println!();
    println!(
        "One marker (100 files) is {:.1} KiB of JSON; {SKILLS} of them in the folder ({} together). Each bound in \
         a fresh process on the local disk: RSS from /proc before and after walking every page (1 000 a page) \
         twice; the last column is the growth beyond the uncached walk's, i.e. what the cache holds.",
        template.len() as f64 / 1024.0,
        mib((template.len() * SKILLS) as u64)
    );
    println!();
}

/// The child of item 3d: walks every page of `wide/` twice with the marker
/// cache bounded at `bound` MiB; prints entries, the cache's estimate, RSS
/// growth and peak RSS growth, in bytes.
fn listing_rss_walk(dir: &str, bound: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let store = dial_host::backends::open(&format!("file://{dir}"), &Default::default()).unwrap();
        let listings = ListingsConfig { cache_mib: bound, ..ListingsConfig::default() };
        let engine = engine_on(store).with_listings(&listings, true);
        let pid = std::process::id();
        let (before, peak_before) = memory_of(pid);
        for _ in 0..2 {
            let mut token = None;
            loop {
                let page = engine.list(&node("wide/"), false, token.as_deref(), 1000, &|_| true).await.unwrap();
                token = page.next_token;
                if token.is_none() {
                    break;
                }
            }
        }
        let (entries, bytes) = engine.listing_cache_size();
        let (after, peak) = memory_of(pid);
        println!("{entries} {bytes} {} {}", after.saturating_sub(before), peak.saturating_sub(peak_before));
    });
}

/// An S3 store on moto whose HTTP requests are counted.
fn counted_s3(moto: &services::Moto, bucket: &str) -> (Arc<dyn ObjectStore>, Arc<AtomicUsize>) {
    let requests = Arc::new(AtomicUsize::new(0));
    let mut builder = AmazonS3Builder::new().with_bucket_name(bucket);
    for (key, value) in moto.storage_options() {
        builder = builder.with_config(key.parse().expect("an S3 option"), value);
    }
    let store = builder.with_http_connector(CountingConnector(requests.clone())).build().unwrap();
    (Arc::new(store), requests)
}

/// Counts every HTTP request the store sends.
#[derive(Debug)]
struct CountingConnector(Arc<AtomicUsize>);

#[derive(Debug)]
struct CountingService {
    inner: HttpClient,
    requests: Arc<AtomicUsize>,
}

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(CountingService { inner, requests: self.0.clone() }))
    }
}

#[async_trait::async_trait]
impl HttpService for CountingService {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.inner.execute(request).await
    }
}

// ----- 2. server RSS while downloading 1 GiB --------------------------------

/// The real binary, killed on drop (before its temp dir goes).
/// Samples VmRSS until stopped: (max, samples).
fn sample_rss(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, usize)> {
    std::thread::spawn(move || {
        let (mut max, mut samples) = (0, 0);
        while !stop.load(Ordering::SeqCst) {
            max = max.max(memory_of(pid).0);
            samples += 1;
            std::thread::sleep(RSS_SAMPLE_EVERY);
        }
        (max.max(memory_of(pid).0), samples + 1)
    })
}

/// SKILL.md and [`BIG_BLOBS`] files (names and sizes) filling exactly the
/// default 1 GiB per-resource limit, each under the 512 MiB per-file limit.
fn big_skill(name: &str) -> (Bytes, Vec<(String, u64)>) {
    let md = skill_md(name);
    let mut files = vec![("SKILL.md".to_string(), md.len() as u64)];
    let blob = (BIG_TOTAL - md.len() as u64) / BIG_BLOBS as u64;
    for i in 0..BIG_BLOBS {
        let size = if i + 1 == BIG_BLOBS { BIG_TOTAL - md.len() as u64 - blob * (BIG_BLOBS as u64 - 1) } else { blob };
        files.push((format!("assets/blob-{i}.bin"), size));
    }
    assert_eq!(files.iter().map(|(_, size)| size).sum::<u64>(), BIG_TOTAL);
    (md, files)
}

/// PUTs a multipart body generated on the fly, written by hand over HTTP/1.1
/// (the dev-dependency reqwest has no `stream` feature, so it cannot stream a
/// request body). Returns (status, response body).
async fn put_streamed(url: &str, path: &str, files: &[(String, u64)], skill_md: &Bytes) -> (u16, String) {
    const BOUNDARY: &str = "dial-host-bench-boundary-7f3a9c";
    let heads: Vec<String> = files
        .iter()
        .map(|(name, _)| {
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
                 Content-Type: application/octet-stream\r\n\r\n"
            )
        })
        .collect();
    let tail = format!("--{BOUNDARY}--\r\n");
    let length: u64 =
        heads.iter().zip(files).map(|(head, (_, size))| head.len() as u64 + size + 2).sum::<u64>() + tail.len() as u64;
    let address = url.strip_prefix("http://").unwrap();
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "PUT {path} HTTP/1.1\r\nHost: {address}\r\nApi-Key: {API_KEY}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    let pool = Bytes::from(random_bytes(42, 1 << 20));
    let sent: std::io::Result<()> = async {
        socket.write_all(request.as_bytes()).await?;
        for (head, (name, size)) in heads.iter().zip(files) {
            socket.write_all(head.as_bytes()).await?;
            if name == "SKILL.md" {
                socket.write_all(skill_md).await?;
            } else {
                let mut left = *size;
                while left > 0 {
                    let n = left.min(pool.len() as u64) as usize;
                    socket.write_all(&pool[..n]).await?;
                    left -= n as u64;
                }
            }
            socket.write_all(b"\r\n").await?;
        }
        socket.write_all(tail.as_bytes()).await?;
        socket.flush().await
    }
    .await;
    let mut response = Vec::new();
    let read = socket.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    if let (Err(error), true) = (&sent, response.is_empty()) {
        panic!("upload failed: {error} ({read:?})");
    }
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default();
    (status, body)
}

async fn big_download() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "");
    let pid = server.pid();
    let client = reqwest::Client::new();
    let bucket = server.bucket(&client).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (idle_rss, _) = memory_of(pid);

    let name = "big-skill";
    let (md, files) = big_skill(name);
    let blob = files[1].1;
    let payload: u64 = files.iter().map(|(_, size)| size).sum();
    let path = format!("/v2/skills/{bucket}/{name}");
    let start = Instant::now();
    let (status, body) = put_streamed(&server.url, &path, &files, &md).await;
    let upload_time = start.elapsed();
    if status != 200 {
        server.fail(&format!("upload answered {status}: {body}"));
    }

    tokio::time::sleep(Duration::from_millis(500)).await;
    let (before_get, _) = memory_of(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_rss(pid, stop.clone());
    let start = Instant::now();
    let mut response = client.get(format!("{}{path}", server.url)).header("Api-Key", API_KEY).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut downloaded = 0u64;
    while let Some(chunk) = response.chunk().await.unwrap() {
        downloaded += chunk.len() as u64;
    }
    let download_time = start.elapsed();
    stop.store(true, Ordering::SeqCst);
    let (peak, samples) = sampler.join().unwrap();
    let (_, hwm) = memory_of(pid);
    assert!(downloaded > payload, "the ZIP holds every byte plus headers: {downloaded} of {payload}");
    assert!(downloaded > 1 << 30, "the ZIP of a 1 GiB skill is over 1 GiB: {downloaded}");
    drop(server);

    println!("### 2. Server RSS while downloading a 1 GiB skill (`GET /v2/skills/…` → ZIP) — `{COMMAND}`");
    println!();
    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!("| idle server RSS before the upload (baseline) | {} | – |", mib(idle_rss));
    println!("| RSS just before the GET | {} | – |", mib(before_get));
    println!(
        "| **peak RSS during the GET** (max of {samples} samples, every {} ms) | **{}** | < 100 MiB |",
        RSS_SAMPLE_EVERY.as_millis(),
        mib(peak)
    );
    println!("| peak during the GET / idle | {:.2}× | – |", peak as f64 / idle_rss as f64);
    println!("| VmHWM at the end (includes the upload) | {} | – |", mib(hwm));
    println!(
        "| download: {downloaded} B of ZIP in {:.2} s | {:.0} MB/s | – |",
        download_time.as_secs_f64(),
        mb_per_s(downloaded, download_time)
    );
    println!(
        "| upload (streamed multipart, {payload} B) in {:.2} s | {:.0} MB/s | – |",
        upload_time.as_secs_f64(),
        mb_per_s(payload, upload_time)
    );
    println!();
    println!(
        "Release binary, local filesystem store in a temp dir; SKILL.md + {BIG_BLOBS} random `.bin` files \
         ({} each) — exactly the default 1 GiB per-resource limit, so the ZIP (stored) is just over 1 GiB. \
         Client and server on the same machine; MB = 10^6 B.",
        mib(blob)
    );
    println!();
}

// ----- 4. keep-alive GETs of a small skill's ZIP ----------------------------

/// Times `KEEP_ALIVE_GETS` sequential GETs of `url` after a warm-up: sorted.
async fn time_gets(client: &reqwest::Client, url: &str) -> Vec<Duration> {
    let mut times = Vec::with_capacity(KEEP_ALIVE_GETS);
    for round in 0..KEEP_ALIVE_WARMUP + KEEP_ALIVE_GETS {
        let start = Instant::now();
        let response = client.get(url).header("Api-Key", API_KEY).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert!(response.headers().get("connection").is_none_or(|value| value != "close"), "kept alive");
        black_box(response.bytes().await.unwrap());
        if round >= KEEP_ALIVE_WARMUP {
            times.push(start.elapsed());
        }
    }
    times.sort();
    times
}

async fn keep_alive_gets() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path(), "");
    // reqwest keeps the connection: every GET after the first reuses it.
    let client = reqwest::Client::new();
    let bucket = server.bucket(&client).await;
    let url = format!("{}/v2/skills/{bucket}/small", server.url);
    let files: [(&str, Vec<u8>); 3] = [
        ("SKILL.md", skill_md("small").to_vec()),
        ("scripts/run.py", b"import sys\nprint(sys.argv)\n".repeat(40)),
        ("assets/icon.png", random_bytes(7, 2048)),
    ];
    let mut form = reqwest::multipart::Form::new();
    for (name, content) in &files {
        form = form.part("file", reqwest::multipart::Part::bytes(content.clone()).file_name(name.to_string()));
    }
    let put = client.put(&url).header("Api-Key", API_KEY).multipart(form).send().await.unwrap();
    if put.status() != 200 {
        server.fail(&format!("upload answered {}", put.status()));
    }
    let zip_bytes = client.get(&url).header("Api-Key", API_KEY).send().await.unwrap().bytes().await.unwrap().len();

    let keep_alive = time_gets(&client, &url).await;
    let health = time_gets(&client, &format!("{}/health", server.url)).await;
    let fresh_client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let fresh = time_gets(&fresh_client, &url).await;
    drop(server);

    println!("### 4. {KEEP_ALIVE_GETS} sequential GETs of a small skill's ZIP — `{COMMAND} -- keep-alive`");
    println!();
    println!("| case | p50 | p99 | target |");
    println!("|---|---|---|---|");
    for (label, times, target) in [
        ("**ZIP, one keep-alive connection**", &keep_alive, "p50 ≤ 2 ms"),
        ("ZIP, a fresh connection per GET (baseline)", &fresh, "–"),
        ("`GET /health`, one keep-alive connection (baseline: HTTP alone)", &health, "–"),
    ] {
        println!("| {label} | {} | {} | {target} |", ms(percentile(times, 0.5)), ms(percentile(times, 0.99)));
    }
    println!();
    println!(
        "Release binary, local filesystem store; the skill: SKILL.md, a 1 KiB script (deflated) and a 2 KiB \
         PNG (stored), a {zip_bytes}-byte ZIP; reqwest client on the same machine, one request at a time, \
         {KEEP_ALIVE_WARMUP} warm-up GETs before the {KEEP_ALIVE_GETS} timed ones of each case."
    );
    println!();
}

// ----- 5. a 1 GiB upload to S3 ------------------------------------------------

async fn big_upload_to_s3() {
    let moto = services::moto().expect("moto for the S3 upload: run scripts/test once to install it");
    moto.create_bucket("big");
    let options: String = moto.storage_options().iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();

    // Baseline: the same bytes through object_store's buffered multipart
    // writer (8 MiB parts), one file after the other.
    let store = dial_host::backends::open("s3://big", &moto.storage_options()).unwrap();
    let pool = Bytes::from(random_bytes(42, 1 << 20));
    let blob = BIG_TOTAL / BIG_BLOBS as u64;
    let start = Instant::now();
    for i in 0..BIG_BLOBS {
        let mut writer = object_store::buffered::BufWriter::with_capacity(
            store.clone(),
            Path::from(format!("raw/blob-{i}")),
            8 << 20,
        );
        let mut left = blob;
        while left > 0 {
            let n = left.min(pool.len() as u64) as usize;
            writer.put(pool.slice(..n)).await.unwrap();
            left -= n as u64;
        }
        writer.shutdown().await.unwrap();
    }
    let raw_time = start.elapsed();

    let dir = tempfile::tempdir().unwrap();
    let server =
        ServerProcess::start(dir.path(), &format!("[storage]\nurl = \"s3://big\"\n[storage.options]\n{options}"));
    let pid = server.pid();
    let client = reqwest::Client::new();
    let bucket = server.bucket(&client).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (idle_rss, _) = memory_of(pid);
    let name = "big-skill";
    let (md, files) = big_skill(name);
    let payload: u64 = files.iter().map(|(_, size)| size).sum();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_rss(pid, stop.clone());
    let start = Instant::now();
    let (status, body) = put_streamed(&server.url, &format!("/v2/skills/{bucket}/{name}"), &files, &md).await;
    let upload_time = start.elapsed();
    stop.store(true, Ordering::SeqCst);
    let (peak, samples) = sampler.join().unwrap();
    if status != 200 {
        server.fail(&format!("upload answered {status}: {body}"));
    }
    drop(server);

    println!("### 5. A 1 GiB skill uploaded to S3 (moto) through the server — `{COMMAND} -- upload-s3`");
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| raw: {BIG_BLOBS} × {} through `BufWriter` (8 MiB multipart parts), baseline | {:.2} s, {:.0} MB/s |",
        mib(blob),
        raw_time.as_secs_f64(),
        mb_per_s(BIG_BLOBS as u64 * blob, raw_time)
    );
    println!(
        "| server: streamed multipart PUT of {payload} B | {:.2} s, {:.0} MB/s ({:.0} % of raw) |",
        upload_time.as_secs_f64(),
        mb_per_s(payload, upload_time),
        mb_per_s(payload, upload_time) / mb_per_s(BIG_BLOBS as u64 * blob, raw_time) * 100.0
    );
    println!("| server RSS idle before the upload | {} |", mib(idle_rss));
    println!(
        "| **server peak RSS during the upload** (max of {samples} samples, every {} ms) | **{}** |",
        RSS_SAMPLE_EVERY.as_millis(),
        mib(peak)
    );
    println!();
}

// ----- 6. version history ----------------------------------------------------

/// Item 6: timed commits per kind and policy, after enough to fill a
/// ten-version history.
const HISTORY_COMMITS: usize = 61;

/// One retention policy under measurement.
struct Policy {
    keep: u32,
    counting: Arc<InstrumentedStore>,
    engine: FolderEngine,
    target: Node,
    whole: Vec<Duration>,
    single: Vec<Duration>,
    whole_requests: (usize, usize, usize),
    single_requests: (usize, usize, usize),
}

impl Policy {
    fn new(store: &Arc<dyn ObjectStore>, keep: u32) -> Self {
        let counting = Arc::new(InstrumentedStore::new(store.clone()));
        let engine = engine_with(counting.clone(), FoldersConfig { keep_versions: keep, ..FoldersConfig::default() });
        let target = node(&format!("history/keep-{keep}"));
        let none = (0, 0, 0);
        Self {
            keep,
            counting,
            engine,
            target,
            whole: vec![],
            single: vec![],
            whole_requests: none,
            single_requests: none,
        }
    }

    async fn whole_put(&self, handler: &Handler, n: usize, notes: &Bytes) -> Duration {
        let conditions = Preconditions::default();
        let start = Instant::now();
        let mut staging = self.engine.stage(&self.target, handler, &conditions).await.unwrap();
        staging.add_file("SKILL.md", one_chunk(&skill_md(&format!("s{n}")))).await.unwrap();
        staging.add_file("notes.bin", one_chunk(notes)).await.unwrap();
        self.engine.commit(staging, handler, &conditions, Some("bench".into())).await.unwrap();
        start.elapsed()
    }

    async fn single_put(&self, handler: &Handler, n: usize) -> Duration {
        let content = Bytes::from(format!("edit {n}"));
        let start = Instant::now();
        self.engine
            .put_file(
                &self.target,
                "notes/edit.md",
                one_chunk(&content),
                handler,
                &Preconditions::default(),
                None,
                None,
            )
            .await
            .unwrap();
        start.elapsed()
    }

    /// Starts counting store requests.
    fn count(&self) {
        self.counting.arm(usize::MAX);
        self.counting.take_reads();
    }

    /// The requests since [`Policy::count`], once the commit's background
    /// delete of its staging entry has landed.
    async fn counted(&self) -> (usize, usize, usize) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (reads, listings) = self.counting.take_reads();
        (self.counting.writes(), reads, listings)
    }
}

async fn history(handler: &Handler, store: Arc<dyn ObjectStore>) {
    let notes = Bytes::from(random_bytes(6, 1024));
    let mut policies = [Policy::new(&store, 1), Policy::new(&store, 10)];
    for policy in &policies {
        for n in 0..12 {
            policy.whole_put(handler, n, &notes).await;
        }
    }
    // The two policies take turns, so drift in the emulator's speed falls on both.
    for n in 0..HISTORY_COMMITS {
        for policy in &mut policies {
            policy.count();
            let time = policy.whole_put(handler, 100 + n, &notes).await;
            policy.whole.push(time);
            policy.whole_requests = policy.counted().await;
            policy.count();
            let time = policy.single_put(handler, n).await;
            policy.single.push(time);
            policy.single_requests = policy.counted().await;
        }
    }

    println!("### 6. Version history: a commit keeping ten versions vs keeping one (S3, moto)");
    println!();
    println!("{HISTORY_COMMITS} timed commits of each kind per policy on one skill (SKILL.md + a 1 KiB file) after 12");
    println!("untimed ones, the two policies taking turns; store requests of the last commit of each kind,");
    println!("counted 50 ms after it returned (so the background delete of its staging entry is among them).");
    println!();
    println!(
        "| keep_versions | whole PUT, median | single-file PUT, median | requests of a whole PUT | requests of a single-file PUT | marker size |"
    );
    println!("|---|---|---|---|---|---|");
    let requests = |(w, r, l): (usize, usize, usize)| format!("{w} writes, {r} reads, {l} listings");
    let mut medians = Vec::new();
    for policy in &policies {
        let marker = store.head(&policy.target.paths().resource_marker()).await.unwrap().size;
        let (whole, single) = (median(policy.whole.clone()), median(policy.single.clone()));
        println!(
            "| {} | {} | {} | {} | {} | {marker} B |",
            policy.keep,
            ms(whole),
            ms(single),
            requests(policy.whole_requests),
            requests(policy.single_requests)
        );
        medians.push((whole, single));
    }
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!();
    println!(
        "keeping ten versions vs one: whole PUT **{:.2}×**, single-file PUT **{:.2}×**",
        ratio(medians[1].0, medians[0].0),
        ratio(medians[1].1, medians[0].1)
    );
    println!();
}

/// Item 7: what the folded-name check adds per upload of 1 000 files (four
/// levels deep), against the checks each file already met, in one run.
fn names() {
    use dial_host::folders::names::{FoldedNames, check_file_path, check_no_file_folder_clash};
    const FILES: usize = 1000;
    const ROUNDS: usize = 31;
    let paths: Vec<String> = (0..FILES).map(|n| format!("scripts/lib{}/module_{n}/file-{n}.py", n % 10)).collect();
    let (mut baseline, mut folded) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut seen: Vec<String> = Vec::with_capacity(FILES);
        for path in &paths {
            check_file_path(path).unwrap();
            check_no_file_folder_clash(&seen, path).unwrap();
            seen.push(path.clone());
        }
        baseline.push(start.elapsed());
        let start = Instant::now();
        let mut names = FoldedNames::default();
        for path in &paths {
            names.add(path).unwrap();
        }
        folded.push(start.elapsed());
    }
    let (baseline, folded) = (median(baseline), median(folded));
    println!("### Names of a {FILES}-file upload (median of {ROUNDS})");
    println!();
    println!("| check | median | vs baseline |");
    println!("|---|---|---|");
    println!("| path rules + file/folder clashes (baseline) | {} | 1.00x |", ms(baseline));
    println!(
        "| folded names (NFD, case folding, NFC per path and folder) | {} | {:.2}x |",
        ms(folded),
        folded.as_secs_f64() / baseline.as_secs_f64()
    );
    println!();
}
