//! The component glue: the WIT bindings, every [`Handler`] as the world's
//! `Guest`, and the host's `files.read` import as a [`FileSet`].

/// The `dial:handler@1.2.0` bindings, generated from `wit/` at the workspace
/// root. Handler crates rarely need them: [`Handler`] and the plain types of
/// this crate are the API; `export_handler!` is the one entry point.
pub mod bindings {
    wit_bindgen::generate!({
        world: "handler",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_handler",
        default_bindings_module: "dial_handler_sdk::bindings",
    });
}

use bindings::dial::handler::{files, types as wit};

use crate::{FileEntry, FileSet, Handler, Mutation, Problem, ReadError, ResourceInfo};

/// Any [`Handler`] is the component: the conversions live here, once.
impl<T: Handler> bindings::Guest for T {
    fn describe() -> wit::Description {
        let description = T::describe();
        wit::Description {
            type_name: description.type_name,
            group: description.group,
            display_name: description.display_name,
            handler_version: description.handler_version,
            limits: wit::Limits {
                max_file_bytes: description.limits.max_file_bytes,
                max_files: description.limits.max_files,
                max_total_bytes: description.limits.max_total_bytes,
            },
        }
    }

    fn validate(
        resource: wit::ResourceInfo,
        entries: Vec<wit::FileEntry>,
    ) -> Result<Vec<wit::Problem>, Vec<wit::Problem>> {
        let mut files = HostFiles::new(entries);
        T::validate(&resource_info(resource), &mut files).map(problems).map_err(problems)
    }

    fn build_marker_metadata(
        resource: wit::ResourceInfo,
        entries: Vec<wit::FileEntry>,
    ) -> Result<Vec<(String, String)>, Vec<wit::Problem>> {
        let mut files = HostFiles::new(entries);
        T::metadata(&resource_info(resource), &mut files).map_err(problems)
    }

    fn check(
        resource: wit::ResourceInfo,
        entries: Vec<wit::FileEntry>,
    ) -> Result<(Vec<wit::Problem>, Vec<(String, String)>), Vec<wit::Problem>> {
        let mut files = HostFiles::new(entries);
        match T::check(&resource_info(resource), &mut files) {
            Ok((warnings, metadata)) => Ok((problems(warnings), metadata)),
            Err(errors) => Err(problems(errors)),
        }
    }

    fn validate_file_mutation(path: String, op: wit::Mutation) -> Result<(), wit::Problem> {
        let op = match op {
            wit::Mutation::Put => Mutation::Put,
            wit::Mutation::Delete => Mutation::Delete,
        };
        T::validate_file_mutation(&path, op).map_err(problem)
    }
}

/// Bytes of earlier reads kept per call, so `check`'s default (`validate`
/// then `metadata`, each reading the same file) asks the host once.
const READ_CACHE_BYTES: usize = 1 << 20;

/// The host's listing, and reads through the `files.read` import.
struct HostFiles {
    entries: Vec<FileEntry>,
    /// `(path, offset, len)` of a read and what it returned; at most
    /// [`READ_CACHE_BYTES`] in all.
    cache: Vec<((String, u64, u32), Vec<u8>)>,
    cached_bytes: usize,
}

impl HostFiles {
    /// In the host's order (by path); sorting here would cost code size for nothing.
    fn new(entries: Vec<wit::FileEntry>) -> Self {
        let entries = entries.into_iter().map(|entry| FileEntry { path: entry.path, size: entry.size }).collect();
        Self { entries, cache: Vec::new(), cached_bytes: 0 }
    }
}

impl FileSet for HostFiles {
    fn entries(&self) -> &[FileEntry] {
        &self.entries
    }

    fn read(&mut self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, ReadError> {
        let cached = self.cache.iter().find(|((p, o, l), _)| p == path && *o == offset && *l == len);
        if let Some((_, bytes)) = cached {
            return Ok(bytes.clone());
        }
        let bytes = files::read(path, offset, len).map_err(|error| match error {
            wit::ReadError::NotFound => ReadError::NotFound,
            wit::ReadError::BudgetExceeded(budget) => ReadError::BudgetExceeded(budget),
            wit::ReadError::Storage(message) => ReadError::Storage(message),
        })?;
        if self.cached_bytes + bytes.len() <= READ_CACHE_BYTES {
            self.cached_bytes += bytes.len();
            self.cache.push(((path.to_string(), offset, len), bytes.clone()));
        }
        Ok(bytes)
    }
}

fn resource_info(info: wit::ResourceInfo) -> ResourceInfo {
    ResourceInfo { name: info.name, path: info.path }
}

fn problem(p: Problem) -> wit::Problem {
    wit::Problem { path: p.path, message: p.message }
}

fn problems(list: Vec<Problem>) -> Vec<wit::Problem> {
    list.into_iter().map(problem).collect()
}
