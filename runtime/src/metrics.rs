//! The runtime's metrics, recorded through the `metrics` facade (the host
//! installs the recorder and calls [`describe`]). Labels take bounded values
//! only: handler labels, export names, outcomes.

use std::sync::Arc;
use std::time::Duration;

use metrics::{Label, SharedString, Unit, counter, describe_counter, describe_histogram, histogram};

pub const HANDLER_CALLS: &str = "dial_host_handler_calls_total";
pub const HANDLER_DURATION: &str = "dial_host_handler_call_duration_seconds";

/// Describes the runtime's metrics to the installed recorder.
pub fn describe() {
    describe_counter!(
        HANDLER_CALLS,
        "Handler calls, by handler, call and outcome (ok, cpu, memory, trap, timeout, start)"
    );
    describe_histogram!(HANDLER_DURATION, Unit::Seconds, "Handler call time, by handler, call and outcome");
}

/// One handler call: `call` is the export (`check`, `validate`, `metadata`,
/// `mutation`, `describe`), `outcome` `ok` or the failure's kind. Runs on
/// every call: the labels are shared or static, never copied.
pub fn handler_call(handler: &Arc<str>, call: &'static str, outcome: &'static str, took: Duration) {
    let labels = vec![
        Label::new("handler", SharedString::from_shared(handler.clone())),
        Label::from_static_parts("call", call),
        Label::from_static_parts("outcome", outcome),
    ];
    counter!(HANDLER_CALLS, labels.clone()).increment(1);
    histogram!(HANDLER_DURATION, labels).record(took.as_secs_f64());
}
