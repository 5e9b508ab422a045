//! What the `dial-host` command does besides serving.
//!
//! - [`handler_test`]: `handler test DIR FILE.wasm`, a handler run on a local folder.

pub mod handler_test;
