//! What a version's files hash to with SHA-256, as agents verify them (the
//! MCP Skills Extension's `digest`): computed while an upload streams and
//! kept in the version's file table ([`FileRecord::sha256`]); a version
//! written before that gets them once, here, without a new commit and
//! without changing its etag (the aggregate etag is over MD5s). Marker
//! metadata a handler learned to write later (the skill frontmatter agents
//! take verbatim) is derived once the same way.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use object_store::ObjectStoreExt;

use super::archive::{ARCHIVE_FORMAT, archive_sha256};
use super::engine::FolderEngine;
use super::error::FolderError;
use super::marker::{ArchiveDigest, ResourceMarker};
use super::node::Node;
use crate::handlers::Handler;
use crate::hashing::DigestStream;

impl FolderEngine {
    /// `marker` (a live resource's, as read) with the SHA-256 of every file
    /// of its current version. Files that lack one are read and hashed, and
    /// what was computed is written into the marker — only if it is still
    /// the one read (a conditional write: a commit meanwhile wins, and its
    /// own files carry their digests), never as a commit: no event, the
    /// same etag and commit id.
    pub async fn file_digests(&self, node: &Node, marker: ResourceMarker) -> Result<ResourceMarker, FolderError> {
        let missing: Vec<String> =
            marker.files.iter().filter(|(_, record)| record.sha256.is_none()).map(|(path, _)| path.clone()).collect();
        if missing.is_empty() {
            return Ok(marker);
        }
        let mut computed = BTreeMap::new();
        for path in missing {
            let object = node.paths.file(&marker.current_version, &path);
            let mut hasher = DigestStream::md5_and_sha256();
            let mut body = self.store.get(&object).await?.into_stream();
            while let Some(chunk) = body.next().await {
                hasher.update(chunk?).await?;
            }
            computed.insert(path, hasher.finish().await?.sha256);
        }
        let mut hashed = marker;
        for (path, sha256) in &computed {
            if let Some(record) = hashed.files.get_mut(path) {
                record.sha256.clone_from(sha256);
            }
        }
        self.keep(node, &hashed, |kept| {
            for (path, record) in &mut kept.files {
                if record.sha256.is_none() {
                    record.sha256 = computed.get(path).cloned().flatten();
                }
            }
        })
        .await?;
        Ok(hashed)
    }

    /// The SHA-256 of the archive served for `marker`'s current version
    /// ([`archive_sha256`]): computed once (the whole archive is built and
    /// hashed) and kept in the marker, as file digests are.
    pub async fn archive_digest(&self, node: &Node, marker: &ResourceMarker) -> Result<String, FolderError> {
        if let Some(sha256) = marker.archive_sha256() {
            return Ok(sha256.to_string());
        }
        let sha256 = archive_sha256(self.store.clone(), node.paths.clone(), marker.clone()).await.map_err(|error| {
            FolderError::Storage(object_store::Error::Generic { store: "archive", source: Box::new(error) })
        })?;
        let digest = ArchiveDigest { version: marker.current_version.clone(), format: ARCHIVE_FORMAT, sha256 };
        let kept = digest.clone();
        self.keep(node, marker, move |stored| stored.archive = Some(kept)).await?;
        Ok(digest.sha256)
    }

    /// The marker metadata entry `key` of `marker`'s current version: as
    /// kept, or — for a version committed before its handler wrote that
    /// entry — derived once by running the handler over the version's files
    /// and kept as digests are. A handler that gives no such entry (or no
    /// longer accepts the version) is remembered as an empty entry: `None`,
    /// and not asked again.
    pub async fn kept_metadata(
        &self,
        node: &Node,
        marker: &ResourceMarker,
        handler: &Handler,
        key: &str,
    ) -> Result<Option<String>, FolderError> {
        if let Some(value) = marker.metadata.get(key) {
            return Ok((!value.is_empty()).then(|| value.clone()));
        }
        let value = match self.check_with_handler(node, &marker.current_version, &marker.files, handler).await {
            Ok((metadata, _)) => metadata.get(key).cloned().unwrap_or_default(),
            Err(FolderError::Invalid { .. }) => String::new(),
            Err(error) => return Err(error),
        };
        let (kept_key, kept) = (key.to_string(), value.clone());
        self.keep(node, marker, move |stored| {
            stored.metadata.entry(kept_key).or_insert(kept);
        })
        .await?;
        Ok((!value.is_empty()).then_some(value))
    }

    /// Applies `edit` to the stored marker if it is still `read` (the same
    /// commit of the same version) and writes it back conditionally, as no
    /// commit: a commit meanwhile wins, and the edit is simply not kept.
    async fn keep(
        &self,
        node: &Node,
        read: &ResourceMarker,
        edit: impl FnOnce(&mut ResourceMarker),
    ) -> Result<(), FolderError> {
        let _lock = self.locks.acquire(&node.resource_lock_key()).await?;
        let Some(stored) = self.read_resource_marker(node).await? else { return Ok(()) };
        if stored.marker.commit_id != read.commit_id || stored.marker.current_version != read.current_version {
            return Ok(());
        }
        let mut kept = stored.marker.clone();
        edit(&mut kept);
        match self.write_marker(node, Some(&stored.marker), &kept, Some(stored.version)).await {
            Ok(()) | Err(FolderError::Precondition(_)) => Ok(()),
            Err(error) => Err(error),
        }
    }
}
