//! Which handler serves which URL group.
//!
//! Built once at start: the built-in skill handler, then every `*.wasm` in
//! `handlers.dir` in name order. A group claimed twice, a file that is not a
//! handler, or per-type settings for a group nobody serves stop the start
//! with a message naming the file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::runtime::{LoadError, Runtime};
use super::{BUILTIN_SKILL_HANDLER, Handler, HandlerSource};
use crate::config::HandlersConfig;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("handler {origin}: {error}")]
    Load { origin: HandlerSource, error: LoadError },
    #[error("group '{group}' is claimed by two handlers: {first} and {second}")]
    DuplicateGroup { group: String, first: HandlerSource, second: HandlerSource },
    #[error("cannot read handlers directory {dir}: {error}")]
    Directory { dir: PathBuf, error: std::io::Error },
    #[error("[handlers.types.{0}] configures a group that no loaded handler serves")]
    UnknownType(String),
}

/// The loaded handlers, by group.
pub struct HandlerRegistry {
    by_group: BTreeMap<String, Handler>,
}

impl HandlerRegistry {
    /// Loads the built-in handler and the configured directory.
    pub async fn load(runtime: Arc<Runtime>, config: &HandlersConfig) -> Result<Self, RegistryError> {
        let mut sources = vec![(HandlerSource::Builtin, BUILTIN_SKILL_HANDLER.to_vec())];
        if let Some(dir) = &config.dir {
            for path in wasm_files(dir)? {
                let bytes =
                    std::fs::read(&path).map_err(|error| RegistryError::Directory { dir: path.clone(), error })?;
                sources.push((HandlerSource::File(path), bytes));
            }
        }

        let mut by_group: BTreeMap<String, Handler> = BTreeMap::new();
        for (source, wasm) in sources {
            let loaded = runtime
                .load(wasm, source.clone())
                .await
                .map_err(|error| RegistryError::Load { origin: source.clone(), error })?;
            let group = loaded.description.group.clone();
            if let Some(existing) = by_group.get(&group) {
                return Err(RegistryError::DuplicateGroup { group, first: existing.source().clone(), second: source });
            }
            let strict = config.types.get(&group).is_some_and(|settings| settings.strict);
            tracing::info!(
                group = %group,
                handler = %loaded.label,
                source = %source,
                strict,
                "loaded handler"
            );
            by_group.insert(group, Handler { inner: Arc::new(loaded), runtime: runtime.clone(), strict });
        }
        if let Some(unknown) = config.types.keys().find(|group| !by_group.contains_key(*group)) {
            return Err(RegistryError::UnknownType(unknown.clone()));
        }
        Ok(Self { by_group })
    }

    /// The handler serving `group`.
    pub fn get(&self, group: &str) -> Option<&Handler> {
        self.by_group.get(group)
    }

    /// All handlers, by group name.
    pub fn iter(&self) -> impl Iterator<Item = &Handler> {
        self.by_group.values()
    }
}

/// `*.wasm` files directly in `dir`, sorted by name.
fn wasm_files(dir: &PathBuf) -> Result<Vec<PathBuf>, RegistryError> {
    let read_error = |error| RegistryError::Directory { dir: dir.clone(), error };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_error)? {
        let path = entry.map_err(read_error)?.path();
        if path.is_file() && path.extension().is_some_and(|ext| ext == "wasm") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
