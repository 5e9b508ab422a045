//! Reading an uploaded zip (the skills APIs take one) so that what is
//! checked is what is read: the end record, then the central directory
//! streamed from the file — never held whole, at most `max_entries` entries
//! of at most [`MAX_NAME_BYTES`] each kept — gives every entry's name and
//! declared size for checking before anything is inflated; then each entry
//! is inflated from its own offset with its declared size and CRC enforced,
//! so one that inflates past what it declared stops right there.
//!
//! Not the `zip` crate's reader, which the archive writer uses: it reads the
//! whole central directory into memory before anything can be checked,
//! keeps one entry per name (a duplicate silently replaces the first), and
//! chooses among several end records by rules of its own, so a guard in
//! front of it read another record than it did.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};

use flate2::read::DeflateDecoder;

/// Longest entry name kept (a store key is at most 1 024 bytes anyway).
pub const MAX_NAME_BYTES: usize = 1024;

const END_RECORD: &[u8; 4] = b"PK\x05\x06";
const END_RECORD_BYTES: usize = 22;
const ZIP64_LOCATOR: &[u8; 4] = b"PK\x06\x07";
const ZIP64_LOCATOR_BYTES: usize = 20;
const ZIP64_END_RECORD: &[u8; 4] = b"PK\x06\x06";
const DIRECTORY_ENTRY: &[u8; 4] = b"PK\x01\x02";
const LOCAL_HEADER: &[u8; 4] = b"PK\x03\x04";
const STORED: u16 = 0;
const DEFLATED: u16 = 8;

/// Why a zip is refused; each message names the problem.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("The upload is not a readable zip: {0}")]
    Unreadable(String),
    #[error("The zip has {entries} entries; a skill's zip may have at most {max}")]
    TooManyEntries { entries: u64, max: u64 },
    #[error("The zip's entry {name:?} {problem}")]
    Entry { name: String, problem: String },
    /// The spooled upload could not be read back (the host's fault).
    #[error("reading the spooled zip: {0}")]
    Io(#[from] io::Error),
}

fn unreadable(why: impl Into<String>) -> ZipError {
    ZipError::Unreadable(why.into())
}

/// One file of the zip, as its central directory describes it.
#[derive(Debug, Clone)]
pub struct ZipEntry {
    /// Its path in the zip (`/`-separated, as stored).
    pub name: String,
    /// The bytes it declares once inflated: it may give no more, and no fewer.
    pub size: u64,
    compressed_size: u64,
    method: u16,
    crc32: u32,
    /// Where its local header is in the file.
    header_at: u64,
    /// Where its data starts (after the local header).
    data_at: u64,
}

/// The files of a zip, in directory order: folder entries and macOS's
/// `__MACOSX/` resource forks left out.
#[derive(Debug, Default)]
pub struct ZipDirectory {
    pub files: Vec<ZipEntry>,
}

/// Where the central directory is, as the one end record says.
struct End {
    entries: u64,
    size: u64,
    offset: u64,
    /// Where the directory must end: at the (zip64) end record.
    ends_at: u64,
}

/// Reads the central directory of the zip in `file`, refusing one that
/// declares more than `max_entries` entries before reading any of them.
pub fn read_directory(file: &mut File, max_entries: u64) -> Result<ZipDirectory, ZipError> {
    let length = file.metadata()?.len();
    let end = find_end(file, length)?;
    if end.entries > max_entries {
        return Err(ZipError::TooManyEntries { entries: end.entries, max: max_entries });
    }
    // Data prepended to the zip (a self-extractor's stub) moves every offset.
    let starts_at = end.ends_at.checked_sub(end.size).ok_or_else(|| unreadable("its directory size is wrong"))?;
    let shift = starts_at.checked_sub(end.offset).ok_or_else(|| unreadable("its directory offset is wrong"))?;
    file.seek(SeekFrom::Start(starts_at))?;
    let mut directory = BufReader::new(Read::by_ref(file).take(end.size));
    let mut files = Vec::new();
    let mut extra = Vec::new();
    for _ in 0..end.entries {
        let Some(entry) = read_directory_entry(&mut directory, &mut extra, shift)? else { continue };
        files.push(entry);
    }
    if !directory.buffer().is_empty() || directory.into_inner().limit() != 0 {
        return Err(unreadable(format!(
            "its central directory holds more than the {} entries its end record declares",
            end.entries
        )));
    }
    locate_data(file, &mut files, starts_at)?;
    Ok(ZipDirectory { files })
}

