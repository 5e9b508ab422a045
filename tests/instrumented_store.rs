//! An `ObjectStore` wrapper for tests and benchmarks: counts reads, listings
//! and writes, can fail the Nth write as a crash at that point would, and can
//! hold writes to some paths until the test lets them go (to act at an exact
//! point of an operation: expire a lease, run a sweep).
//!
//! Include it with `#[path = "../../tests/instrumented_store.rs"] mod instrumented_store;`.

#![allow(dead_code)] // each user needs a different part

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, RenameOptions,
};

#[derive(Debug)]
pub struct InstrumentedStore {
    inner: Arc<dyn ObjectStore>,
    reads: AtomicUsize,
    listings: AtomicUsize,
    /// Objects the flat listings (`list`, `list_with_offset`) yielded: what a
    /// caller pulled, not what the store would have had to list.
    listed_objects: Arc<AtomicUsize>,
    writes: AtomicUsize,
    fail_at: AtomicUsize,
    gate: Mutex<Option<Gate>>,
}

/// Writes (and deletes) of paths ending in `suffix` wait for a permit;
/// `arrived` is notified as each reaches the gate, `waiting` counts those
/// held now.
#[derive(Debug, Clone)]
pub struct Gate {
    suffix: String,
    permits: Arc<tokio::sync::Semaphore>,
    pub arrived: Arc<tokio::sync::Notify>,
    pub waiting: Arc<AtomicUsize>,
}

impl Gate {
    /// Lets one held write (or the next one) through.
    pub fn release_one(&self) {
        self.permits.add_permits(1);
    }

    /// Lets every held write and all later ones through.
    pub fn open(&self) {
        self.permits.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }
}

impl InstrumentedStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            reads: AtomicUsize::new(0),
            listings: AtomicUsize::new(0),
            listed_objects: Arc::new(AtomicUsize::new(0)),
            writes: AtomicUsize::new(0),
            fail_at: AtomicUsize::new(usize::MAX),
            gate: Mutex::new(None),
        }
    }

    /// From now on, writes to paths ending in `suffix` wait until the
    /// returned gate lets them go.
    pub fn hold_writes_to(&self, suffix: &str) -> Gate {
        let gate = Gate {
            suffix: suffix.to_string(),
            permits: Arc::new(tokio::sync::Semaphore::new(0)),
            arrived: Arc::new(tokio::sync::Notify::new()),
            waiting: Arc::new(AtomicUsize::new(0)),
        };
        *self.gate.lock().unwrap() = Some(gate.clone());
        gate
    }

    async fn pass_gate(&self, location: &Path) {
        let gate = self.gate.lock().unwrap().clone();
        pass(gate, location).await;
    }

    /// Fails the `fail_at`-th write from now on (1-based), and every later one.
    pub fn arm(&self, fail_at: usize) {
        self.writes.store(0, Ordering::SeqCst);
        self.fail_at.store(fail_at, Ordering::SeqCst);
    }

    pub fn disarm(&self) {
        self.fail_at.store(usize::MAX, Ordering::SeqCst);
    }

    /// Writes since the last `arm`.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    /// (reads, listings) since the last call.
    pub fn take_reads(&self) -> (usize, usize) {
        (self.reads.swap(0, Ordering::SeqCst), self.listings.swap(0, Ordering::SeqCst))
    }

    /// Objects flat listings yielded since the last call.
    pub fn take_listed_objects(&self) -> usize {
        self.listed_objects.swap(0, Ordering::SeqCst)
    }

    fn counted(
        &self,
        listed: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let counter = self.listed_objects.clone();
        listed.inspect(move |_| _ = counter.fetch_add(1, Ordering::SeqCst)).boxed()
    }

    fn write(&self) -> object_store::Result<()> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.fail_at.load(Ordering::SeqCst) {
            let source = format!("injected failure at write {n}").into();
            return Err(object_store::Error::Generic { store: "instrumented", source });
        }
        Ok(())
    }

    fn read(&self) {
        self.reads.fetch_add(1, Ordering::SeqCst);
    }

    fn listing(&self) {
        self.listings.fetch_add(1, Ordering::SeqCst);
    }
}

async fn pass(gate: Option<Gate>, location: &Path) {
    if let Some(gate) = gate.filter(|g| location.as_ref().ends_with(&g.suffix)) {
        gate.waiting.fetch_add(1, Ordering::SeqCst);
        gate.arrived.notify_one();
        gate.permits.acquire().await.expect("gate open").forget();
        gate.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl fmt::Display for InstrumentedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InstrumentedStore({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for InstrumentedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.pass_gate(location).await;
        self.write()?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.write()?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.read();
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        self.read();
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        if let Err(error) = self.write() {
            return stream::once(async move { Err(error) }).boxed();
        }
        let gate = self.gate.lock().unwrap().clone();
        let gated = locations
            .then(move |location| {
                let gate = gate.clone();
                async move {
                    if let Ok(path) = &location {
                        pass(gate, path).await;
                    }
                    location
                }
            })
            .boxed();
        self.inner.delete_stream(gated)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.listing();
        self.counted(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.listing();
        self.counted(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.listing();
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.write()?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> object_store::Result<()> {
        self.write()?;
        self.inner.rename_opts(from, to, options).await
    }
}
