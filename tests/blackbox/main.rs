//! Black-box tests: the real `dial-host` binary, real HTTP.

mod auth;
mod cli;
mod handler_reload;
#[path = "../services.rs"]
mod services;
mod shared_services;
mod startup;
mod support;
mod v2;
