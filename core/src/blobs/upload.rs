//! Staging and the commit of a v1 write: the content in memory up to the
//! upload buffer, a multipart upload beyond it; then, under the resource
//! lock, one conditional put of content ‖ trailer, or the completion of the
//! multipart upload (see [`super::service`]).

use std::fmt::Display;

use bytes::Bytes;
use bytes::BytesMut;
use futures_util::{Stream, StreamExt};
use md5::{Digest, Md5};
use object_store::path::Path;
use object_store::{PutMode, PutMultipartOptions, PutOptions, PutPayload, WriteMultipart};

use super::json::{JSON_CONTENT_TYPE, check_content_type};
use super::read::Stored;
use super::service::{BlobService, Committed, MAX_ATTEMPTS, folder_in_the_way};
use super::trailer::{self, ItemMeta};
use super::{BlobError, BlobGroup, BlobTarget};
use crate::clock::now_ms;
use crate::dependencies::DeclarationPolicy;
use crate::etag::Preconditions;
use crate::hashing::{DigestStream, hex};
use crate::keys::{KeyLapsed, WritingKey};

/// An application's upload stops when its key expires.
fn check_expiry(key: Option<&WritingKey>) -> Result<(), BlobError> {
    match key {
        Some(key) if now_ms() >= key.expires_at() => Err(KeyLapsed::Ended.into()),
        _ => Ok(()),
    }
}

/// Parts of one multipart upload in flight at once.
const MAX_PARTS_IN_FLIGHT: usize = 4;

/// Content ready to be committed.
pub(super) struct Staged {
    pub(super) body: StagedBody,
    pub(super) etag: String,
    pub(super) size: u64,
    pub(super) content_type: String,
}

pub(super) enum StagedBody {
    Memory(Vec<Bytes>),
    /// Parts uploaded, not completed.
    Multipart(WriteMultipart),
}

impl BlobService {
    // ----- writes ------------------------------------------------------

    /// Stores a JSON resource (prompt, conversation, application) read from
    /// `body`: at most `max_size` bytes, must be UTF-8 JSON whatever the
    /// request's content type; applications are normalised and validated.
    /// `policy`: what the writer may declare in an application's
    /// `resource_dependencies`; `key`: the per-request key the write came
    /// with, if any (it commits only while the key lives).
    #[allow(clippy::too_many_arguments)]
    pub async fn put_json<S, E>(
        &self,
        target: &BlobTarget,
        body: S,
        declared_length: Option<u64>,
        conditions: &Preconditions,
        author: Option<String>,
        policy: &DeclarationPolicy,
        key: Option<&WritingKey>,
    ) -> Result<Committed, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: Display,
    {
        if target.url.is_folder() {
            return Err(BlobError::FolderNotAllowed(target.url.to_string()));
        }
        if !target.group().is_json() {
            return Err(BlobError::BadRequest(format!("{} is not a JSON resource", target.url)));
        }
        self.path_limits.check(target.path()).map_err(|e| BlobError::BadRequest(e.to_string()))?;
        let bytes = read_limited(body, declared_length, self.limits.max_size, key).await?;
        let content = self.check_json(target.group(), bytes, policy.clone()).await?;
        let staged = Staged {
            etag: hex(&Md5::digest(&content)),
            size: content.len() as u64,
            content_type: JSON_CONTENT_TYPE.into(),
            body: StagedBody::Memory(vec![content]),
        };
        self.commit(target, staged, conditions, author, key).await
    }

