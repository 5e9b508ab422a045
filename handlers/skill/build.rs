//! The component's shadow stack: 128 KiB instead of Rust's 1 MiB default for
//! wasm32. The host resets an instance's memory after every call by scanning
//! its page tables, so every page of initial memory costs each call time; the
//! skill rules recurse at most `MAX_NESTING_DEPTH` (8) levels deep and use a
//! few KiB of stack. Measured in `docs/benchmarks.md` ("Handler speed").

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo::rustc-link-arg-cdylib=-zstack-size=131072");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
