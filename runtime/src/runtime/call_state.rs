//! What one handler call's store holds and the host side of its imports:
//! the sandbox's per-call accounting (read budget, memory cap, CPU ticks),
//! the guest's captured stderr, the capped `log` import, `files.read`, and
//! a WASI context built only when the guest first asks for one (frozen
//! clocks, deterministic randomness, no network).

use std::sync::Arc;
use std::time::Duration;

use wasmtime::ResourceLimiter;
use wasmtime::component::{HasData, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings;
use crate::files::{FileSource, ReadError};

/// Largest single `files.read` the host serves.
pub const MAX_READ_CHUNK: u32 = 1 << 20;
/// Guest stderr kept for error messages (a panic message lands here).
const STDERR_CAPACITY: usize = 64 << 10;
/// Table growth allowed per instance; Rust guests need a few hundred.
const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Log lines one handler call may emit through the `log` import, and their length.
const MAX_LOG_LINES: u32 = 64;
const MAX_LOG_LINE_BYTES: usize = 1024;

/// Everything one call's store holds.
pub(super) struct CallState {
    /// Built at the guest's first WASI call (most calls make none): building
    /// one seeds several random generators and boxes every stream and clock.
    pub(super) wasi: Option<WasiCtx>,
    pub(super) table: ResourceTable,
    pub(super) files: Arc<dyn FileSource>,
    pub(super) read_budget: u64,
    pub(super) read_remaining: u64,
    pub(super) memory_limit: usize,
    pub(super) memory_exceeded: bool,
    pub(super) cpu_ticks_left: u64,
    pub(super) cpu_exhausted: bool,
    pub(super) stderr: MemoryOutputPipe,
    /// `name@version` of the handler, for its log lines.
    pub(super) label: Arc<str>,
    pub(super) log_lines_left: u32,
}

impl CallState {
    /// A call's state: it may read `read_budget` bytes, grow its memory to
    /// `memory_limit` bytes and run for `cpu_ticks` epoch ticks.
    pub(super) fn new(
        files: Arc<dyn FileSource>,
        read_budget: u64,
        memory_limit: u64,
        cpu_ticks: u64,
        label: Arc<str>,
    ) -> Self {
        Self {
            wasi: None,
            table: ResourceTable::new(),
            files,
            read_budget,
            read_remaining: read_budget,
            memory_limit: usize::try_from(memory_limit).unwrap_or(usize::MAX),
            memory_exceeded: false,
            cpu_ticks_left: cpu_ticks,
            cpu_exhausted: false,
            stderr: MemoryOutputPipe::new(STDERR_CAPACITY),
            label,
            log_lines_left: MAX_LOG_LINES,
        }
    }
}

/// The WASI context every call gets: the same for all, so building it late
/// changes nothing a guest can see.
fn wasi_ctx(stderr: &MemoryOutputPipe) -> WasiCtx {
    WasiCtx::builder()
        .stderr(stderr.clone())
        // No network, no real clock, no real randomness: a handler's
        // verdict depends on its input only.
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .wall_clock(FrozenClock)
        .monotonic_clock(FrozenClock)
        .secure_random(wasmtime_wasi::Deterministic::new(vec![0x5a; 32]))
        .insecure_random(wasmtime_wasi::Deterministic::new(vec![0xa5; 32]))
        .insecure_random_seed(INSECURE_SEED)
        .build()
}

/// What `wasi:random/insecure-seed` answers, from the context or [`FixedSeed`].
const INSECURE_SEED: u128 = 0;

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let stderr = &self.stderr;
        let ctx = self.wasi.get_or_insert_with(|| wasi_ctx(stderr));
        WasiCtxView { ctx, table: &mut self.table }
    }
}

/// `wasi:random/insecure-seed` without the WASI context: the context's own
/// constant seed.
pub(super) struct FixedSeed;

impl HasData for FixedSeed {
    type Data<'a> = FixedSeed;
}

impl wasmtime_wasi::p2::bindings::random::insecure_seed::Host for FixedSeed {
    fn insecure_seed(&mut self) -> wasmtime::Result<(u64, u64)> {
        Ok((INSECURE_SEED as u64, (INSECURE_SEED >> 64) as u64))
    }
}

impl ResourceLimiter for CallState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.memory_exceeded = true;
            return Err(wasmtime::format_err!("memory limit of {} bytes exceeded", self.memory_limit));
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

impl bindings::dial::handler::types::Host for CallState {}

impl bindings::dial::handler::log::Host for CallState {
    async fn emit(&mut self, level: bindings::dial::handler::log::Level, mut message: String) {
        // A chatty or hostile handler cannot flood the host's log.
        if self.log_lines_left == 0 {
            return;
        }
        self.log_lines_left -= 1;
        if message.len() > MAX_LOG_LINE_BYTES {
            let mut end = MAX_LOG_LINE_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        use bindings::dial::handler::log::Level;
        let handler = &*self.label;
        match level {
            Level::Debug => tracing::debug!(target: "dial_host::handler_log", handler, "{message}"),
            Level::Info => tracing::info!(target: "dial_host::handler_log", handler, "{message}"),
            Level::Warn => tracing::warn!(target: "dial_host::handler_log", handler, "{message}"),
        }
    }
}

impl bindings::dial::handler::files::Host for CallState {
    async fn read(
        &mut self,
        path: String,
        offset: u64,
        len: u32,
    ) -> Result<Vec<u8>, bindings::dial::handler::types::ReadError> {
        let len = len.min(MAX_READ_CHUNK);
        match self.files.read(&path, offset, len).await {
            Ok(bytes) if bytes.len() as u64 > self.read_remaining => {
                self.read_remaining = 0;
                Err(bindings::dial::handler::types::ReadError::BudgetExceeded(self.read_budget))
            }
            Ok(bytes) => {
                self.read_remaining -= bytes.len() as u64;
                Ok(bytes.to_vec())
            }
            Err(ReadError::NotFound) => Err(bindings::dial::handler::types::ReadError::NotFound),
            Err(ReadError::Storage(message)) => Err(bindings::dial::handler::types::ReadError::Storage(message)),
        }
    }
}

/// Time stands still inside a handler.
struct FrozenClock;

impl wasmtime_wasi::HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl wasmtime_wasi::HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}
