//! An `ObjectStore` wrapper for tests and benchmarks: counts reads, listings
//! and writes, and can fail the Nth write as a crash at that point would.
//!
//! Include it with `#[path = "../../tests/instrumented_store.rs"] mod instrumented_store;`.

#![allow(dead_code)] // each user needs a different part

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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
    writes: AtomicUsize,
    fail_at: AtomicUsize,
}

impl InstrumentedStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            reads: AtomicUsize::new(0),
            listings: AtomicUsize::new(0),
            writes: AtomicUsize::new(0),
            fail_at: AtomicUsize::new(usize::MAX),
        }
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
        match self.write() {
            Ok(()) => self.inner.delete_stream(locations),
            Err(error) => stream::once(async move { Err(error) }).boxed(),
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.listing();
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.listing();
        self.inner.list_with_offset(prefix, offset)
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
