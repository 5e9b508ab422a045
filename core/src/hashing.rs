//! Digests of uploaded bytes: MD5 as DIAL's etags use it, and SHA-256 as
//! agents verify a skill's files by (the MCP Skills Extension's `digest`):
//! of bytes, of chunks, and of a stream hashed on the blocking pool
//! alongside its writes. Shared by v1 blobs (MD5 only) and v2 folders.

use bytes::Bytes;
use md5::{Digest, Md5};
use sha2::Sha256;

/// MD5 hex of bytes: the etag of one file or JSON document.
pub fn md5_hex(bytes: &[u8]) -> String {
    hex(&Md5::digest(bytes))
}

/// MD5 hex of bytes that arrived in chunks.
pub fn md5_hex_of(chunks: &[Bytes]) -> String {
    let mut hasher = Md5::new();
    chunks.iter().for_each(|chunk| hasher.update(chunk));
    hex(&hasher.finalize())
}

/// SHA-256 hex of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// What a stream's bytes hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    /// MD5 hex: the etag.
    pub md5: String,
    /// SHA-256 hex, where it was asked for.
    pub sha256: Option<String>,
}

/// Both digests of bytes that arrived in chunks.
pub fn digests_of(chunks: &[Bytes]) -> Digests {
    let mut hashers = Hashers { md5: Md5::new(), sha256: Some(Sha256::new()) };
    chunks.iter().for_each(|chunk| hashers.update(chunk));
    hashers.finish()
}

/// The hashers one stream runs.
struct Hashers {
    md5: Md5,
    sha256: Option<Sha256>,
}

impl Hashers {
    fn update(&mut self, chunk: &[u8]) {
        self.md5.update(chunk);
        if let Some(sha256) = &mut self.sha256 {
            sha256.update(chunk);
        }
    }

    fn finish(self) -> Digests {
        Digests { md5: hex(&self.md5.finalize()), sha256: self.sha256.map(|sha256| hex(&sha256.finalize())) }
    }
}

/// The digests of a stream, computed on the blocking pool in batches of
/// [`DigestStream::BATCH`] bytes while the next batch arrives, so a large
/// upload is hashed alongside its writes (MD5 runs at about the speed a
/// local disk writes). A blocking thread is taken only while a batch is
/// hashed, never while the client is slow; at most two batches are held.
pub struct DigestStream {
    pending: Vec<Bytes>,
    pending_bytes: usize,
    /// The batch being hashed, or the hashers between batches.
    running: Option<tokio::task::JoinHandle<Hashers>>,
    idle: Option<Hashers>,
}

impl DigestStream {
    const BATCH: usize = 1 << 20;

    /// MD5 only (a v1 item's etag).
    pub fn md5() -> Self {
        Self::with(Hashers { md5: Md5::new(), sha256: None })
    }

    /// MD5 and SHA-256 (a folder resource's file).
    pub fn md5_and_sha256() -> Self {
        Self::with(Hashers { md5: Md5::new(), sha256: Some(Sha256::new()) })
    }

    fn with(hashers: Hashers) -> Self {
        Self { pending: Vec::new(), pending_bytes: 0, running: None, idle: Some(hashers) }
    }

    /// Adds a chunk (cheap: `Bytes` is shared, not copied); waits only when
    /// a full batch is ready and the previous one is still being hashed.
    pub async fn update(&mut self, chunk: Bytes) -> Result<(), object_store::Error> {
        self.pending_bytes += chunk.len();
        self.pending.push(chunk);
        if self.pending_bytes >= Self::BATCH {
            self.dispatch().await?;
        }
        Ok(())
    }

    /// The digests of every chunk added.
    pub async fn finish(mut self) -> Result<Digests, object_store::Error> {
        self.dispatch().await?;
        let hashers = self.running.take().expect("dispatched").await.map_err(hashing_failed)?;
        Ok(hashers.finish())
    }

    async fn dispatch(&mut self) -> Result<(), object_store::Error> {
        let mut hashers = match self.running.take() {
            Some(running) => running.await.map_err(hashing_failed)?,
            None => self.idle.take().expect("hashers between batches"),
        };
        let batch = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        self.running = Some(tokio::task::spawn_blocking(move || {
            batch.iter().for_each(|chunk| hashers.update(chunk));
            hashers
        }));
        Ok(())
    }
}

fn hashing_failed(error: tokio::task::JoinError) -> object_store::Error {
    object_store::Error::Generic { store: "upload", source: Box::new(error) }
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