/// Finds where each entry's data starts (after its local header), and
/// refuses entries whose data overlap one another or the directory: each
/// byte of the upload is then inflated at most once, so inflating costs
/// what reading the upload does, whatever the entries declare.
fn locate_data(file: &mut File, files: &mut [ZipEntry], directory_at: u64) -> Result<(), ZipError> {
    let entry_error =
        |entry: &ZipEntry, problem: &str| ZipError::Entry { name: entry.name.clone(), problem: problem.into() };
    for entry in files.iter_mut() {
        let mut header = [0; 30];
        file.seek(SeekFrom::Start(entry.header_at))?;
        file.read_exact(&mut header).map_err(|_| entry_error(entry, "points past the end of the zip"))?;
        if &header[..4] != LOCAL_HEADER {
            return Err(entry_error(entry, "has no local header where the directory says"));
        }
        let skip = 30 + u64::from(u16_at(&header, 26)) + u64::from(u16_at(&header, 28));
        entry.data_at = entry.header_at + skip;
    }
    let mut spans: Vec<(u64, u64, &ZipEntry)> = files
        .iter()
        .map(|entry| (entry.header_at, entry.data_at.saturating_add(entry.compressed_size), entry))
        .collect();
    spans.sort_by_key(|(start, ..)| *start);
    let mut reached = 0;
    for (start, end, entry) in spans {
        if start < reached {
            return Err(entry_error(entry, "overlaps another entry"));
        }
        if end > directory_at {
            return Err(entry_error(entry, "runs into the central directory or past the end of the zip"));
        }
        reached = end;
    }
    Ok(())
}

/// The end record: the one `PK\5\6` whose comment ends the file (two such
/// records make the zip ambiguous, and it is refused), then the zip64
/// record it points to when its fields overflowed.
fn find_end(file: &mut File, length: u64) -> Result<End, ZipError> {
    let tail_length = length.min((END_RECORD_BYTES + 0xFFFF + ZIP64_LOCATOR_BYTES) as u64);
    let tail_start = length - tail_length;
    file.seek(SeekFrom::Start(tail_start))?;
    let mut tail = vec![0; tail_length as usize];
    file.read_exact(&mut tail)?;
    let mut found = (0..tail.len().saturating_sub(END_RECORD_BYTES - 1)).filter(|&at| {
        &tail[at..at + 4] == END_RECORD && at + END_RECORD_BYTES + usize::from(u16_at(&tail, at + 20)) == tail.len()
    });
    let Some(at) = found.next() else {
        return Err(unreadable("it has no end of central directory record"));
    };
    if found.next().is_some() {
        return Err(unreadable("it has more than one end of central directory record"));
    }
    let record = &tail[at..at + END_RECORD_BYTES];
    let (disk, directory_disk) = (u16_at(record, 4), u16_at(record, 6));
    let (on_disk, entries) = (u16_at(record, 8), u16_at(record, 10));
    let (size, offset) = (u32_at(record, 12), u32_at(record, 16));
    let record_at = tail_start + at as u64;
    let overflowed = entries == 0xFFFF || size == 0xFFFF_FFFF || offset == 0xFFFF_FFFF;
    // A zip64 end record is used whenever its locator precedes the end
    // record (some writers add one whose values also fit the classic
    // fields; the directory then ends at the zip64 record).
    let locator = at.checked_sub(ZIP64_LOCATOR_BYTES).map(|from| &tail[from..at]);
    if let Some(locator) = locator.filter(|locator| &locator[..4] == ZIP64_LOCATOR) {
        match read_zip64_end(file, u64_at(locator, 8), record_at) {
            Ok(end) => return Ok(end),
            Err(error) if overflowed => return Err(error),
            // Bytes that only looked like a locator: the classic record stands.
            Err(_) => {}
        }
    } else if overflowed {
        return Err(unreadable("its end record overflows but it has no zip64 end record"));
    }
    if disk != 0 || directory_disk != 0 || on_disk != entries {
        return Err(unreadable("it spans several disks"));
    }
    Ok(End { entries: entries.into(), size: size.into(), offset: offset.into(), ends_at: record_at })
}

