//! Single-file changes inside a resource: a PUT or DELETE of one file,
//! built optimistically on the current version and rebased under the
//! resource lock when another commit landed first.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures_util::Stream;
use object_store::path::Path;

use super::engine::{Committed, FolderEngine};
use super::error::FolderError;
use super::marker::{FileRecord, ResourceMarker, aggregate_etag};
use super::markers::ReadMarker;
use super::names::{FoldedNames, check_file_path, check_no_file_folder_clash};
use super::node::Node;
use super::policy::FolderLimits;
use super::staging::{ByteCounter, Deadline, Uncommitted, write_streamed};
use crate::clock::{new_id, now_ms};
use crate::etag::Preconditions;
use crate::events::EventAction;
use crate::handlers::{Handler, Mutation};
use crate::keys::WritingKey;

/// A single-file change: the file it adds, replaces or removes, the type's
/// handler, the request's conditions, who makes it, and the per-request key
/// the upload came with.
struct FileChange<'a> {
    path: &'a str,
    op: Mutation,
    handler: &'a Handler,
    conditions: &'a Preconditions,
    author: Option<String>,
    key: Option<WritingKey>,
}

impl FolderEngine {
    /// Replaces or adds one file: a new version with the other files copied
    /// server-side. `key`: the per-request key the upload came with, if
    /// any (the change commits only while it lives).
    #[allow(clippy::too_many_arguments)]
    pub async fn put_file<S, E>(
        &self,
        node: &Node,
        path: &str,
        body: S,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
        key: Option<WritingKey>,
    ) -> Result<Committed, FolderError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        check_file_path(path)?;
        let change = FileChange { path, op: Mutation::Put, handler, conditions, author, key };
        self.mutate_file(node, change, Some(body)).await
    }

    /// Removes one file (never `SKILL.md` for skills: the handler decides).
    pub async fn delete_file(
        &self,
        node: &Node,
        path: &str,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
    ) -> Result<Committed, FolderError> {
        let change = FileChange { path, op: Mutation::Delete, handler, conditions, author, key: None };
        self.mutate_file::<futures_util::stream::Empty<Result<Bytes, std::io::Error>>, std::io::Error>(
            node, change, None,
        )
        .await
    }

    /// A single-file change, optimistic like a whole PUT: the new content
    /// is streamed and the new version built (server-side copies of the
    /// other files, handler validation) without any lock. Only the re-read
    /// and the marker write happen under the resource lock — and, when
    /// another request committed meanwhile, the rebuild of the version on
    /// that one (copying only the files that differ), there, where no other
    /// committer can land first. So a change without conditions is never
    /// refused because others write at the same time (it is no
    /// compare-and-swap); with `If-Match`, the conditions are checked again
    /// on whatever it is rebuilt on. Where the lock is not shared (instances
    /// without Redis, a lease that ran out) the marker write can still lose;
    /// the change is then rebuilt again, until the commit deadline.
    async fn mutate_file<S, E>(
        &self,
        node: &Node,
        change: FileChange<'_>,
        body: Option<S>,
    ) -> Result<Committed, FolderError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let (path, op, handler, conditions) = (change.path, change.op, change.handler, change.conditions);
        let mut deadline = self.commit_deadline();
        if let Some(key) = &change.key {
            deadline = deadline.bounded_by_key(key.expires_at());
        }
        let limits = self.limits(handler);
        // Fail fast on what cannot succeed; all of it is checked again at the commit.
        let based_on = self.live_read(node).await?;
        conditions.check_write(Some(&based_on.marker.etag))?;
        if op == Mutation::Delete && !based_on.marker.files.contains_key(path) {
            return Err(FolderError::NotFound(format!("{}/files/{path}", node.item_url())));
        }
        if op == Mutation::Put {
            node.check_file_location(path, &self.path_limits)?;
            check_no_file_folder_clash(based_on.marker.files.keys(), path)?;
            FoldedNames::of(based_on.marker.files.keys()).add(path)?;
        }
        if let Err(problem) = handler.validate_file_mutation(path, op).await? {
            let type_name = handler.description().type_name.clone();
            return Err(FolderError::Invalid { type_name, problems: vec![problem] });
        }
        // One new version, the upload streamed straight into it; a rebuild
        // changes it in place (it is nobody else's until the commit).
        let version = new_id();
        let journal_entry = self.journal.record(node.paths.base(), Some(&version)).await?;
        let mut pending = Uncommitted::new(self.store.clone(), node.clone(), version, journal_entry);
        let committed = self.build_and_commit(node, &change, body, based_on, &mut pending, deadline, &limits).await;
        if let Err(error) = &committed {
            pending.failed_with(error);
            pending.discard().await;
        }
        committed
    }

    /// The new version of [`FolderEngine::mutate_file`] written into
    /// `pending`, checked and committed.
    #[allow(clippy::too_many_arguments)]
    async fn build_and_commit<S, E>(
        &self,
        node: &Node,
        change: &FileChange<'_>,
        body: Option<S>,
        mut based_on: ReadMarker<ResourceMarker>,
        pending: &mut Uncommitted,
        deadline: Deadline,
        limits: &FolderLimits,
    ) -> Result<Committed, FolderError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let (path, op, handler, conditions) = (change.path, change.op, change.handler, change.conditions);
        let version = pending.version.clone();
        let uploaded = match body {
            Some(body) => {
                let others = based_on.marker.files.iter().filter(|(p, _)| p.as_str() != path).map(|(_, f)| f.size);
                let target = node.paths.file(&version, path);
                let counter = ByteCounter { path, limits, before: others.sum(), size: 0 };
                Some(write_streamed(&self.store, target, Vec::new(), body, counter, deadline).await?)
            }
            None => None,
        };
        let mut files =
            self.build_file_version(node, &based_on.marker, None, &version, path, uploaded.as_ref(), limits).await?;
        deadline.check()?;
        let mut checked = self.check_with_handler(node, &version, &files, handler).await?;

        let _lock = self.locks.acquire(&node.resource_lock_key()).await?;
        loop {
            deadline.check()?;
            let current = self.live_read(node).await?;
            conditions.check_write(Some(&current.marker.etag))?;
            // Built on the version still current (a change of the marker that
            // keeps it, like the sweep expiring history, needs no rebuild).
            if current.marker.current_version != based_on.marker.current_version {
                if op == Mutation::Delete && !current.marker.files.contains_key(path) {
                    return Err(FolderError::NotFound(format!("{}/files/{path}", node.item_url())));
                }
                files = self
                    .build_file_version(node, &current.marker, Some(&files), &version, path, uploaded.as_ref(), limits)
                    .await?;
                deadline.check()?;
                checked = self.check_with_handler(node, &version, &files, handler).await?;
                based_on = current;
                continue;
            }
            let history = self.supersede(node, Some(&current.marker), self.retention(handler)).await?;
            deadline.check()?;
            if let Some(key) = &change.key {
                key.ensure_alive().await?;
            }
            let now = now_ms();
            let (metadata, warnings) = checked.clone();
            let number = current.marker.next_number();
            let marker = ResourceMarker {
                number: Some(number),
                last_number: Some(number),
                current_version: version.clone(),
                etag: aggregate_etag(&files),
                updated_at: now,
                commit_id: new_id(),
                metadata,
                warnings,
                files: files.clone(),
                committed_at: Some(now),
                committed_by: change.author.clone(),
                history,
                ..current.marker.clone()
            };
            pending.committing();
            match self.write_marker(node, Some(&current.marker), &marker, Some(current.version)).await {
                Ok(()) => {}
                // Lost to a committer this lock does not exclude: rebuild on
                // what it committed.
                Err(FolderError::Precondition(_)) => {
                    pending.not_committed();
                    continue;
                }
                Err(error) => return Err(error),
            }
            pending.committed(&self.journal);
            self.publish(EventAction::Update, node, Some(&marker.etag)).await;
            return Ok(Committed {
                version: marker.current_version.clone(),
                warnings: marker.warnings.clone(),
                marker,
                created: false,
            });
        }
    }

    /// The live marker of `node` with its conditional-write token; 404 when
    /// there is none.
    pub(super) async fn live_read(&self, node: &Node) -> Result<ReadMarker<ResourceMarker>, FolderError> {
        self.read_resource_marker(node)
            .await?
            .filter(|r| r.marker.is_ready())
            .ok_or_else(|| FolderError::NotFound(node.url.to_string()))
    }

    /// Fills `version` with the files of `based_on` except `path`, plus the
    /// uploaded content (streamed into `version` already); checks the limits
    /// again, since the other files may have changed. `built` is what
    /// `version` holds from an earlier build on another version: only the
    /// files that differ are copied, and those `based_on` no longer has are
    /// removed first (one may be where a new directory goes).
    #[allow(clippy::too_many_arguments)]
    async fn build_file_version(
        &self,
        node: &Node,
        based_on: &ResourceMarker,
        built: Option<&BTreeMap<String, FileRecord>>,
        version: &str,
        path: &str,
        uploaded: Option<&FileRecord>,
        limits: &FolderLimits,
    ) -> Result<BTreeMap<String, FileRecord>, FolderError> {
        let mut files = based_on.files.clone();
        files.remove(path);
        if let Some(record) = uploaded {
            // Checked again: the version rebuilt on may hold new files.
            check_no_file_folder_clash(files.keys(), path)?;
            FoldedNames::of(files.keys()).add(path)?;
            if files.len() >= limits.max_files as usize {
                return Err(FolderError::TooManyFiles { limit: limits.max_files });
            }
            let total = files.values().map(|f| f.size).sum::<u64>() + record.size;
            if total > limits.max_total_bytes {
                return Err(FolderError::TooLarge(format!(
                    "The resource exceeds the limit of {} bytes in total",
                    limits.max_total_bytes
                )));
            }
        }
        let has = |file: &str, record: &FileRecord| built.and_then(|built| built.get(file)) == Some(record);
        if let Some(built) = built {
            let stale = built.keys().filter(|file| file.as_str() != path && !files.contains_key(*file));
            let stale: Vec<Path> = stale.map(|file| node.paths.file(version, file)).collect();
            if !stale.is_empty() {
                crate::storage::delete_all(self.store.as_ref(), stale).await?;
            }
        }
        let copies = files
            .iter()
            .filter(|(file, record)| !has(file, record))
            .map(|(file, _)| (node.paths.file(&based_on.current_version, file), node.paths.file(version, file)));
        self.copy_all(copies.collect()).await?;
        if let Some(record) = uploaded {
            files.insert(path.to_string(), record.clone());
        }
        Ok(files)
    }
}
