//! Prometheus metrics (SPEC §10), through the `metrics` facade and
//! `metrics-exporter-prometheus`: one recorder per process, rendered by
//! `GET /metrics`.
//!
//! Every metric is named here with its labels. Labels take bounded values
//! only — route templates, methods, statuses, handler labels, operation
//! names, outcomes — never a URL, a bucket id or a path, which would grow a
//! series per resource.
//!
//! - The HTTP layer counting requests, latency and bytes per route template is the binary's
//!   (`dial_host::http::metrics`); its metrics are named here with the others.
//! - [`store`]: [`store::MeteredStore`], the object store wrapper timing each operation.
//! - Lock waits, the sweep and per-request keys record at their one place
//!   in `locks.rs`, `folders/sweep.rs` and `keys.rs`, through the functions
//!   below; handler calls through `handlers::metrics`, which names its own.

pub mod store;

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub const HTTP_REQUESTS: &str = "dial_host_http_requests_total";
pub const HTTP_DURATION: &str = "dial_host_http_request_duration_seconds";
pub const HTTP_BYTES_IN: &str = "dial_host_http_request_bytes_total";
pub const HTTP_BYTES_OUT: &str = "dial_host_http_response_bytes_total";
pub const STORE_OPERATIONS: &str = "dial_host_store_operations_total";
pub const STORE_DURATION: &str = "dial_host_store_operation_duration_seconds";
pub const LOCK_WAIT: &str = "dial_host_lock_wait_seconds";
pub const LOCK_FAILURES: &str = "dial_host_lock_failures_total";
pub const GC_SWEEPS: &str = "dial_host_gc_sweeps_total";
pub const GC_OBJECTS: &str = "dial_host_gc_objects_deleted_total";
pub const GC_BYTES: &str = "dial_host_gc_bytes_deleted_total";
pub const GC_ENTRIES_FAILED: &str = "dial_host_gc_entries_failed_total";
pub const KEYS_MINTED: &str = "dial_host_per_request_keys_minted_total";
pub const KEYS_ALIVE: &str = "dial_host_per_request_keys_alive";
pub const DEFINITION_CACHE_BYTES: &str = "dial_host_definition_cache_bytes";
pub const UPSTREAM_CALLS: &str = "dial_host_upstream_calls_total";
pub const UPSTREAM_DURATION: &str = "dial_host_upstream_call_duration_seconds";
pub const QUOTA_LIMIT: &str = "dial_host_type_quota_limit";
pub const QUOTA_REFUSALS: &str = "dial_host_type_quota_refusals_total";

/// Histogram buckets for every `…_seconds` metric: 100 µs to 60 s.
const SECONDS_BUCKETS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0];

/// How often histogram samples are folded into their buckets when nobody
/// scrapes (they are buffered until then).
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's recorder, installed on first use. Where another recorder
/// was installed first (a program embedding the host), ours renders nothing.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
            .expect("the bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_ok() {
            describe();
        }
        handle
    })
}

/// Installs the recorder and keeps its buffers bounded between scrapes.
/// Call from within the runtime.
pub fn start() {
    let handle = handle();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            ticker.tick().await;
            handle.run_upkeep();
        }
    });
}

/// The Prometheus text exposition of every metric.
pub fn render() -> String {
    handle().render()
}

