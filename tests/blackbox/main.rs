//! Black-box tests: the real `dial-host` binary, real HTTP.

mod auth;
mod cli;
mod connections;
mod example_handler;
mod handler_reload;
mod publication;
#[path = "../services.rs"]
mod services;
mod shared_services;
mod sharing;
mod startup;
mod support;
mod v1;
mod v2;
