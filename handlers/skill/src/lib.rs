//! The Agent Skills handler for dial-host: validates a skill's file set
//! (`SKILL.md` and its YAML frontmatter) and extracts the marker metadata.
//!
//! Written on `dial-handler-sdk`: the rules are [`SkillHandler`]'s
//! [`Handler`](dial_handler_sdk::Handler) implementation over plain Rust
//! types, so they run natively in tests and benchmarks; `export_handler!`
//! makes the same type the wasm component's exports.

pub mod rules;

pub use dial_handler_sdk as sdk;
pub use rules::{DISPLAY_NAME, GROUP, MAX_SKILL_FILE_BYTES, SKILL_FILE, SkillHandler, TYPE_NAME};

dial_handler_sdk::export_handler!(SkillHandler);

/// The component's heap: a 256 KiB bump arena in its initial memory, then
/// the system allocator (see [`dial_handler_sdk::arena`]). A typical commit
/// allocates a few tens of KiB; a bigger region only lengthens the host's
/// scan of the instance's memory after every call (`build.rs` keeps the
/// stack small for the same reason).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: dial_handler_sdk::arena::CallArena<{ 1 << 18 }> = dial_handler_sdk::arena::CallArena::new();
