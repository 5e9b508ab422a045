//! Host-side bindings of the `dial:handler@1.1.0` world, generated from `wit/`.

wasmtime::component::bindgen!({
    world: "handler",
    path: "../wit",
    imports: { default: async },
    exports: { default: async },
});

use super::{FileEntry as HostFileEntry, HandlerDescription, LimitOverrides, Mutation as HostMutation};
use super::{Problem as HostProblem, ResourceInfo as HostResourceInfo};

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
