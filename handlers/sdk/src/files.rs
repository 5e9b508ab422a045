//! The file set a handler call sees: the listing, and bytes on demand.

use std::collections::BTreeMap;
use std::fmt;

use crate::{FileEntry, Problem, text};

/// Largest single read the host serves (`files.read` caps `len` at 1 MiB);
/// [`FileSet::read_all`] reads in chunks of this size.
pub const MAX_READ_CHUNK: u32 = 1 << 20;

/// Why a read returned no bytes (the WIT `read-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// No file with that path in the set being validated.
    NotFound,
    /// This call has already read its budget of bytes (the value).
    BudgetExceeded(u64),
    /// The storage failed; the call should give up.
    Storage(String),
}

/// The files of the resource being checked.
///
/// In the component it is the host's file list plus the `files.read` import;
/// in native tests, a [`MemoryFiles`]. Rules written against `&mut dyn
/// FileSet` run unchanged in both.
pub trait FileSet {
    /// Every file of the resource (path + size); the host lists them by path.
    fn entries(&self) -> &[FileEntry];

    /// Up to `len` bytes of `path` from `offset`; fewer only at end of file
    /// (empty at or past the end). Reads count against the call's budget.
    fn read(&mut self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, ReadError>;

    /// The listing entry of `path`.
    fn entry(&self, path: &str) -> Option<&FileEntry> {
        self.entries().iter().find(|entry| entry.path == path)
    }

    /// The whole of `path`, read in host-sized chunks and never past its
    /// listed size. A file listed as larger than `max_bytes` is refused from
    /// its listed size, before any byte is read.
    fn read_all(&mut self, path: &str, max_bytes: u64) -> Result<Vec<u8>, FileError> {
        let Some(size) = self.entry(path).map(|entry| entry.size) else {
            return Err(FileError::NotListed { path: path.to_string() });
        };
        if size > max_bytes {
            return Err(FileError::TooLarge { path: path.to_string(), size, limit: max_bytes });
        }
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let mut bytes = Vec::with_capacity(size);
        while bytes.len() < size {
            let wanted = u32::try_from(size - bytes.len()).map_or(MAX_READ_CHUNK, |left| left.min(MAX_READ_CHUNK));
            let chunk = self
                .read(path, bytes.len() as u64, wanted)
                .map_err(|error| FileError::Read { path: path.to_string(), error })?;
            if chunk.is_empty() {
                break;
            }
            let taken = chunk.len().min(wanted as usize);
            bytes.extend_from_slice(&chunk[..taken]);
        }
        Ok(bytes)
    }

    /// [`read_all`](Self::read_all), then a UTF-8 check whose error names the
    /// byte offset and line of the first invalid byte.
    fn read_text(&mut self, path: &str, max_bytes: u64) -> Result<String, FileError> {
        let bytes = self.read_all(path, max_bytes)?;
        String::from_utf8(bytes).map_err(|error| {
            let offset = error.utf8_error().valid_up_to();
            let line = text::line_at(&error.as_bytes()[..offset]);
            FileError::NotUtf8 { path: path.to_string(), offset, line }
        })
    }
}

/// Why [`FileSet::read_all`] or [`FileSet::read_text`] failed. Its `Display`
/// is a sentence for the person who uploaded the file; `Problem::from` puts
/// it on the file's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileError {
    /// The file is not in the resource.
    NotListed { path: String },
    /// The listed size is over the limit; nothing was read.
    TooLarge { path: String, size: u64, limit: u64 },
    /// The host could not serve the bytes.
    Read { path: String, error: ReadError },
    /// The bytes are not UTF-8 (`offset` of the first invalid byte, its 1-based `line`).
    NotUtf8 { path: String, offset: usize, line: usize },
}

impl FileError {
    /// The file the error is about.
    pub fn path(&self) -> &str {
        match self {
            Self::NotListed { path } | Self::TooLarge { path, .. } | Self::Read { path, .. } => path,
            Self::NotUtf8 { path, .. } => path,
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotListed { path } => write!(f, "{path} is missing"),
            Self::TooLarge { path, size, limit } => {
                write!(f, "{path} is {size} bytes; the limit is {limit} bytes{}", text::human_size(*limit))
            }
            Self::Read { path, error: ReadError::NotFound } => {
                write!(f, "{path} is listed but could not be found when reading it; retry the upload")
            }
            Self::Read { path, error: ReadError::BudgetExceeded(budget) } => {
                write!(f, "{path} could not be read: the handler's read budget of {budget} bytes is used up")
            }
            Self::Read { path, error: ReadError::Storage(reason) } => {
                write!(f, "{path} could not be read from storage: {reason}")
            }
            Self::NotUtf8 { path, offset, line } => f.write_str(&text::not_utf8_message(path, *offset, *line)),
        }
    }
}

impl std::error::Error for FileError {}

impl From<FileError> for Problem {
    /// A missing file is a problem of the resource (it has no such file to
    /// point at), saying what to add; the others are about their file.
    fn from(error: FileError) -> Self {
        match &error {
            FileError::NotListed { path } => Problem::new(format!("{error}: add {path} to the resource")),
            _ => Problem::at(error.path(), error.to_string()),
        }
    }
}

/// A [`FileSet`] in memory, for native tests and tools: it answers like the
/// host's `files.read` (1 MiB per read, `NotFound`, an optional read budget)
/// and counts the bytes read, so a test can check what a rule never reads.
#[derive(Debug, Clone, Default)]
pub struct MemoryFiles {
    entries: Vec<FileEntry>,
    contents: BTreeMap<String, Vec<u8>>,
    read_budget: Option<u64>,
    read_remaining: u64,
    bytes_read: u64,
}

