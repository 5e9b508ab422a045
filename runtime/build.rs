//! Compiles the guest components the host embeds or tests against.
//!
//! The built-in skill handler and the misbehaving test guest are workspace
//! crates built for `wasm32-wasip2` by a nested `cargo build` into a target
//! directory of their own (the pattern of wasmtime's own test-programs), so
//! `cargo run -p dial-host` needs no separate step. The directory holding the
//! `.wasm` files is passed to the host crate as `DIAL_GUEST_WASM_DIR`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const GUEST_TARGET: &str = "wasm32-wasip2";
const GUEST_PROFILE: &str = "wasm-guest";
const GUEST_PACKAGES: &[&str] =
    &["dial-skill-handler", "misbehaving-guest", "not-a-handler", "handler-1-0", "bad-check"];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir.parent().expect("host/ sits in the workspace root");
    for watched in ["wit", "handlers", "tests/guests", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }

    let target_dir = guest_target_dir(workspace);
    ensure_guest_target_installed();

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(workspace)
        .args(["build", "--target", GUEST_TARGET])
        .args(["--profile", GUEST_PROFILE])
        .arg("--target-dir")
        .arg(&target_dir);
    for package in GUEST_PACKAGES {
        build.args(["-p", package]);
    }
    // Flags meant for the host build must not leak into the guest build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        build.env_remove(var);
    }
    let status = build.status().expect("failed to run cargo for the guest components");
    assert!(status.success(), "building the guest components for {GUEST_TARGET} failed");

    let wasm_dir = target_dir.join(GUEST_TARGET).join(GUEST_PROFILE);
    for package in GUEST_PACKAGES {
        let file = wasm_dir.join(format!("{}.wasm", package.replace('-', "_")));
        assert!(file.exists(), "expected guest component at {}", file.display());
    }
    println!("cargo:rustc-env=DIAL_GUEST_WASM_DIR={}", wasm_dir.display());
}

/// `<target>/wasm-guests`, next to the host's own profiles, so every host
/// profile (dev, release, bench) shares one guest build.
fn guest_target_dir(workspace: &Path) -> PathBuf {
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    // OUT_DIR = <target>/<profile>/build/<pkg>-<hash>/out; with --target it
    // has one more level. Find the directory that holds the profile dirs.
    let target = out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").exists())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace.join("target"));
    target.join("wasm-guests")
}

/// rust-toolchain.toml lists the target, but rustup only installs listed
/// targets when it installs the toolchain itself; a toolchain that was already
/// present may lack it.
fn ensure_guest_target_installed() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    let installed = sysroot.map(|root| root.join("lib/rustlib").join(GUEST_TARGET).exists()).unwrap_or(false);
    if installed {
        return;
    }
    let mut add = Command::new("rustup");
    add.args(["target", "add", GUEST_TARGET]);
    if let Ok(toolchain) = env::var("RUSTUP_TOOLCHAIN") {
        add.args(["--toolchain", &toolchain]);
    }
    let ok = add.status().map(|s| s.success()).unwrap_or(false);
    assert!(ok, "the {GUEST_TARGET} target is missing and `rustup target add {GUEST_TARGET}` failed");
}
