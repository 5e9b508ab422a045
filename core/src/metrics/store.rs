//! [`MeteredStore`]: the object store as the host uses it, with every
//! operation counted by name and outcome and timed (reads to their first
//! byte: the body streams afterwards).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use metrics::{counter, histogram};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, RenameOptions,
};

use super::{STORE_DURATION, STORE_OPERATIONS};

#[derive(Debug)]
pub struct MeteredStore {
    inner: Arc<dyn ObjectStore>,
}

impl MeteredStore {
    pub fn wrap(inner: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(Self { inner })
    }
}

impl fmt::Display for MeteredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Metered({})", self.inner)
    }
}

/// The outcome label of a result: the errors the host acts on by name.
fn outcome<T>(result: &object_store::Result<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(object_store::Error::NotFound { .. }) => "not_found",
        Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => "precondition",
        Err(object_store::Error::NotModified { .. }) => "not_modified",
        Err(_) => "error",
    }
}

/// Counts and times one operation (also the folder engine's paged listings,
/// which go to the store's client beside this wrapper).
pub(crate) fn record<T>(
    operation: &'static str,
    started: Instant,
    result: object_store::Result<T>,
) -> object_store::Result<T> {
    counter!(STORE_OPERATIONS, "operation" => operation, "outcome" => outcome(&result)).increment(1);
    histogram!(STORE_DURATION, "operation" => operation).record(started.elapsed().as_secs_f64());
    result
}

/// A listing or delete stream: one operation, counted when it starts.
fn started_stream(operation: &'static str) {
    counter!(STORE_OPERATIONS, "operation" => operation, "outcome" => "started").increment(1);
}

#[async_trait::async_trait]
impl ObjectStore for MeteredStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let started = Instant::now();
        record("put", started, self.inner.put_opts(location, payload, opts).await)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let started = Instant::now();
        record("put_multipart", started, self.inner.put_multipart_opts(location, opts).await)
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let operation = if options.head { "head" } else { "get" };
        let started = Instant::now();
        record(operation, started, self.inner.get_opts(location, options).await)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        let started = Instant::now();
        record("get_ranges", started, self.inner.get_ranges(location, ranges).await)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner
            .delete_stream(locations)
            .map(|deleted| {
                counter!(STORE_OPERATIONS, "operation" => "delete", "outcome" => outcome(&deleted)).increment(1);
                deleted
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        started_stream("list");
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        started_stream("list");
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let started = Instant::now();
        record("list_with_delimiter", started, self.inner.list_with_delimiter(prefix).await)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        let started = Instant::now();
        record("copy", started, self.inner.copy_opts(from, to, options).await)
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> object_store::Result<()> {
        let started = Instant::now();
        record("rename", started, self.inner.rename_opts(from, to, options).await)
    }
}
