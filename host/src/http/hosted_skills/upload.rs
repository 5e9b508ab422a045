//! A skill upload as both SDKs send it: `files[]` parts whose filenames are
//! paths under one top-level folder (the skill's name), or (OpenAI) one zip
//! holding that folder; text fields beside them (`display_name`,
//! `display_title`, `default`). Files stream into the engine's staging as
//! they arrive; a zip is spooled to a temporary file (bounded by the type's
//! total size) and read entry by entry on a blocking thread.

use std::io::{Read, Seek, SeekFrom, Write};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::super::error::ApiError;
use super::super::multipart::{Part, Upload as Multipart};
use crate::auth::Caller;
use crate::hosted_skills::{HostedSkills, Skill, Upload};

/// A text field is at most this long (`display_name` is ≤ 255 characters).
const MAX_FIELD_BYTES: usize = 4096;
/// Text fields one upload may carry (the SDKs send at most two).
const MAX_FIELDS: usize = 16;
/// Bytes one zip entry is read in, and chunks in flight to the staging.
const ZIP_CHUNK: usize = 64 << 10;
const ZIP_CHUNKS_IN_FLIGHT: usize = 4;

/// What the upload is for.
pub enum Destination<'s> {
    /// A new skill named by the upload's top folder.
    NewSkill,
    /// A new version of this skill: the top folder must be its name.
    Version(&'s Skill),
}

/// The upload received, and the text fields that came with it.
pub struct Received {
    pub upload: Upload,
    pub fields: Vec<(String, String)>,
}

impl Received {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(field, _)| field == name).map(|(_, value)| value.as_str())
    }
}

/// What a zip upload may be: the bytes spooled, and the entries its
/// central directory may declare (read into memory whole by the zip
/// reader, so bounded before it runs).
#[derive(Debug, Clone, Copy)]
pub struct ZipLimits {
    pub bytes: u64,
    pub entries: u64,
}

/// Reads the multipart `request` into a staged upload.
pub async fn receive(
    skills: &HostedSkills<'_>,
    caller: &Caller,
    request: axum::extract::Request,
    destination: Destination<'_>,
    zip_limits: ZipLimits,
) -> Result<Received, ApiError> {
    let mut multipart = Multipart::new(
        request,
        "Expected a multipart/form-data body: files[] parts with paths under one top-level folder, or one zip",
    )?;
    let mut fields = Vec::new();
    let mut receiver = Receiver { skills, caller, destination: &destination, started: None };
    let mut zipped = false;
    while let Some(mut part) = multipart.next_part().await? {
        let Some(file_name) = part.file_name().map(unescape_filename) else {
            if fields.len() == MAX_FIELDS {
                return Err(ApiError::bad_request(format!("An upload has at most {MAX_FIELDS} form fields")));
            }
            let name = part.name().unwrap_or_default().to_string();
            fields.push((name, read_field(&mut part).await?));
            continue;
        };
        if zipped || (is_zip(&part, &file_name) && receiver.started.is_some()) {
            return Err(ApiError::bad_request("A zip upload is one part: send either files[] parts or one zip"));
        }
        if is_zip(&part, &file_name) {
            let spooled = spool(&mut part, zip_limits.bytes).await?;
            from_zip(&mut receiver, spooled, zip_limits.entries).await?;
            zipped = true;
            continue;
        }
        let (upload, path) = receiver.file(&file_name).await?;
        upload.staging.add_file(path, &mut part).await.map_err(|error| part.error_or(error))?;
    }
    match receiver.started {
        Some((_, upload)) => Ok(Received { upload, fields }),
        None if zipped => Err(ApiError::bad_request("The zip holds no files: it must hold the skill's folder")),
        None => Err(ApiError::bad_request(
            "The upload has no files: send the skill's folder as files[] parts (paths like my-skill/SKILL.md) or one zip",
        )),
    }
}

/// The upload as its files arrive: started by the first file, whose top
/// folder every later one must share.
struct Receiver<'r, 's> {
    skills: &'r HostedSkills<'s>,
    caller: &'r Caller,
    destination: &'r Destination<'r>,
    started: Option<(String, Upload)>,
}