impl MemoryFiles {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a file.
    pub fn insert(&mut self, path: impl Into<String>, content: impl Into<Vec<u8>>) -> &mut Self {
        let path = path.into();
        let content = content.into();
        self.list(path.clone(), content.len() as u64);
        self.contents.insert(path, content);
        self
    }

    /// [`insert`](Self::insert), by value, for building a set in one expression.
    pub fn with(mut self, path: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        self.insert(path, content);
        self
    }

    /// Lists `path` with `size` bytes but keeps no content: reading it answers
    /// [`ReadError::NotFound`], as when storage loses a file between the
    /// listing and the read.
    pub fn list_only(mut self, path: impl Into<String>, size: u64) -> Self {
        let path = path.into();
        self.contents.remove(&path);
        self.list(path, size);
        self
    }

    /// Limits the bytes all reads together may return, like the host's
    /// `handlers.read_budget_bytes`; past it, reads fail with
    /// [`ReadError::BudgetExceeded`].
    pub fn with_read_budget(mut self, bytes: u64) -> Self {
        self.read_budget = Some(bytes);
        self.read_remaining = bytes;
        self
    }

    /// Bytes returned by `read` so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Every regular file under `dir`, with `/`-separated relative paths (for
    /// tests over fixture folders and local tools).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_dir(dir: impl AsRef<std::path::Path>) -> std::io::Result<Self> {
        fn walk(files: &mut MemoryFiles, root: &std::path::Path, dir: &std::path::Path) -> std::io::Result<()> {
            let mut children: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
            children.sort_by_key(|entry| entry.file_name());
            for child in children {
                let path = child.path();
                if child.file_type()?.is_dir() {
                    walk(files, root, &path)?;
                } else if path.is_file() {
                    let relative = path.strip_prefix(root).unwrap_or(&path);
                    let name: Vec<String> =
                        relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                    files.insert(name.join("/"), std::fs::read(&path)?);
                }
            }
            Ok(())
        }
        let mut files = Self::new();
        walk(&mut files, dir.as_ref(), dir.as_ref())?;
        Ok(files)
    }

    fn list(&mut self, path: String, size: u64) {
        self.entries.retain(|entry| entry.path != path);
        self.entries.push(FileEntry { path, size });
        self.entries.sort();
    }
}

impl FileSet for MemoryFiles {
    fn entries(&self) -> &[FileEntry] {
        &self.entries
    }

    fn read(&mut self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, ReadError> {
        let content = self.contents.get(path).ok_or(ReadError::NotFound)?;
        let len = len.min(MAX_READ_CHUNK) as usize;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(content.len());
        let end = start.saturating_add(len).min(content.len());
        let chunk = content[start..end].to_vec();
        if let Some(budget) = self.read_budget {
            if chunk.len() as u64 > self.read_remaining {
                self.read_remaining = 0;
                return Err(ReadError::BudgetExceeded(budget));
            }
            self.read_remaining -= chunk.len() as u64;
        }
        self.bytes_read += chunk.len() as u64;
        Ok(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_all_reads_in_chunks_up_to_the_listed_size() {
        let big = vec![7u8; (MAX_READ_CHUNK as usize) * 2 + 5];
        let mut files = MemoryFiles::new().with("big.bin", big.clone()).with("a.txt", "hello");
        assert_eq!(files.read_all("big.bin", u64::MAX).unwrap(), big);
        assert_eq!(files.read_text("a.txt", 5).unwrap(), "hello");
        assert_eq!(files.entries().iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["a.txt", "big.bin"]);
    }

    #[test]
    fn oversized_files_are_refused_before_reading() {
        let mut files = MemoryFiles::new().with("a.txt", vec![b'a'; 2048]);
        let error = files.read_all("a.txt", 1024).unwrap_err();
        assert_eq!(error.to_string(), "a.txt is 2048 bytes; the limit is 1024 bytes (1 KiB)");
        assert_eq!(files.bytes_read(), 0);
    }

    #[test]
    fn errors_name_the_file() {
        let mut files = MemoryFiles::new().list_only("gone.md", 3).with("bad.md", b"ok\n\xff".to_vec());
        assert_eq!(files.read_all("nope.md", 10).unwrap_err().to_string(), "nope.md is missing");
        let gone = files.read_all("gone.md", 10).unwrap_err();
        assert!(gone.to_string().contains("could not be found"), "{gone}");
        let problem = Problem::from(files.read_text("bad.md", 10).unwrap_err());
        assert_eq!(problem.path.as_deref(), Some("bad.md"));
        assert!(problem.message.contains("byte offset 3 (line 2)"), "{}", problem.message);
    }

    #[test]
    fn the_read_budget_behaves_like_the_host() {
        let mut files = MemoryFiles::new().with("a", vec![0u8; 10]).with("b", vec![0u8; 10]).with_read_budget(15);
        assert!(files.read_all("a", 100).is_ok());
        let error = files.read_all("b", 100).unwrap_err();
        assert_eq!(error, FileError::Read { path: "b".into(), error: ReadError::BudgetExceeded(15) });
        assert!(error.to_string().contains("read budget of 15 bytes"));
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn from_dir_lists_nested_files_with_slashes() {
        let dir = std::env::temp_dir().join(format!("dial-sdk-from-dir-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
        std::fs::write(dir.join("top.txt"), "t").unwrap();
        std::fs::write(dir.join("sub/deeper/x.md"), "x").unwrap();
        let files = MemoryFiles::from_dir(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let paths: Vec<&str> = files.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["sub/deeper/x.md", "top.txt"]);
    }
}