/// The zip64 end record at `zip64_at` (before the classic one at `record_at`).
fn read_zip64_end(file: &mut File, zip64_at: u64, record_at: u64) -> Result<End, ZipError> {
    if zip64_at.saturating_add(56) > record_at {
        return Err(unreadable("its zip64 end record is misplaced"));
    }
    let mut zip64 = [0; 56];
    file.seek(SeekFrom::Start(zip64_at))?;
    file.read_exact(&mut zip64).map_err(|_| unreadable("its zip64 end record is cut short"))?;
    if &zip64[..4] != ZIP64_END_RECORD {
        return Err(unreadable("its zip64 end record is missing"));
    }
    if u32_at(&zip64, 16) != 0 || u32_at(&zip64, 20) != 0 || u64_at(&zip64, 24) != u64_at(&zip64, 32) {
        return Err(unreadable("it spans several disks"));
    }
    Ok(End { entries: u64_at(&zip64, 32), size: u64_at(&zip64, 40), offset: u64_at(&zip64, 48), ends_at: zip64_at })
}

/// One central directory entry; `None` for what is not a file to stage.
fn read_directory_entry(
    directory: &mut impl Read,
    extra: &mut Vec<u8>,
    shift: u64,
) -> Result<Option<ZipEntry>, ZipError> {
    let mut fixed = [0; 46];
    directory.read_exact(&mut fixed).map_err(|_| unreadable("its central directory is cut short"))?;
    if &fixed[..4] != DIRECTORY_ENTRY {
        return Err(unreadable("its central directory is damaged"));
    }
    let (flags, method, crc32) = (u16_at(&fixed, 8), u16_at(&fixed, 10), u32_at(&fixed, 16));
    let (mut compressed_size, mut size) = (u64::from(u32_at(&fixed, 20)), u64::from(u32_at(&fixed, 24)));
    let (name_length, extra_length) = (usize::from(u16_at(&fixed, 28)), usize::from(u16_at(&fixed, 30)));
    let comment_length = u64::from(u16_at(&fixed, 32));
    let mut header_at = u64::from(u32_at(&fixed, 42));
    if name_length > MAX_NAME_BYTES {
        return Err(unreadable(format!("an entry's name is over {MAX_NAME_BYTES} bytes")));
    }
    let mut name = vec![0; name_length];
    directory.read_exact(&mut name).map_err(|_| unreadable("its central directory is cut short"))?;
    extra.resize(extra_length, 0);
    directory.read_exact(extra).map_err(|_| unreadable("its central directory is cut short"))?;
    let skipped = io::copy(&mut directory.take(comment_length), &mut io::sink())?;
    if skipped != comment_length {
        return Err(unreadable("its central directory is cut short"));
    }
    // Names are UTF-8 (flag bit 11, or undeclared as many tools write them).
    let name = String::from_utf8(name).map_err(|error| ZipError::Entry {
        name: String::from_utf8_lossy(error.as_bytes()).into_owned(),
        problem: "has a name that is not UTF-8".into(),
    })?;
    if name.ends_with('/') || name.starts_with("__MACOSX/") {
        return Ok(None);
    }
    let entry_error = |problem: String| ZipError::Entry { name: name.clone(), problem };
    // Zip64: the fields that overflowed are in the extra field 0x0001, in order.
    let mut zip64 = zip64_fields(extra);
    for field in [&mut size, &mut compressed_size, &mut header_at] {
        if *field == 0xFFFF_FFFF {
            *field = zip64.next().ok_or_else(|| entry_error("has no zip64 sizes where it needs them".into()))?;
        }
    }
    if flags & 1 != 0 {
        return Err(entry_error("is encrypted".into()));
    }
    if method != STORED && method != DEFLATED {
        return Err(entry_error(format!(
            "is compressed with method {method}: only stored and deflated entries are read"
        )));
    }
    let header_at = header_at.checked_add(shift).ok_or_else(|| entry_error("has an offset past any file".into()))?;
    Ok(Some(ZipEntry { name, size, compressed_size, method, crc32, header_at, data_at: 0 }))
}

/// The 8-byte values of the zip64 extended information field (0x0001).
fn zip64_fields(extra: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let mut rest = extra;
    let mut field: &[u8] = &[];
    while rest.len() >= 4 {
        let (id, length) = (u16_at(rest, 0), usize::from(u16_at(rest, 2)));
        let body = &rest[4..(4 + length).min(rest.len())];
        if id == 1 {
            field = body;
            break;
        }
        rest = &rest[4 + body.len()..];
    }
    field.chunks_exact(8).map(|bytes| u64_at(bytes, 0))
}