impl Receiver<'_, '_> {
    /// Where the file `name` (`<top>/<path>`) goes, and its path in the skill.
    async fn file<'n>(&mut self, name: &'n str) -> Result<(&mut Upload, &'n str), ApiError> {
        let (top, path) = split_path(name)?;
        let (first, upload) = match &mut self.started {
            Some(started) => started,
            started @ None => {
                let upload = start(self.skills, self.caller, self.destination, top).await?;
                started.insert((top.to_string(), upload))
            }
        };
        if first != top {
            return Err(two_folders(first, top));
        }
        Ok((upload, path))
    }
}

async fn start(
    skills: &HostedSkills<'_>,
    caller: &Caller,
    destination: &Destination<'_>,
    top: &str,
) -> Result<Upload, ApiError> {
    match destination {
        Destination::NewSkill => Ok(skills.start_create(caller, top).await?),
        Destination::Version(skill) if skill.name() == top => Ok(skills.start_version(skill).await?),
        Destination::Version(skill) => Err(ApiError::bad_request(format!(
            "The upload's top-level folder {top:?} must be the skill's name {:?}",
            skill.name()
        ))),
    }
}

/// `top/path` of a part's filename, refused with the hosted APIs' messages
/// when it is not under exactly one folder.
fn split_path(file_name: &str) -> Result<(&str, &str), ApiError> {
    if file_name.contains('\\') {
        return Err(ApiError::bad_request(format!(
            "Skill contains path with invalid characters: {file_name:?} (use / between folders)"
        )));
    }
    match file_name.split_once('/') {
        Some((top, path)) if !top.is_empty() && !path.is_empty() => Ok((top, path)),
        _ => Err(ApiError::bad_request(format!(
            "{file_name:?} is not inside a folder: SKILL.md file must be exactly in the top-level folder (send paths \
             like my-skill/SKILL.md; an SDK given a file path sends only its base name)"
        ))),
    }
}

fn two_folders(first: &str, second: &str) -> ApiError {
    ApiError::bad_request(format!(
        "The upload has two top-level folders, {first:?} and {second:?}: a skill is one folder"
    ))
}

/// A zip: OpenAI's single `files` part, or any part that says or is named so.
fn is_zip(part: &Part<'_>, file_name: &str) -> bool {
    part.name() == Some("files")
        || part.content_type().is_some_and(|ct| ct.eq_ignore_ascii_case("application/zip"))
        || (!file_name.contains('/') && file_name.to_ascii_lowercase().ends_with(".zip"))
}

/// The SDKs' multipart encoder escapes `"`, CR and LF in filenames (the
/// WHATWG form encoding) and nothing else: undo exactly those.
fn unescape_filename(name: &str) -> String {
    name.replace("%22", "\"").replace("%0D", "\r").replace("%0A", "\n")
}

async fn read_field(part: &mut Part<'_>) -> Result<String, ApiError> {
    let name = part.name().unwrap_or_default().to_string();
    let mut bytes = Vec::new();
    while let Some(chunk) = part.next().await {
        let chunk = chunk.map_err(|_| part.error_or(ApiError::bad_request("Invalid multipart body")))?;
        if bytes.len() + chunk.len() > MAX_FIELD_BYTES {
            return Err(ApiError::bad_request(format!("The form field {name:?} is over {MAX_FIELD_BYTES} bytes")));
        }
        bytes.extend_from_slice(&chunk);
    }
    String::from_utf8(bytes).map_err(|_| ApiError::bad_request(format!("The form field {name:?} is not UTF-8")))
}

/// The zip part written to an anonymous temporary file, at most `limit` bytes.
async fn spool(part: &mut Part<'_>, limit: u64) -> Result<std::fs::File, ApiError> {
    let file = tokio::task::spawn_blocking(tempfile::tempfile)
        .await
        .map_err(|error| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?
        .map_err(spool_failed)?;
    let mut file = tokio::fs::File::from_std(file);
    let mut written = 0u64;
    while let Some(chunk) = part.next().await {
        let chunk = chunk.map_err(|_| part.error_or(ApiError::bad_request("Invalid multipart body")))?;
        written += chunk.len() as u64;
        if written > limit {
            return Err(ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                format!("The zip is over {limit} bytes, the most a skill may hold"),
            ));
        }
        tokio::io::AsyncWriteExt::write_all(&mut file, &chunk).await.map_err(spool_failed)?;
    }
    let mut file = file.into_std().await;
    file.flush().and_then(|()| file.rewind()).map_err(spool_failed)?;
    Ok(file)
}

