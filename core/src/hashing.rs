//! MD5 as DIAL's etags use it: of bytes, of chunks, and of a stream hashed
//! on the blocking pool alongside its writes. Shared by v1 blobs and v2
//! folders.

use bytes::Bytes;
use md5::{Digest, Md5};

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

/// MD5 of a stream, computed on the blocking pool in batches of
/// [`Md5Stream::BATCH`] bytes while the next batch arrives, so a large upload
/// is hashed alongside its writes (MD5 runs at about the speed a local disk
/// writes). A blocking thread is taken only while a batch is hashed, never
/// while the client is slow; at most two batches are held.
pub struct Md5Stream {
    pending: Vec<Bytes>,
    pending_bytes: usize,
    /// The batch being hashed, or the hasher between batches.
    running: Option<tokio::task::JoinHandle<Md5>>,
    idle: Option<Md5>,
}

impl Md5Stream {
    const BATCH: usize = 1 << 20;

    pub fn start() -> Self {
        Self { pending: Vec::new(), pending_bytes: 0, running: None, idle: Some(Md5::new()) }
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

    /// The hex digest of every chunk added.
    pub async fn finish(mut self) -> Result<String, object_store::Error> {
        self.dispatch().await?;
        let hasher = self.running.take().expect("dispatched").await.map_err(hashing_failed)?;
        Ok(hex(&hasher.finalize()))
    }

    async fn dispatch(&mut self) -> Result<(), object_store::Error> {
        let mut hasher = match self.running.take() {
            Some(running) => running.await.map_err(hashing_failed)?,
            None => self.idle.take().expect("a hasher between batches"),
        };
        let batch = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        self.running = Some(tokio::task::spawn_blocking(move || {
            batch.iter().for_each(|chunk| hasher.update(chunk));
            hasher
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