fn describe() {
    crate::handlers::metrics::describe();
    describe_counter!(HTTP_REQUESTS, "Requests answered, by route template, method and status");
    describe_histogram!(HTTP_DURATION, Unit::Seconds, "Time to the response head, by route template and method");
    describe_counter!(HTTP_BYTES_IN, Unit::Bytes, "Request body bytes read, by route template");
    describe_counter!(HTTP_BYTES_OUT, Unit::Bytes, "Response body bytes sent, by route template");
    describe_counter!(STORE_OPERATIONS, "Object-store operations, by operation and outcome");
    describe_histogram!(STORE_DURATION, Unit::Seconds, "Object-store operation time (to the first byte for reads)");
    describe_histogram!(LOCK_WAIT, Unit::Seconds, "Time waited for a resource lock that was acquired, by backend");
    describe_counter!(LOCK_FAILURES, "Locks not acquired or lost, by backend and reason (timeout, unavailable, lost)");
    describe_counter!(GC_SWEEPS, "Sweeps run, by outcome");
    describe_counter!(GC_OBJECTS, "Objects the sweep deleted");
    describe_counter!(GC_BYTES, Unit::Bytes, "Bytes the sweep deleted");
    describe_counter!(GC_ENTRIES_FAILED, "Journal entries a sweep could not settle (kept for the next one)");
    describe_counter!(KEYS_MINTED, "Per-request keys minted by this instance");
    describe_gauge!(KEYS_ALIVE, "Per-request keys minted by this instance and not yet revoked");
    describe_gauge!(
        DEFINITION_CACHE_BYTES,
        Unit::Bytes,
        "What the parsed stored application definitions hold, estimated (bounded by proxy.definition_cache_mib)"
    );
    describe_gauge!(
        QUOTA_LIMIT,
        "Each type's per-bucket quota, by group and quota (max_resources, max_bytes), as configured"
    );
    describe_counter!(QUOTA_REFUSALS, "Writes refused because a bucket's type quota was reached, by group and quota");
    describe_counter!(
        UPSTREAM_CALLS,
        "Calls to applications, by deployment (a configured name, or `stored`), interface and status \
         (the application's HTTP status, or connect_error, timeout, refused)"
    );
    describe_histogram!(
        UPSTREAM_DURATION,
        Unit::Seconds,
        "Time from sending a call to an application to its response head, by deployment and interface"
    );
}

/// One call to an application: `deployment` is a configured name or
/// `stored` (a bounded label whatever users store), `interface` the API.
pub fn upstream_call(deployment: &str, interface: &'static str, status: &str, took: Duration) {
    let labels = [("deployment", deployment.to_string()), ("interface", interface.to_string())];
    histogram!(UPSTREAM_DURATION, &labels).record(took.as_secs_f64());
    let counted = [labels[0].clone(), labels[1].clone(), ("status", status.to_string())];
    counter!(UPSTREAM_CALLS, &counted).increment(1);
}

/// A lock acquired after `waited`.
pub fn lock_acquired(backend: &'static str, waited: Duration) {
    histogram!(LOCK_WAIT, "backend" => backend).record(waited.as_secs_f64());
}

/// A lock not acquired, or lost while held.
pub fn lock_failed(backend: &'static str, reason: &'static str) {
    counter!(LOCK_FAILURES, "backend" => backend, "reason" => reason).increment(1);
}

/// One sweep's work.
pub fn sweep(outcome: &'static str, objects: usize, bytes: u64, entries_failed: usize) {
    counter!(GC_SWEEPS, "outcome" => outcome).increment(1);
    counter!(GC_OBJECTS).increment(objects as u64);
    counter!(GC_BYTES).increment(bytes);
    counter!(GC_ENTRIES_FAILED).increment(entries_failed as u64);
}

/// A key minted (`alive` +1) or revoked (`alive` −1).
pub fn definition_cache(bytes: usize) {
    gauge!(DEFINITION_CACHE_BYTES).set(bytes as f64);
}

pub fn key_minted() {
    counter!(KEYS_MINTED).increment(1);
    gauge!(KEYS_ALIVE).increment(1.0);
}

pub fn key_revoked() {
    gauge!(KEYS_ALIVE).decrement(1.0);
}

/// A type's configured per-bucket quota (`quota` is `max_resources` or
/// `max_bytes`).
pub fn quota_limit(group: &str, quota: &'static str, limit: u64) {
    gauge!(QUOTA_LIMIT, "group" => group.to_string(), "quota" => quota).set(limit as f64);
}

/// A write refused by a type's quota.
pub fn quota_refused(group: &str, quota: &'static str) {
    counter!(QUOTA_REFUSALS, "group" => group.to_string(), "quota" => quota).increment(1);
}
