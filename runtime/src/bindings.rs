//! Host-side bindings of `dial:handler@1.2.0`, generated from `wit/`.
//!
//! The host links against `handler-core` (what every 1.x component exports)
//! and looks up the 1.2 `check` export by name, so components built against
//! 1.0 and 1.1 keep loading.

wasmtime::component::bindgen!({
    world: "handler-core",
    path: "../wit",
    imports: { default: async },
    exports: { default: async },
});

use super::types::{FileEntry as HostFileEntry, HandlerDescription, LimitOverrides, Mutation as HostMutation};
use super::types::{Problem as HostProblem, ResourceInfo as HostResourceInfo};

/// What the `check` export returns: warnings and metadata, or problems.
pub type CheckOutcome = Result<(Vec<Problem>, Vec<(String, String)>), Vec<Problem>>;

/// The `check` export, typed: parameters borrowed, as the generated
/// bindings pass them.
pub type CheckFunc<'a> = wasmtime::component::TypedFunc<(&'a ResourceInfo, &'a [FileEntry]), (CheckOutcome,)>;

impl From<&HostResourceInfo> for ResourceInfo {
    fn from(info: &HostResourceInfo) -> Self {
        Self { name: info.name.clone(), path: info.path.clone() }
    }
}

impl From<&HostFileEntry> for FileEntry {
    fn from(entry: &HostFileEntry) -> Self {
        Self { path: entry.path.clone(), size: entry.size }
    }
}

impl From<Problem> for HostProblem {
    fn from(problem: Problem) -> Self {
        Self { path: problem.path, message: problem.message }
    }
}

impl From<HostMutation> for Mutation {
    fn from(op: HostMutation) -> Self {
        match op {
            HostMutation::Put => Self::Put,
            HostMutation::Delete => Self::Delete,
        }
    }
}

impl From<Description> for HandlerDescription {
    fn from(d: Description) -> Self {
        Self {
            type_name: d.type_name,
            group: d.group,
            display_name: d.display_name,
            handler_version: d.handler_version,
            limits: LimitOverrides {
                max_file_bytes: d.limits.max_file_bytes,
                max_files: d.limits.max_files,
                max_total_bytes: d.limits.max_total_bytes,
            },
        }
    }
}
