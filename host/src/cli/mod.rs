//! What the `dial-host` command does besides serving.
//!
//! - [`handler_test`]: `handler test DIR FILE.wasm`, a handler run on a local folder.
//! - [`push`]: `handler push FILE.wasm oci://…:<tag>`, a handler published to an OCI registry.

pub mod handler_test;
pub mod push;
