//! The component glue: WIT types in, plain rule types out, and the host's
//! `files.read` import as the rules' [`FileReader`].

wit_bindgen::generate!({ world: "handler", path: "../../wit" });

use dial::handler::files;
use dial::handler::types::{Limits, ReadError as WitReadError};

use crate::rules;

struct SkillHandler;

/// Reads through the host import, one bounded chunk at a time.
struct HostFiles;

impl rules::FileReader for HostFiles {
    fn read(&mut self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, rules::ReadError> {
        files::read(path, offset, len).map_err(|error| match error {
            WitReadError::NotFound => rules::ReadError::NotFound,
            WitReadError::BudgetExceeded(budget) => rules::ReadError::BudgetExceeded(budget),
            WitReadError::Storage(message) => rules::ReadError::Storage(message),
        })
    }
}

fn resource(info: ResourceInfo) -> rules::ResourceInfo {
    rules::ResourceInfo { name: info.name, path: info.path }
}

fn entries(files: Vec<FileEntry>) -> Vec<rules::FileEntry> {
    files.into_iter().map(|f| rules::FileEntry { path: f.path, size: f.size }).collect()
}

fn problem(p: rules::Problem) -> Problem {
    Problem { path: p.path, message: p.message }
}

fn problems(list: Vec<rules::Problem>) -> Vec<Problem> {
    list.into_iter().map(problem).collect()
}

impl Guest for SkillHandler {
    fn describe() -> Description {
        Description {
            type_name: rules::TYPE_NAME.into(),
            group: rules::GROUP.into(),
            display_name: rules::DISPLAY_NAME.into(),
            handler_version: env!("CARGO_PKG_VERSION").into(),
            limits: Limits { max_file_bytes: None, max_files: None, max_total_bytes: None },
        }
    }

    fn validate(info: ResourceInfo, files: Vec<FileEntry>) -> Result<Vec<Problem>, Vec<Problem>> {
        rules::validate(&resource(info), &entries(files), &mut HostFiles).map(problems).map_err(problems)
    }

    fn build_marker_metadata(info: ResourceInfo, files: Vec<FileEntry>) -> Result<Vec<(String, String)>, Vec<Problem>> {
        rules::build_marker_metadata(&resource(info), &entries(files), &mut HostFiles).map_err(problems)
    }

    fn validate_file_mutation(path: String, op: Mutation) -> Result<(), Problem> {
        let op = match op {
            Mutation::Put => rules::Mutation::Put,
            Mutation::Delete => rules::Mutation::Delete,
        };
        rules::validate_file_mutation(&path, op).map_err(problem)
    }
}

export!(SkillHandler);