    /// Stores a file streamed from `body` (at most `max_file_size` bytes),
    /// hashing while streaming; never holds more than the upload buffer.
    /// `key`: as for [`BlobService::put_json`].
    pub async fn put_file<S, E>(
        &self,
        target: &BlobTarget,
        body: S,
        content_type: Option<&str>,
        conditions: &Preconditions,
        author: Option<String>,
        key: Option<&WritingKey>,
    ) -> Result<Committed, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: Display,
    {
        if target.url.is_folder() {
            return Err(BlobError::FolderNotAllowed(target.url.to_string()));
        }
        if target.group() != BlobGroup::Files {
            return Err(BlobError::BadRequest(format!("{} is not a file", target.url)));
        }
        self.path_limits.check(target.path()).map_err(|e| BlobError::BadRequest(e.to_string()))?;
        let content_type = check_content_type(content_type)?;
        // Fail fast on a condition that cannot hold; checked again at the commit.
        let current = self.read_stored(target.path()).await?;
        conditions.check_write(current.as_ref().map(|c| c.meta.etag.as_str()))?;
        let staged = self.stage_stream(target, body, content_type, key).await?;
        self.commit(target, staged, conditions, author, key).await
    }

    /// Streams `body` into memory up to the upload buffer, into a multipart
    /// upload beyond it; counts, limits and hashes on the way.
    pub(super) async fn stage_stream<S, E>(
        &self,
        target: &BlobTarget,
        mut body: S,
        content_type: String,
        key: Option<&WritingKey>,
    ) -> Result<Staged, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: Display,
    {
        let max = self.limits.max_file_size;
        let mut hasher = DigestStream::md5();
        let mut size = 0u64;
        let mut buffered: Vec<Bytes> = Vec::new();
        let mut buffered_len = 0usize;
        let mut upload: Option<WriteMultipart> = None;
        let streamed: Result<(), BlobError> = async {
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| BlobError::BadRequest(format!("Failed to read the upload: {e}")))?;
                check_expiry(key)?;
                size += chunk.len() as u64;
                if size > max {
                    return Err(BlobError::UploadTooLarge { max });
                }
                hasher.update(chunk.clone()).await?;
                match upload.as_mut() {
                    Some(writer) => {
                        writer.wait_for_capacity(MAX_PARTS_IN_FLIGHT).await?;
                        writer.put(chunk);
                    }
                    None => {
                        buffered_len += chunk.len();
                        buffered.push(chunk);
                        if buffered_len > self.upload_buffer {
                            let started = match self
                                .store
                                .put_multipart_opts(target.path(), PutMultipartOptions::default())
                                .await
                            {
                                Ok(started) => started,
                                Err(error) if self.keeps_empty_dirs => {
                                    return Err(self.item_in_the_way(target).await?.unwrap_or(error.into()));
                                }
                                Err(error) => return Err(error.into()),
                            };
                            let mut writer = WriteMultipart::new_with_chunk_size(started, self.upload_buffer);
                            for chunk in buffered.drain(..) {
                                writer.put(chunk);
                            }
                            upload = Some(writer);
                        }
                    }
                }
            }
            // Parts in flight finish outside the lock; only the last one and
            // the completion happen under it.
            if let Some(writer) = upload.as_mut() {
                writer.wait_for_capacity(1).await?;
            }
            Ok(())
        }
        .await;
        if let Err(error) = streamed {
            if let Some(writer) = upload {
                let _ = writer.abort().await;
            }
            return Err(error);
        }
        let body = match upload {
            Some(writer) => StagedBody::Multipart(writer),
            None => StagedBody::Memory(buffered),
        };
        Ok(Staged { body, etag: hasher.finish().await?.md5, size, content_type })
    }

    /// The commit: under the resource lock, re-read, check the conditions,
    /// write content ‖ trailer in one step.
    /// An application's write (`key`) commits only while its key lives.
    pub(super) async fn commit(
        &self,
        target: &BlobTarget,
        staged: Staged,
        conditions: &Preconditions,
        author: Option<String>,
        key: Option<&WritingKey>,
    ) -> Result<Committed, BlobError> {
        let Staged { body, etag, size, content_type } = staged;
        let meta_for = |current: Option<&Stored>| {
            let now = now_ms();
            ItemMeta {
                etag: etag.clone(),
                content_length: size,
                content_type: content_type.clone(),
                created_at: current.map_or(now, |c| c.meta.created_at),
                updated_at: now,
                author: current.and_then(|c| c.meta.author.clone()).or_else(|| author.clone()),
            }
        };
        match body {
            StagedBody::Memory(chunks) => {
                let _lock = self.locks.acquire(&target.lock_key()).await?;
                for _ in 0..MAX_ATTEMPTS {
                    let current = self.read_stored(target.path()).await?;
                    conditions.check_write(current.as_ref().map(|c| c.meta.etag.as_str()))?;
                    if let Some(key) = key {
                        key.ensure_alive().await?;
                    }
                    let meta = meta_for(current.as_ref());
                    let payload: PutPayload =
                        chunks.iter().cloned().chain(std::iter::once(trailer::encode(&meta))).collect();
                    let mode = current.as_ref().map_or(PutMode::Create, |c| PutMode::Update(c.version()));
                    match self.put_conditionally(target.path(), payload, mode).await {
                        Ok(()) => return Ok(self.committed(target, meta, current.is_none()).await),
                        // A directory-backed store cannot hold an item where a folder is.
                        Err(object_store::Error::AlreadyExists { .. })
                            if current.is_none() && self.has_items(target.path()).await? =>
                        {
                            return Err(folder_in_the_way(target));
                        }
                        // …nor an item below an item.
                        Err(error) if current.is_none() && self.keeps_empty_dirs => {
                            return Err(self.item_in_the_way(target).await?.unwrap_or(error.into()));
                        }
                        // Another writer got in between: re-read and re-check.
                        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {}
                        Err(error) => return Err(error.into()),
                    }
                }
                Err(BlobError::Conflict(format!("{} was changed by other requests meanwhile; retry", target.url)))
            }
            StagedBody::Multipart(mut writer) => {
                let checked: Result<_, BlobError> = async {
                    let lock = self.locks.acquire(&target.lock_key()).await?;
                    let current = self.read_stored(target.path()).await?;
                    conditions.check_write(current.as_ref().map(|c| c.meta.etag.as_str()))?;
                    if self.keeps_empty_dirs && current.is_none() && self.has_items(target.path()).await? {
                        return Err(folder_in_the_way(target));
                    }
                    if let Some(key) = key {
                        key.ensure_alive().await?;
                    }
                    Ok((lock, current))
                }
                .await;
                let (_lock, current) = match checked {
                    Ok(checked) => checked,
                    Err(error) => {
                        let _ = writer.abort().await;
                        return Err(error);
                    }
                };
                let meta = meta_for(current.as_ref());
                writer.put(trailer::encode(&meta));
                // A completion cannot be conditional: the lock alone orders
                // writers here, so it must still be held.
                if let Err(error) = _lock.ensure_held() {
                    let _ = writer.abort().await;
                    return Err(error.into());
                }
                writer.finish().await?;
                Ok(self.committed(target, meta, current.is_none()).await)
            }
        }
    }

    /// A conditional put; a store without compare-and-swap (not one opened
    /// by `storage::open`) falls back to an overwrite under the lock.
    async fn put_conditionally(&self, path: &Path, payload: PutPayload, mode: PutMode) -> object_store::Result<()> {
        let update = matches!(mode, PutMode::Update(_));
        match self.store.put_opts(path, payload.clone(), PutOptions { mode, ..Default::default() }).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotImplemented { .. }) if update => {
                self.store.put_opts(path, payload, PutOptions::default()).await.map(|_| ())
            }
            Err(error) => Err(error),
        }
    }
}

/// Reads a body of at most `max` bytes; 413 with DIAL's message otherwise.
async fn read_limited<S, E>(
    mut body: S,
    declared: Option<u64>,
    max: u64,
    key: Option<&WritingKey>,
) -> Result<Bytes, BlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Display,
{
    // A refused body is left unread: the listener drains it (bounded) before
    // the answer goes out, so a client still sending reads the 413.
    if let Some(size) = declared.filter(|size| *size > max) {
        return Err(BlobError::ResourceTooLarge { size, max });
    }
    let mut bytes = BytesMut::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| BlobError::BadRequest(format!("Failed to read the request body: {e}")))?;
        check_expiry(key)?;
        let size = (bytes.len() + chunk.len()) as u64;
        if size > max {
            return Err(BlobError::ResourceTooLarge { size, max });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.freeze())
}
