//! Where a handler's `files.read` import gets its bytes.
//!
//! The folder engine passes a source backed by the object store (the staged
//! version being validated); tests, benchmarks and `dial-host handler`
//! commands use [`InMemoryFiles`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

/// A boxed future, so `FileSource` stays object-safe.
pub type ReadFuture<'a> = Pin<Box<dyn Future<Output = Result<Bytes, ReadError>> + Send + 'a>>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("no such file")]
    NotFound,
    #[error("storage error: {0}")]
    Storage(String),
}

/// Bytes of the files of one resource version, by relative path.
pub trait FileSource: Send + Sync {
    /// Up to `len` bytes from `offset`; fewer only at end of file, none at or
    /// past it.
    fn read<'a>(&'a self, path: &'a str, offset: u64, len: u32) -> ReadFuture<'a>;
}

/// Files held in memory.
#[derive(Debug, Clone, Default)]
pub struct InMemoryFiles {
    files: HashMap<String, Bytes>,
}

impl InMemoryFiles {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, path: impl Into<String>, content: impl Into<Bytes>) -> &mut Self {
        self.files.insert(path.into(), content.into());
        self
    }

    /// The file list a handler is called with, sorted by path.
    pub fn entries(&self) -> Vec<super::types::FileEntry> {
        let mut entries: Vec<_> = self
            .files
            .iter()
            .map(|(path, content)| super::types::FileEntry { path: path.clone(), size: content.len() as u64 })
            .collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        entries
    }
}

impl FileSource for InMemoryFiles {
    fn read<'a>(&'a self, path: &'a str, offset: u64, len: u32) -> ReadFuture<'a> {
        let result = match self.files.get(path) {
            None => Err(ReadError::NotFound),
            Some(content) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(content.len());
                let end = start.saturating_add(len as usize).min(content.len());
                Ok(content.slice(start..end))
            }
        };
        Box::pin(std::future::ready(result))
    }
}
