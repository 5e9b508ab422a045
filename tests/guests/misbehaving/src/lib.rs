//! A handler that misbehaves on request, to test the host's sandbox.
//!
//! `validate` looks at the resource name: `loop` spins forever, `hog` grabs
//! memory until the cap stops it, `panic` panics, `greedy` reads the first
//! file over and over until the host's read budget says no; any other name
//! is valid. `build_marker_metadata` of `remember` reports what an instance
//! would inherit from an earlier call if instances were not fresh: a static
//! counter, a static buffer and heap memory it marks before returning;
//! of `probe`, what the world outside its input looks like from inside: the
//! filesystem, the environment, the clocks, randomness and the network.
//! `check` (WIT 1.2) does both in one call, as a commit asks.

#[cfg(target_arch = "wasm32")]
mod guest {
    wit_bindgen::generate!({ world: "handler", path: "../../../wit" });

    use dial::handler::files;
    use dial::handler::types::Limits;

    struct Misbehaving;

    impl Guest for Misbehaving {
        fn describe() -> Description {
            Description {
                type_name: "misbehaving".into(),
                group: "misbehaving".into(),
                display_name: "Misbehaving test handler".into(),
                handler_version: env!("CARGO_PKG_VERSION").into(),
                limits: Limits { max_file_bytes: None, max_files: Some(10), max_total_bytes: None },
            }
        }

        fn validate(resource: ResourceInfo, files: Vec<FileEntry>) -> Result<Vec<Problem>, Vec<Problem>> {
            match resource.name.as_str() {
                "loop" => spin_forever(),
                "hog" => hog_memory(),
                "panic" => panic!("misbehaving handler panicked on purpose"),
                "greedy" => read_until_refused(&files),
                _ => Ok(Vec::new()),
            }
        }

        fn build_marker_metadata(
            resource: ResourceInfo,
            _files: Vec<FileEntry>,
        ) -> Result<Vec<(String, String)>, Vec<Problem>> {
            if resource.name == "remember" {
                return Ok(remember());
            }
            if resource.name == "probe" {
                return Ok(probe());
            }
            Ok(vec![("name".into(), resource.name)])
        }

        fn validate_file_mutation(_path: String, _op: Mutation) -> Result<(), Problem> {
            Ok(())
        }

        /// What a commit asks (WIT 1.2): the same misbehaviour through one call.
        fn check(
            resource: ResourceInfo,
            files: Vec<FileEntry>,
        ) -> Result<(Vec<Problem>, Vec<(String, String)>), Vec<Problem>> {
            let warnings = Self::validate(resource.clone(), files.clone())?;
            Ok((warnings, Self::build_marker_metadata(resource, files)?))
        }
    }

    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    static STAMP: std::sync::Mutex<[u8; 4096]> = std::sync::Mutex::new([0; 4096]);
    const HEAP_BYTES: usize = 256 << 10;

    /// What this instance found left over (nothing, in a fresh one), after
    /// which it leaves marks of its own: the counter, the static buffer and
    /// heap memory handed back to the allocator.
    fn remember() -> Vec<(String, String)> {
        let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let static_clean = {
            let mut stamp = STAMP.lock().unwrap();
            let clean = stamp.iter().all(|b| *b == 0);
            stamp.fill(0xAB);
            clean
        };
        // Zeroed memory from an allocator that trusts fresh pages to be zero:
        // marks left by an earlier call would show through.
        let layout = std::alloc::Layout::from_size_align(HEAP_BYTES, 8).unwrap();
        let heap_clean = unsafe {
            let block = std::alloc::alloc_zeroed(layout);
            let bytes = std::slice::from_raw_parts_mut(block, HEAP_BYTES);
            let clean = bytes.iter().all(|b| *b == 0);
            bytes.fill(0xCD);
            std::alloc::dealloc(block, layout);
            clean
        };
        vec![
            ("calls".into(), calls.to_string()),
            ("static_clean".into(), static_clean.to_string()),
            ("heap_clean".into(), heap_clean.to_string()),
        ]
    }

    /// What the sandbox lets through, each as a value two calls can compare.
    fn probe() -> Vec<(String, String)> {
        use std::hash::BuildHasher;
        let root = std::fs::read_dir("/").map(|entries| entries.count()).map_err(|e| e.kind());
        let passwd = std::fs::read("/etc/passwd").map(|bytes| bytes.len()).map_err(|e| e.kind());
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| since.as_nanos())
            .unwrap_or_default();
        let start = std::time::Instant::now();
        spin_a_little();
        let elapsed = start.elapsed().as_nanos();
        // `RandomState` keys its hasher from the system's random source.
        let random = std::collections::hash_map::RandomState::new().hash_one(42u64);
        let tcp = std::net::TcpStream::connect(("127.0.0.1", 80)).map(|_| "connected").map_err(|e| e.kind());
        let lookup =
            std::net::ToSocketAddrs::to_socket_addrs(&("example.com", 80)).map(|a| a.count()).map_err(|e| e.kind());
        vec![
            ("read_dir_root".into(), format!("{root:?}")),
            ("read_etc_passwd".into(), format!("{passwd:?}")),
            ("env_vars".into(), std::env::vars_os().count().to_string()),
            ("args".into(), std::env::args_os().count().to_string()),
            ("wall_clock_ns".into(), wall.to_string()),
            ("monotonic_elapsed_ns".into(), elapsed.to_string()),
            ("random_hash".into(), random.to_string()),
            ("tcp_connect".into(), format!("{tcp:?}")),
            ("name_lookup".into(), format!("{lookup:?}")),
        ]
    }

    fn spin_a_little() {
        let mut counter: u64 = 0;
        for _ in 0..1_000_000 {
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
    }

    fn spin_forever() -> ! {
        let mut counter: u64 = 0;
        loop {
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
    }

    fn hog_memory() -> Result<Vec<Problem>, Vec<Problem>> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }

    fn read_until_refused(files: &[FileEntry]) -> Result<Vec<Problem>, Vec<Problem>> {
        let Some(first) = files.first() else { return Ok(Vec::new()) };
        loop {
            if let Err(error) = files::read(&first.path, 0, 1 << 20) {
                let message = format!("read refused: {error:?}");
                return Err(vec![Problem { path: Some(first.path.clone()), message }]);
            }
        }
    }

    export!(Misbehaving);
}
