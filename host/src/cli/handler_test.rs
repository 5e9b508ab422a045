//! Running a handler on a folder of the local disk, as `dial-host handler
//! test DIR FILE.wasm` does: the same runtime, sandbox, path rules and limits
//! as a PUT, without a server.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::config::{FoldersConfig, HandlersConfig};
use crate::folders::FolderLimits;
use crate::folders::names::check_file_path;
use crate::handlers::files::{FileSource, ReadError, ReadFuture};
use crate::handlers::{
    Checked, FileEntry, Handler, HandlerError, HandlerSource, LoadError, Problem, ResourceInfo, Runtime,
};

/// The files under a local directory, read on demand from disk.
#[derive(Debug)]
pub struct DirectoryFiles {
    root: PathBuf,
    entries: Vec<FileEntry>,
}

impl DirectoryFiles {
    /// Every regular file under `root` (symbolic links are not followed),
    /// with `/`-separated relative paths, sorted.
    pub fn scan(root: &Path) -> std::io::Result<Self> {
        let mut entries = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    pending.push(entry.path());
                } else if kind.is_file() {
                    let relative = entry.path().strip_prefix(root).expect("walked from root").to_path_buf();
                    let path = relative.iter().map(|part| part.to_string_lossy()).collect::<Vec<_>>().join("/");
                    entries.push(FileEntry { path, size: entry.metadata()?.len() });
                }
            }
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Self { root: root.to_path_buf(), entries })
    }

    pub fn entries(&self) -> &[FileEntry] {
        &self.entries
    }
}

impl FileSource for DirectoryFiles {
    fn read<'a>(&'a self, path: &'a str, offset: u64, len: u32) -> ReadFuture<'a> {
        // Only listed files: a handler cannot walk out of the folder.
        let known = self.entries.iter().any(|entry| entry.path == path);
        let file = self.root.join(path);
        Box::pin(async move {
            if !known {
                return Err(ReadError::NotFound);
            }
            tokio::task::spawn_blocking(move || {
                let mut file = std::fs::File::open(file).map_err(|e| ReadError::Storage(e.to_string()))?;
                file.seek(SeekFrom::Start(offset)).map_err(|e| ReadError::Storage(e.to_string()))?;
                let mut buffer = Vec::with_capacity(len as usize);
                file.take(u64::from(len)).read_to_end(&mut buffer).map_err(|e| ReadError::Storage(e.to_string()))?;
                Ok(Bytes::from(buffer))
            })
            .await
            .map_err(|e| ReadError::Storage(e.to_string()))?
        })
    }
}

/// What a handler said about a local folder.
#[derive(Debug)]
pub struct FolderReport {
    pub handler: Handler,
    /// Paths the host itself would refuse, and limits the folder exceeds.
    pub host_problems: Vec<Problem>,
    /// What the handler said, as the server would ask it on a commit.
    pub checked: Checked,
}

impl FolderReport {
    pub fn is_valid(&self) -> bool {
        self.host_problems.is_empty() && matches!(self.checked, Checked::Valid { .. })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LocalTestError {
    #[error("cannot read {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{0}")]
    Load(#[from] LoadError),
    #[error("{0}")]
    Call(#[from] HandlerError),
}

/// Loads `wasm` and asks it what a commit would (`check`, or `validate` then
/// `build-marker-metadata` for 1.0/1.1 components) about the
/// folder `dir`, named like its last path component. `strict` turns warnings
/// into problems as `[handlers.types.<group>] strict = true` does.
pub async fn test_folder(
    runtime: Arc<Runtime>,
    wasm: Vec<u8>,
    source: HandlerSource,
    dir: &Path,
    strict: bool,
) -> Result<FolderReport, LocalTestError> {
    let loaded = runtime.load(wasm, source).await?;
    let mut config = HandlersConfig::default();
    if strict {
        config
            .types
            .insert(loaded.description().group.clone(), crate::config::TypeSettings { strict, ..Default::default() });
    }
    let handler = Handler::new(loaded, runtime, &config);

    let scan_dir = dir.to_path_buf();
    let files = tokio::task::spawn_blocking(move || DirectoryFiles::scan(&scan_dir))
        .await
        .expect("scanning the folder panicked")
        .map_err(|error| LocalTestError::Io { path: dir.to_path_buf(), error })?;
    let entries = files.entries().to_vec();
    let host_problems = host_problems(&entries, FolderLimits::resolve(&FoldersConfig::default(), &handler, None));

    let name = dir.canonicalize().ok().and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    let name = name.unwrap_or_else(|| "resource".into());
    let resource = ResourceInfo { name: name.clone(), path: name };
    let files: Arc<dyn FileSource> = Arc::new(files);
    let checked = handler.check(&resource, &entries, files).await?;
    Ok(FolderReport { handler, host_problems, checked })
}

/// What the host checks before a handler sees a folder: path rules and the
/// type's limits with the host defaults.
fn host_problems(entries: &[FileEntry], limits: FolderLimits) -> Vec<Problem> {
    let mut problems: Vec<Problem> = entries
        .iter()
        .filter_map(|entry| check_file_path(&entry.path).err().map(|e| (entry, e.to_string())))
        .chain(
            entries
                .iter()
                .filter(|entry| entry.size > limits.max_file_bytes)
                .map(|entry| (entry, format!("file is larger than {} bytes", limits.max_file_bytes))),
        )
        .map(|(entry, message)| Problem { path: Some(entry.path.clone()), message })
        .collect();
    if entries.len() > limits.max_files as usize {
        problems.push(Problem { path: None, message: format!("more than {} files", limits.max_files) });
    }
    let total: u64 = entries.iter().map(|entry| entry.size).sum();
    if total > limits.max_total_bytes {
        problems.push(Problem { path: None, message: format!("more than {} bytes in total", limits.max_total_bytes) });
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_listed_files_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("SKILL.md"), "hello world").unwrap();
        std::fs::write(dir.path().join("scripts/run.py"), "print()").unwrap();
        let files = DirectoryFiles::scan(dir.path()).unwrap();
        let paths: Vec<_> = files.entries().iter().map(|e| (e.path.as_str(), e.size)).collect();
        assert_eq!(paths, [("SKILL.md", 11), ("scripts/run.py", 7)]);
        assert_eq!(files.read("SKILL.md", 6, 100).await.unwrap(), Bytes::from_static(b"world"));
        assert_eq!(files.read("SKILL.md", 20, 100).await.unwrap(), Bytes::new());
        assert_eq!(files.read("../secret", 0, 10).await, Err(ReadError::NotFound));
    }

    #[test]
    fn host_rules_apply_before_the_handler() {
        let limits = FolderLimits { max_file_bytes: 10, max_files: 1, max_total_bytes: 11 };
        let entries = [FileEntry { path: "v/x".into(), size: 1 }, FileEntry { path: "big.bin".into(), size: 11 }];
        let problems = host_problems(&entries, limits);
        let messages: Vec<_> = problems.iter().map(|p| (p.path.as_deref(), p.message.as_str())).collect();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages[0].1.contains("'v' is reserved"), "{messages:?}");
        assert_eq!(messages[1], (Some("big.bin"), "file is larger than 10 bytes"));
    }
}