fn spool_failed(error: std::io::Error) -> ApiError {
    tracing::error!(%error, "spooling a zip upload");
    ApiError::new(axum::http::StatusCode::INSUFFICIENT_STORAGE, "The upload could not be spooled; retry")
}

/// What the zip reader sends: a file starts, its bytes, or a refusal.
enum Entry {
    File(String),
    Chunk(Bytes),
    Refused(String),
}

/// Stages every file of a spooled zip: entries are read on a blocking
/// thread and handed over chunk by chunk (at most [`ZIP_CHUNKS_IN_FLIGHT`]
/// of [`ZIP_CHUNK`] bytes), so memory stays bounded whatever the archive
/// holds; the staging's limits stop a zip bomb as its bytes arrive.
async fn from_zip(receiver: &mut Receiver<'_, '_>, file: std::fs::File, max_entries: u64) -> Result<(), ApiError> {
    let (sender, mut entries) = mpsc::channel(ZIP_CHUNKS_IN_FLIGHT);
    let reader = tokio::task::spawn_blocking(move || read_zip(file, max_entries, &sender));
    let mut next = entries.recv().await;
    while let Some(entry) = next.take() {
        let name = match entry {
            Entry::File(name) => name,
            Entry::Refused(message) => return Err(ApiError::bad_request(message)),
            Entry::Chunk(_) => unreachable!("chunks follow their file"),
        };
        let (upload, path) = receiver.file(&name).await?;
        // The file's bytes: chunks until the next file (kept for the loop).
        let body = futures_util::stream::unfold((&mut entries, &mut next), |(entries, next)| async move {
            match entries.recv().await {
                Some(Entry::Chunk(bytes)) => Some((Ok::<Bytes, String>(bytes), (entries, next))),
                other => {
                    *next = other;
                    None
                }
            }
        });
        upload.staging.add_file(path, Box::pin(body)).await?;
        if let Some(Entry::Refused(message)) = &next {
            return Err(ApiError::bad_request(message.clone()));
        }
    }
    drop(entries);
    let _ = reader.await;
    Ok(())
}

/// The blocking side of [`from_zip`]: folder entries and macOS's
/// `__MACOSX/` resource forks are skipped; a send that fails means the
/// upload was refused, so reading stops.
fn read_zip(mut file: std::fs::File, max_entries: u64, sender: &mpsc::Sender<Entry>) {
    let refuse = |message: String| {
        let _ = sender.blocking_send(Entry::Refused(message));
    };
    match declared_entries(&mut file) {
        Ok(Some(entries)) if entries > max_entries => {
            return refuse(format!("The zip has {entries} entries; a skill's zip may have at most {max_entries}"));
        }
        Ok(_) => {}
        Err(error) => return refuse(format!("The upload is not a readable zip: {error}")),
    }
    let mut archive = match zip::ZipArchive::new(file) {
        Ok(archive) => archive,
        Err(error) => return refuse(format!("The upload is not a readable zip: {error}")),
    };
    for index in 0..archive.len() {
        let mut entry = match archive.by_index(index) {
            Ok(entry) => entry,
            Err(error) => return refuse(format!("The zip's entry {index} cannot be read: {error}")),
        };
        let name = match entry.name() {
            Ok(name) => name.to_string(),
            Err(error) => return refuse(format!("The zip's entry {index} has a name that cannot be read: {error}")),
        };
        if entry.is_dir() || name.starts_with("__MACOSX/") {
            continue;
        }
        if sender.blocking_send(Entry::File(name.clone())).is_err() {
            return;
        }
        let mut buffer = vec![0; ZIP_CHUNK];
        loop {
            match entry.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => {
                    if sender.blocking_send(Entry::Chunk(Bytes::copy_from_slice(&buffer[..read]))).is_err() {
                        return;
                    }
                }
                Err(error) => return refuse(format!("The zip's entry {name:?} cannot be read: {error}")),
            }
        }
    }
}

