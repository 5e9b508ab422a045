//! Black-box tests: the real `dial-host` binary, real HTTP.

mod app_bounds;
mod auth;
mod backends;
mod cli;
mod cluster;
mod connections;
mod consent_audit;
mod console;
mod console_decisions;
mod dependencies;
mod deploy;
mod deployments;
mod dial_sdk;
mod example_apps;
mod example_handler;
mod feed;
mod handler_reload;
mod js_handler;
mod limits;
mod metrics;
mod oci_handlers;
mod openapi;
mod outage;
#[path = "../partition.rs"]
mod partition;
mod partitions;
mod publication;
mod python_handler;
mod quotas;
#[path = "../random_bytes.rs"]
mod random_bytes;
mod redis_shapes;
mod resource_ops;
mod sdk;
mod security;
#[path = "../services.rs"]
mod services;
mod shared_services;
mod sharing;
mod skills_api;
mod skills_discovery;
mod skills_mcp;
mod skills_migration;
mod startup;
mod support;
mod tour;
mod traces;
mod uploads;
mod upstream;
mod v1;
mod v2;
mod versions;
