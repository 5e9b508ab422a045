//! [`MeteredStore`]: the object store as the host uses it, with every
//! operation counted by name and outcome and timed (reads to their first
//! byte: the body streams afterwards).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;

use bytes::Bytes;
use dial_handler_runtime::TRACE_SPANS;
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

/// Counts and times one operation.
fn record<T>(operation: &'static str, started: Instant, result: object_store::Result<T>) -> object_store::Result<T> {
    counter!(STORE_OPERATIONS, "operation" => operation, "outcome" => outcome(&result)).increment(1);
    histogram!(STORE_DURATION, "operation" => operation).record(started.elapsed().as_secs_f64());
    result
}

/// One operation (also the folder engine's paged listings, which go to the
/// store's client beside this wrapper): counted, timed, and traced as a
/// child of the request's span. The span names no path: like the metrics and the access log,
/// traces never carry a resource's name.
pub(crate) async fn measured<T>(
    operation: &'static str,
    call: impl Future<Output = object_store::Result<T>>,
) -> object_store::Result<T> {
    let span = span(operation);
    let started = Instant::now();
    let result = call.instrument(span.clone()).await;
    span.record("store.outcome", outcome(&result));
    record(operation, started, result)
}

fn span(operation: &'static str) -> tracing::Span {
    tracing::info_span!(
        target: TRACE_SPANS,
        "store",
        otel.name = %format!("store {operation}"),
        otel.kind = "client",
        store.operation = operation,
        store.outcome = tracing::field::Empty,
    )
}

/// A listing: one operation, counted when it starts.
fn started_stream<T: Send + 'static>(operation: &'static str, stream: BoxStream<'static, T>) -> BoxStream<'static, T> {
    counter!(STORE_OPERATIONS, "operation" => operation, "outcome" => "started").increment(1);
    traced_stream(operation, stream)
}

/// A stream traced as one span, from its start for as long as it is read.
fn traced_stream<T: Send + 'static>(operation: &'static str, stream: BoxStream<'static, T>) -> BoxStream<'static, T> {
    let span = span(operation);
    if span.is_disabled() {
        return stream;
    }
    stream.map(move |item| span.in_scope(|| item)).boxed()
}

#[async_trait::async_trait]
impl ObjectStore for MeteredStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        measured("put", self.inner.put_opts(location, payload, opts)).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        measured("put_multipart", self.inner.put_multipart_opts(location, opts)).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let operation = if options.head { "head" } else { "get" };
        measured(operation, self.inner.get_opts(location, options)).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        measured("get_ranges", self.inner.get_ranges(location, ranges)).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let deletes = self.inner.delete_stream(locations).map(|deleted| {
            counter!(STORE_OPERATIONS, "operation" => "delete", "outcome" => outcome(&deleted)).increment(1);
            deleted
        });
        traced_stream("delete", deletes.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        started_stream("list", self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        started_stream("list", self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        measured("list_with_delimiter", self.inner.list_with_delimiter(prefix)).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        measured("copy", self.inner.copy_opts(from, to, options)).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> object_store::Result<()> {
        measured("rename", self.inner.rename_opts(from, to, options)).await
    }
}
