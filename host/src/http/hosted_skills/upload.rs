//! A skill upload as both SDKs send it: `files[]` parts whose filenames are
//! paths under one top-level folder (the skill's name), or (OpenAI) one zip
//! holding that folder; text fields beside them (`display_name`,
//! `display_title`, `default`). Files stream into the engine's staging as
//! they arrive; a zip is spooled to a temporary file (bounded by the type's
//! total size), its central directory read and every entry's name and size
//! checked against the type before anything is inflated, then read entry by
//! entry on a blocking thread. A refused upload leaves nothing in the store.

use std::io::{Read, Seek, Write};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::super::error::ApiError;
use super::super::multipart::{Part, Upload as Multipart};
use crate::auth::Caller;
use crate::folders::unzip::{self, ZipDirectory, ZipError};
use crate::hosted_skills::{HostedSkills, Skill, Upload};
use crate::keys::WritingKey;

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
/// central directory may declare (files, folders and `__MACOSX/` forks;
/// judged from its end record before the directory is read).
#[derive(Debug, Clone, Copy)]
pub struct ZipLimits {
    pub bytes: u64,
    pub entries: u64,
}

/// The bounds of one upload: its zip's, and the per-request key it came
/// with (the upload commits only while the key lives).
pub struct UploadTerms {
    pub zip: ZipLimits,
    pub key: Option<WritingKey>,
}

/// Reads the multipart `request` into a staged upload. A refused one
/// leaves nothing behind: what it staged is deleted before the answer.
pub async fn receive(
    skills: &HostedSkills<'_>,
    caller: &Caller,
    request: axum::extract::Request,
    destination: Destination<'_>,
    terms: UploadTerms,
) -> Result<Received, ApiError> {
    let mut receiver = Receiver { skills, caller, destination: &destination, key: terms.key, started: None };
    let mut fields = Vec::new();
    let received = receive_into(&mut receiver, &mut fields, request, terms.zip).await;
    match (received, receiver.started) {
        (Ok(()), Some((_, upload))) => Ok(Received { upload, fields }),
        (Ok(()), None) => Err(ApiError::bad_request(
            "The upload has no files: send the skill's folder as files[] parts (paths like my-skill/SKILL.md) or one zip",
        )),
        (Err(error), started) => {
            if let Some((_, upload)) = started {
                upload.staging.discard().await;
            }
            Err(error)
        }
    }
}

async fn receive_into(
    receiver: &mut Receiver<'_, '_>,
    fields: &mut Vec<(String, String)>,
    request: axum::extract::Request,
    zip_limits: ZipLimits,
) -> Result<(), ApiError> {
    let mut multipart = Multipart::new(
        request,
        "Expected a multipart/form-data body: files[] parts with paths under one top-level folder, or one zip",
    )?;
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
            from_zip(receiver, spooled, zip_limits.entries).await?;
            zipped = true;
            continue;
        }
        let (upload, path) = receiver.file(&file_name).await?;
        upload.staging.add_file(path, &mut part).await.map_err(|error| part.error_or(error))?;
    }
    if zipped && receiver.started.is_none() {
        return Err(ApiError::bad_request("The zip holds no files: it must hold the skill's folder"));
    }
    Ok(())
}

/// The upload as its files arrive: started by the first file, whose top
/// folder every later one must share.
struct Receiver<'r, 's> {
    skills: &'r HostedSkills<'s>,
    caller: &'r Caller,
    destination: &'r Destination<'r>,
    key: Option<WritingKey>,
    started: Option<(String, Upload)>,
}

