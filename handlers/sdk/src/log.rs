//! Diagnostics for handler authors, through the host's `log.emit` import
//! (`dial:handler@1.1.0`): lines land in the host's log, tagged with the
//! handler (`target: dial_host::handler_log`). The host keeps at most 64 lines
//! of 1 KiB per call and drops the rest, so log what helps you debug, not
//! every file.
//!
//! Natively (unit tests, tools) lines go to stderr, which the test harness
//! captures.
//!
//! Never log file content you would not want in an operator's log.

/// How important a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
}

/// Emits one line.
pub fn emit(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::bindings::dial::handler::log as wit;
        let level = match level {
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Warn => wit::Level::Warn,
        };
        wit::emit(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[handler {level:?}] {message}");
}

pub fn debug(message: &str) {
    emit(Level::Debug, message);
}

pub fn info(message: &str) {
    emit(Level::Info, message);
}

pub fn warn(message: &str) {
    emit(Level::Warn, message);
}
