//! The ZIP of a resource version, streamed.
//!
//! The `zip` crate writes synchronously, so the archive is built on a
//! blocking thread that pulls each file from the store chunk by chunk and
//! pushes output through a bounded channel to the HTTP body. Memory stays
//! at a few chunks whatever the resource size; a client that goes away
//! closes the channel and stops the thread.

use std::io::Write;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use zip::CompressionMethod;
use zip::write::{SimpleFileOptions, ZipWriter};

use super::layout::NodePaths;
use super::marker::ResourceMarker;

/// Output is sent in chunks of about this size…
const CHUNK_BYTES: usize = 64 << 10;
/// …with at most this many in flight.
const CHANNEL_CHUNKS: usize = 4;
/// Bytes read from the store at a time.
const READ_BYTES: u64 = 1 << 20;

/// A stream of ZIP bytes for the marker's current version (marker excluded).
pub fn stream_zip(
    store: Arc<dyn ObjectStore>,
    paths: NodePaths,
    marker: ResourceMarker,
) -> ReceiverStream<Result<Bytes, std::io::Error>> {
    let (sender, receiver) = mpsc::channel(CHANNEL_CHUNKS);
    let handle = Handle::current();
    tokio::task::spawn_blocking(move || {
        let errors = sender.clone();
        if let Err(error) = write_zip(&handle, store.as_ref(), &paths, &marker, sender) {
            // The client may already be gone; then nobody hears this.
            tracing::warn!(%error, "streaming a resource archive failed");
            let _ = errors.blocking_send(Err(error));
        }
    });
    ReceiverStream::new(receiver)
}

fn write_zip(
    handle: &Handle,
    store: &dyn ObjectStore,
    paths: &NodePaths,
    marker: &ResourceMarker,
    sender: mpsc::Sender<Result<Bytes, std::io::Error>>,
) -> std::io::Result<()> {
    let mut zip = ZipWriter::new_stream(ChannelWriter { sender, buffer: BytesMut::with_capacity(CHUNK_BYTES) });
    for (path, record) in &marker.files {
        let options = SimpleFileOptions::default()
            .compression_method(compression_for(path))
            .large_file(record.size >= u32::MAX as u64);
        zip.start_file(path.as_str(), options).map_err(std::io::Error::other)?;
        // Ranged reads of READ_BYTES: few round trips (the local backend
        // streams in 8 KiB pieces otherwise) and one read's worth of memory.
        let object = paths.file(&marker.current_version, path);
        let mut offset = 0;
        while offset < record.size {
            let end = (offset + READ_BYTES).min(record.size);
            let bytes = handle.block_on(store.get_range(&object, offset..end)).map_err(std::io::Error::other)?;
            zip.write_all(&bytes)?;
            offset = end;
        }
    }
    let mut writer = zip.finish().map_err(std::io::Error::other)?.into_inner();
    writer.flush()
}

/// Text compresses well and costs little CPU; other files (images, archives,
/// binaries) are mostly compressed already, so they are stored as they are.
fn compression_for(path: &str) -> CompressionMethod {
    const TEXT: &[&str] = &[
        "md", "markdown", "txt", "py", "sh", "bash", "js", "mjs", "ts", "json", "yaml", "yml", "toml", "html", "htm",
        "css", "csv", "tsv", "xml", "svg", "rs", "go", "java", "kt", "c", "h", "cpp", "hpp", "rb", "php", "sql", "ini",
        "cfg", "conf", "tex", "rst", "ipynb",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()) {
        Some(ext) if TEXT.contains(&ext.as_str()) => CompressionMethod::Deflated,
        None => CompressionMethod::Deflated, // README, LICENSE, Makefile…
        Some(_) => CompressionMethod::Stored,
    }
}

/// `Write` into the bounded channel, in chunks.
struct ChannelWriter {
    sender: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buffer: BytesMut,
}

impl ChannelWriter {
    fn send_buffer(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = self.buffer.split().freeze();
        self.sender
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK_BYTES {
            self.send_buffer()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send_buffer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_deflated_and_binaries_stored() {
        assert_eq!(compression_for("SKILL.md"), CompressionMethod::Deflated);
        assert_eq!(compression_for("scripts/run.py"), CompressionMethod::Deflated);
        assert_eq!(compression_for("LICENSE"), CompressionMethod::Deflated);
        assert_eq!(compression_for("assets/logo.PNG"), CompressionMethod::Stored);
        assert_eq!(compression_for("data.v1/blob"), CompressionMethod::Deflated);
        assert_eq!(compression_for("model.bin"), CompressionMethod::Stored);
    }
}