impl Receiver<'_, '_> {
    /// Where the file `name` (`<top>/<path>`) goes, and its path in the skill.
    async fn file<'n>(&mut self, name: &'n str) -> Result<(&mut Upload, &'n str), ApiError> {
        let (top, path) = split_path(name)?;
        let (first, upload) = match &mut self.started {
            Some(started) => started,
            started @ None => {
                let mut upload = start(self.skills, self.caller, self.destination, top).await?;
                if let Some(key) = self.key.take() {
                    upload.staging.bind_to_key(key);
                }
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
        Destination::Version(skill) => {
            let names = HostedSkills::version_names(skill);
            if !names.contains(&top) {
                let names = names.iter().map(|name| format!("{name:?}")).collect::<Vec<_>>().join(" or ");
                return Err(ApiError::bad_request(format!(
                    "The upload's top-level folder {top:?} must be the skill's name {names}"
                )));
            }
            Ok(skills.start_version(caller, skill).await?)
        }
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

/// What the zip reader sends: an entry's bytes, or why reading stopped.
enum Inflated {
    Chunk(Bytes),
    Refused(String),
}

/// Stages every file of a spooled zip. Its central directory comes first
/// (on a blocking thread): every entry's name, the one top folder, the
/// count and the declared sizes are checked against the type before a byte
/// is inflated. Then the entries are inflated in turn on a blocking thread
/// and handed over chunk by chunk (at most [`ZIP_CHUNKS_IN_FLIGHT`] of
/// [`ZIP_CHUNK`] bytes), each stopped at the size it declared.
///
/// A zip with `SKILL.md` at its root (what `/v2` downloads, and what a zip
/// made inside a skill's folder holds) is the skill's folder itself: its
/// name is the skill's (a new version) or the `name` its SKILL.md gives (a
/// new skill; the handler checks it as for any upload).
async fn from_zip(receiver: &mut Receiver<'_, '_>, file: std::fs::File, max_entries: u64) -> Result<(), ApiError> {
    let (mut file, directory) = blocking(move || {
        let mut file = file;
        unzip::read_directory(&mut file, max_entries).map(|directory| (file, directory))
    })
    .await?;
    let Some(first) = directory.files.first() else { return Ok(()) };
    let (top, paths) = match directory.files.iter().find(|entry| entry.name == SKILL_FILE) {
        Some(skill_md) => {
            let top = match receiver.destination {
                Destination::Version(skill) => skill.name().to_string(),
                Destination::NewSkill => {
                    let skill_md = skill_md.clone();
                    let (back, name) =
                        blocking(move || skill_name_in(&mut file, &skill_md).map(|name| (file, name))).await?;
                    file = back;
                    name.ok_or_else(|| {
                        ApiError::bad_request(
                            "The zip has SKILL.md at its root, and its frontmatter gives no name: put a name: line \
                             in it, or zip the skill's folder",
                        )
                    })?
                }
            };
            (top, directory.files.iter().map(|entry| entry.name.clone()).collect::<Vec<_>>())
        }
        None => {
            let (first_top, _) = split_path(&first.name)?;
            let mut paths = Vec::with_capacity(directory.files.len());
            for entry in &directory.files {
                let (top, path) = split_path(&entry.name)?;
                if top != first_top {
                    return Err(two_folders(first_top, top));
                }
                paths.push(path.to_string());
            }
            (first_top.to_string(), paths)
        }
    };
    let (upload, _) = receiver.file(&format!("{top}/{SKILL_FILE}")).await?;
    let plan = paths.iter().zip(&directory.files).map(|(path, entry)| (path.as_str(), entry.size));
    upload.staging.check_plan(plan)?;
    inflate(upload, file, directory, paths).await
}

/// The file every skill has at its root.
const SKILL_FILE: &str = "SKILL.md";
/// The head of a SKILL.md read for its frontmatter's `name`.
const FRONTMATTER_HEAD_BYTES: u64 = 64 << 10;

/// The `name` in the frontmatter of the zip's `entry` (its first 64 KiB).
fn skill_name_in(file: &mut std::fs::File, entry: &unzip::ZipEntry) -> Result<Option<String>, ZipError> {
    let mut head = Vec::new();
    unzip::read_entry(file, entry)?.take(FRONTMATTER_HEAD_BYTES).read_to_end(&mut head)?;
    Ok(frontmatter_name(&String::from_utf8_lossy(&head)))
}

/// The `name:` line of a SKILL.md's YAML frontmatter, unquoted; only to
/// place the upload — the skill handler reads the frontmatter whole and
/// refuses the commit unless its `name` is this one.
fn frontmatter_name(text: &str) -> Option<String> {
    let mut lines = text.strip_prefix('\u{feff}').unwrap_or(text).lines();
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let value = lines.take_while(|line| line.trim_end() != "---").find_map(|line| line.strip_prefix("name:"))?;
    let value = value.trim();
    let unquoted = ['"', '\''].iter().find_map(|quote| value.strip_prefix(*quote)?.strip_suffix(*quote));
    Some(unquoted.unwrap_or(value).trim().to_string()).filter(|name| !name.is_empty())
}

/// Runs a zip read on the blocking pool, its refusal a 400.
async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, ZipError> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(read).await {
        Ok(Ok(read)) => Ok(read),
        Ok(Err(ZipError::Io(error))) => Err(spool_failed(error)),
        Ok(Err(refused)) => Err(ApiError::bad_request(refused.to_string())),
        Err(error) => Err(ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, error.to_string())),
    }
}

/// Inflates every file of `directory` into the staging, in order, each at
/// its path in `paths`.
async fn inflate(
    upload: &mut Upload,
    file: std::fs::File,
    directory: ZipDirectory,
    paths: Vec<String>,
) -> Result<(), ApiError> {
    let (sender, mut chunks) = mpsc::channel(ZIP_CHUNKS_IN_FLIGHT);
    let reader = tokio::task::spawn_blocking(move || read_entries(file, &directory, &sender));
    for path in &paths {
        // One file's chunks: until the reader sends an empty one.
        let body = futures_util::stream::unfold(&mut chunks, |chunks| async move {
            match chunks.recv().await {
                Some(Some(Inflated::Chunk(bytes))) => Some((Ok::<Bytes, String>(bytes), chunks)),
                Some(Some(Inflated::Refused(why))) => Some((Err(why), chunks)),
                Some(None) | None => None,
            }
        });
        upload.staging.add_file(path, Box::pin(body)).await.map_err(zip_refusal)?;
    }
    drop(chunks);
    let _ = reader.await;
    Ok(())
}

/// A staging error while inflating: an entry the reader refused is named
/// as the reader said (not as a failed read of the upload).
fn zip_refusal(error: crate::folders::FolderError) -> ApiError {
    match error {
        crate::folders::FolderError::BadRequest(message) => {
            ApiError::bad_request(message.strip_prefix("Failed to read the upload: ").unwrap_or(&message).to_string())
        }
        error => error.into(),
    }
}

/// The blocking side of [`inflate`]: each entry's bytes, then `None`; a
/// send that fails means the upload was refused, so reading stops.
fn read_entries(mut file: std::fs::File, directory: &ZipDirectory, sender: &mpsc::Sender<Option<Inflated>>) {
    for entry in &directory.files {
        let mut reader = match unzip::read_entry(&mut file, entry) {
            Ok(reader) => reader,
            Err(error) => {
                let _ = sender.blocking_send(Some(Inflated::Refused(error.to_string())));
                return;
            }
        };
        let mut buffer = vec![0; ZIP_CHUNK];
        loop {
            let sent = match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => sender.blocking_send(Some(Inflated::Chunk(Bytes::copy_from_slice(&buffer[..read])))),
                Err(error) => {
                    let why = format!("The zip's entry {:?} {error}", entry.name);
                    let _ = sender.blocking_send(Some(Inflated::Refused(why)));
                    return;
                }
            };
            if sent.is_err() {
                return;
            }
        }
        if sender.blocking_send(None).is_err() {
            return;
        }
    }
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

    #[test]
    fn the_name_comes_from_the_frontmatter() {
        assert_eq!(frontmatter_name("---\nname: pdf\ndescription: x\n---\nbody").as_deref(), Some("pdf"));
        assert_eq!(frontmatter_name("\u{feff}---\r\nname: \"a-b\"\r\n---\r\n").as_deref(), Some("a-b"));
        assert_eq!(frontmatter_name("---\ndescription: x\nname: 'q'\n---\n").as_deref(), Some("q"));
        for none in ["name: pdf\n", "---\ndescription: x\n---\nname: later\n", "---\nname:\n---\n", ""] {
            assert_eq!(frontmatter_name(none), None, "{none:?}");
        }
    }

    #[test]
    fn filenames_undo_the_form_encoding_only() {
        assert_eq!(unescape_filename("s/r\u{e9}sum\u{e9} %22q%22.md"), "s/r\u{e9}sum\u{e9} \"q\".md");
        assert_eq!(unescape_filename("s/100%25.md"), "s/100%25.md");
    }
}