/// The number of entries a zip's end-of-central-directory record declares
/// (the zip64 record's when the classic one says 0xFFFF); `None` when
/// there is no such record (the zip reader then refuses the file). Read
/// before the zip reader, which holds the whole central directory in memory.
fn declared_entries(file: &mut std::fs::File) -> std::io::Result<Option<u64>> {
    const EOCD: &[u8] = b"PK\x05\x06";
    const ZIP64_LOCATOR: &[u8] = b"PK\x06\x07";
    const ZIP64_EOCD: &[u8] = b"PK\x06\x06";
    let length = file.metadata()?.len();
    // The record (22 bytes) ends the file, after a comment of at most 64 KiB.
    let tail_length = length.min(22 + 0xFFFF + 20);
    file.seek(SeekFrom::Start(length - tail_length))?;
    let mut tail = vec![0; tail_length as usize];
    file.read_exact(&mut tail)?;
    let Some(at) = tail.windows(4).rposition(|window| window == EOCD).filter(|at| at + 22 <= tail.len()) else {
        return Ok(None);
    };
    let entries = u16::from_le_bytes([tail[at + 10], tail[at + 11]]);
    if entries != 0xFFFF {
        return Ok(Some(u64::from(entries)));
    }
    if at < 20 || &tail[at - 20..at - 16] != ZIP64_LOCATOR {
        return Ok(None);
    }
    let offset = u64::from_le_bytes(tail[at - 12..at - 4].try_into().expect("eight bytes"));
    let mut record = [0; 40];
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut record)?;
    if &record[..4] != ZIP64_EOCD {
        return Ok(None);
    }
    Ok(Some(u64::from_le_bytes(record[32..40].try_into().expect("eight bytes"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_under_one_folder() {
        assert_eq!(split_path("my-skill/SKILL.md").unwrap(), ("my-skill", "SKILL.md"));
        assert_eq!(split_path("my-skill/a/b.py").unwrap(), ("my-skill", "a/b.py"));
        for bad in ["SKILL.md", "/SKILL.md", "my-skill/", "a\\SKILL.md"] {
            let error = split_path(bad).unwrap_err();
            assert_eq!(error.status, axum::http::StatusCode::BAD_REQUEST, "{bad}");
        }
        assert!(split_path("a\\SKILL.md").unwrap_err().message.contains("invalid characters"));
    }

    fn zip_of(entries: usize) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        let mut zip = zip::ZipWriter::new(&mut file);
        for n in 0..entries {
            zip.start_file(format!("s/{n}.md"), zip::write::SimpleFileOptions::default()).unwrap();
            zip.write_all(b"x").unwrap();
        }
        zip.set_comment("a comment after the directory").unwrap();
        zip.finish().unwrap();
        file.rewind().unwrap();
        file
    }

    #[test]
    fn the_declared_entries_are_read_before_the_central_directory() {
        assert_eq!(declared_entries(&mut zip_of(7)).unwrap(), Some(7));
        let mut junk = tempfile::tempfile().unwrap();
        junk.write_all(&[7; 100]).unwrap();
        assert_eq!(declared_entries(&mut junk).unwrap(), None);
    }

    #[test]
    fn a_zip_declaring_more_entries_than_allowed_is_refused_before_it_is_read() {
        let (sender, mut received) = mpsc::channel(4);
        std::thread::spawn(move || read_zip(zip_of(6), 5, &sender)).join().unwrap();
        match received.blocking_recv() {
            Some(Entry::Refused(message)) => assert!(message.contains("6 entries") && message.contains("at most 5")),
            _ => panic!("the zip was read"),
        }
        let (sender, mut received) = mpsc::channel(64);
        std::thread::spawn(move || read_zip(zip_of(5), 5, &sender)).join().unwrap();
        assert!(matches!(received.blocking_recv(), Some(Entry::File(name)) if name == "s/0.md"));
    }

    #[test]
    fn filenames_undo_the_form_encoding_only() {
        assert_eq!(unescape_filename("s/r\u{e9}sum\u{e9} %22q%22.md"), "s/r\u{e9}sum\u{e9} \"q\".md");
        assert_eq!(unescape_filename("s/100%25.md"), "s/100%25.md");
    }
}
