//! Black-box tests: the real `dial-host` binary, real HTTP.

mod auth;
mod cli;
mod startup;
mod support;
mod v2;