/// The inflated bytes of `entry`: ends with an error past the size it
/// declared, short of it, or when the CRC does not match.
pub fn read_entry<'f>(file: &'f mut File, entry: &'f ZipEntry) -> Result<EntryReader<'f>, ZipError> {
    file.seek(SeekFrom::Start(entry.data_at))?;
    let compressed = Read::by_ref(file).take(entry.compressed_size);
    let inflated: Box<dyn Read + 'f> = match entry.method {
        DEFLATED => Box::new(DeflateDecoder::new(compressed)),
        _ => Box::new(compressed),
    };
    Ok(EntryReader { entry, inflated, read: 0, crc: crc32fast::Hasher::new() })
}

/// See [`read_entry`].
pub struct EntryReader<'f> {
    entry: &'f ZipEntry,
    inflated: Box<dyn Read + 'f>,
    read: u64,
    crc: crc32fast::Hasher,
}

impl Read for EntryReader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let invalid = |problem: String| io::Error::new(io::ErrorKind::InvalidData, problem);
        // One byte more than declared is asked for, to see that there is none.
        let room = (self.entry.size - self.read).saturating_add(1).min(buffer.len() as u64) as usize;
        let read = self.inflated.read(&mut buffer[..room])?;
        self.read += read as u64;
        if self.read > self.entry.size {
            return Err(invalid(format!("inflates past the {} bytes it declares", self.entry.size)));
        }
        self.crc.update(&buffer[..read]);
        if read == 0 && room > 0 {
            if self.read != self.entry.size {
                return Err(invalid(format!("holds {} of the {} bytes it declares", self.read, self.entry.size)));
            }
            if self.crc.clone().finalize() != self.entry.crc32 {
                return Err(invalid("fails its CRC check".into()));
            }
        }
        Ok(read)
    }
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn zip_file(build: impl FnOnce(&mut zip::ZipWriter<&mut File>)) -> File {
        let mut file = tempfile::tempfile().unwrap();
        let mut zip = zip::ZipWriter::new(&mut file);
        build(&mut zip);
        zip.finish().unwrap();
        file.rewind().unwrap();
        file
    }

    fn deflated() -> zip::write::SimpleFileOptions {
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated)
    }

    fn read_all(file: &mut File, entry: &ZipEntry) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        read_entry(file, entry).map_err(io::Error::other)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    #[test]
    fn files_are_listed_and_read_back_byte_for_byte() {
        let all_bytes: Vec<u8> = (0..=255).collect();
        let mut file = zip_file(|zip| {
            zip.add_directory("s/", deflated()).unwrap();
            zip.start_file("s/SKILL.md", deflated()).unwrap();
            zip.write_all(b"---\nname: s\n---\n").unwrap();
            zip.start_file(
                "s/bin",
                zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored),
            )
            .unwrap();
            zip.write_all(&all_bytes).unwrap();
            zip.start_file("__MACOSX/s/._bin", deflated()).unwrap();
            zip.write_all(b"fork").unwrap();
            zip.set_comment("a comment").unwrap();
        });
        let directory = read_directory(&mut file, 10).unwrap();
        let names: Vec<&str> = directory.files.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["s/SKILL.md", "s/bin"]);
        assert_eq!(directory.files[1].size, 256);
        assert_eq!(read_all(&mut file, &directory.files[0]).unwrap(), b"---\nname: s\n---\n");
        assert_eq!(read_all(&mut file, &directory.files[1]).unwrap(), all_bytes);
    }

    #[test]
    fn the_entry_count_is_judged_before_the_directory_is_read() {
        let mut file = zip_file(|zip| {
            for n in 0..6 {
                zip.start_file(format!("s/{n}"), deflated()).unwrap();
            }
        });
        let error = read_directory(&mut file, 5).unwrap_err();
        assert!(matches!(error, ZipError::TooManyEntries { entries: 6, max: 5 }), "{error}");
        assert_eq!(read_directory(&mut file, 6).unwrap().files.len(), 6);
    }

    /// The real end record's comment holds a decoy record declaring one
    /// entry: two end records, refused, whichever a reader would pick.
    #[test]
    fn a_decoy_end_record_in_the_comment_is_refused() {
        let mut bytes = Vec::new();
        {
            let mut zip = zip::ZipWriter::new(io::Cursor::new(&mut bytes));
            for n in 0..3 {
                zip.start_file(format!("s/{n}"), deflated()).unwrap();
            }
            let mut decoy = END_RECORD.to_vec();
            decoy.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0, 46, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            zip.set_raw_comment(decoy.into_boxed_slice()).unwrap();
            zip.finish().unwrap();
        }
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let error = read_directory(&mut file, 5).unwrap_err();
        assert!(error.to_string().contains("more than one end of central directory record"), "{error}");
    }

    #[test]
    fn an_entry_that_inflates_past_its_declared_size_stops_there() {
        let mut file = zip_file(|zip| {
            zip.start_file("s/bomb", deflated()).unwrap();
            zip.write_all(&vec![0; 1 << 20]).unwrap();
        });
        let mut directory = read_directory(&mut file, 5).unwrap();
        directory.files[0].size = 1000;
        let error = read_all(&mut file, &directory.files[0]).unwrap_err();
        assert!(error.to_string().contains("inflates past the 1000 bytes it declares"), "{error}");
        directory.files[0].size = (1 << 20) + 1;
        let error = read_all(&mut file, &directory.files[0]).unwrap_err();
        assert!(error.to_string().contains("holds 1048576 of the 1048577 bytes"), "{error}");
        directory.files[0].size = 1 << 20;
        directory.files[0].crc32 ^= 1;
        let error = read_all(&mut file, &directory.files[0]).unwrap_err();
        assert!(error.to_string().contains("CRC"), "{error}");
    }

    #[test]
    fn what_is_not_a_zip_or_not_readable_here_is_named() {
        let mut junk = tempfile::tempfile().unwrap();
        junk.write_all(&[7; 100]).unwrap();
        assert!(read_directory(&mut junk, 5).unwrap_err().to_string().contains("no end of central directory"));
        // The directory entry's flags (bit 0: encrypted) and method, patched.
        for (at, value, named) in [(8, 1, "is encrypted"), (10, 12, "method 12")] {
            let mut bytes = Vec::new();
            zip_file(|zip| {
                zip.start_file("s/x", deflated()).unwrap();
                zip.write_all(b"x").unwrap();
            })
            .read_to_end(&mut bytes)
            .unwrap();
            let entry = bytes.windows(4).position(|w| w == DIRECTORY_ENTRY).unwrap();
            bytes[entry + at] = value;
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(&bytes).unwrap();
            let error = read_directory(&mut file, 5).unwrap_err();
            assert!(error.to_string().contains(named), "{error}");
        }
    }

    /// A directory of more than 65 535 entries (the classic end record
    /// overflows) and entries with zip64 sizes are read through the zip64
    /// records.
    #[test]
    fn zip64_records_and_sizes_are_read() {
        let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        let mut file = zip_file(|zip| {
            zip.start_file("s/big", stored.large_file(true)).unwrap();
            zip.write_all(b"zip64 sizes").unwrap();
            for n in 0..70_000 {
                zip.start_file(format!("s/{n}"), stored).unwrap();
            }
        });
        let directory = read_directory(&mut file, 100_000).unwrap();
        assert_eq!(directory.files.len(), 70_001);
        assert_eq!(read_all(&mut file, &directory.files[0]).unwrap(), b"zip64 sizes");
        let error = read_directory(&mut file, 70_000).unwrap_err();
        assert!(matches!(error, ZipError::TooManyEntries { entries: 70_001, .. }), "{error}");
    }

    /// Entries whose data overlap (each inflating the same bytes again) are
    /// refused before anything is inflated.
    #[test]
    fn overlapping_entries_are_refused() {
        let mut bytes = Vec::new();
        zip_file(|zip| {
            zip.start_file("s/a", deflated()).unwrap();
            zip.write_all(&[0; 4096]).unwrap();
            zip.start_file("s/b", deflated()).unwrap();
            zip.write_all(&[0; 4096]).unwrap();
        })
        .read_to_end(&mut bytes)
        .unwrap();
        let second = bytes
            .windows(4)
            .enumerate()
            .filter(|(_, w)| *w == DIRECTORY_ENTRY)
            .map(|(at, _)| at)
            .nth(1)
            .expect("two directory entries");
        bytes[second + 42..second + 46].copy_from_slice(&0u32.to_le_bytes());
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let error = read_directory(&mut file, 5).unwrap_err();
        assert!(error.to_string().contains("overlaps another entry"), "{error}");
    }
}
