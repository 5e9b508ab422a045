//! The structural names v2 reserves, and the rules for file paths inside a
//! resource. Checked before anything is written.

use std::collections::{HashMap, HashSet};

use icu_normalizer::{ComposingNormalizerBorrowed, DecomposingNormalizerBorrowed};
use icu_properties::CodePointSetData;
use icu_properties::props::DefaultIgnorableCodePoint;
use unicase::UniCase;

use super::layout::{CREATED_INDEX, FOLDER_INDEX, RESOURCE_INDEX, USAGE_DOCUMENT, VERSIONS_DIR};
use super::marker::{FOLDER_MARKER, RESOURCE_MARKER};

/// Segment that separates a resource from a file inside it in URLs.
pub const FILES_SEGMENT: &str = "files";

/// Names no resource or folder may take: the structure's own, and the
/// marker names of the layout before issue 28 (kept, so that a store being
/// migrated holds nothing named like them).
const RESERVED_NODE_NAMES: [&str; 8] = [
    FILES_SEGMENT,
    VERSIONS_DIR,
    RESOURCE_INDEX,
    FOLDER_INDEX,
    RESOURCE_MARKER,
    FOLDER_MARKER,
    CREATED_INDEX,
    USAGE_DOCUMENT,
];

/// Why a name or file path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("'{0}' is a reserved name and cannot name a resource or folder")]
    ReservedNodeName(String),
    #[error("Invalid file path '{path}': {reason}")]
    BadFilePath { path: String, reason: &'static str },
    #[error(
        "Invalid file path '{path}': '{name}' differs from '{other}' only in case or Unicode normalisation \
         (or in what macOS or Windows ignore in a name: extracted there, one would replace the other)"
    )]
    FoldedClash { path: String, name: String, other: String },
}

/// A resource or folder path: every segment must avoid the reserved names.
pub fn check_node_segments(segments: &[String]) -> Result<(), NameError> {
    match segments.iter().find(|s| RESERVED_NODE_NAMES.contains(&s.as_str())) {
        Some(reserved) => Err(NameError::ReservedNodeName(reserved.clone())),
        None => Ok(()),
    }
}

/// A file path relative to a resource root.
pub fn check_file_path(path: &str) -> Result<(), NameError> {
    let bad = |reason| Err(NameError::BadFilePath { path: path.into(), reason });
    if path.is_empty() {
        return bad("it is empty");
    }
    if path.starts_with('/') {
        return bad("it must be relative (no leading /)");
    }
    // `C:/…` or `C:file`: absolute (or drive-relative) on Windows, where
    // ZIPs of the resource get extracted.
    if let [letter, b':', ..] = path.as_bytes()
        && letter.is_ascii_alphabetic()
    {
        return bad("it must be relative (no drive letter)");
    }
    if path.contains('\\') {
        return bad("use / as the separator, not \\");
    }
    if path.chars().any(char::is_control) {
        return bad("it contains control characters");
    }
    for segment in path.split('/') {
        match segment {
            "" => return bad("it has an empty segment"),
            "." | ".." => return bad("it has a . or .. segment"),
            RESOURCE_MARKER | FOLDER_MARKER => return bad("marker names are reserved"),
            // As for resource names (SPEC §2): some stores cannot hold them.
            _ if segment.ends_with('.') => return bad("a name in it ends with . (dot)"),
            _ => {}
        }
    }
    if path.split('/').next() == Some(VERSIONS_DIR) {
        return bad("the first segment 'v' is reserved");
    }
    Ok(())
}

/// A new file path must not name a folder of files already in the set, nor
/// have one of them as a folder: `a` and `a/b` cannot both be files (no file
/// system, and no ZIP extraction, can hold both).
pub fn check_no_file_folder_clash<'a>(
    existing: impl IntoIterator<Item = &'a String>,
    path: &str,
) -> Result<(), NameError> {
    for other in existing {
        let (shorter, longer) = if other.len() < path.len() { (other.as_str(), path) } else { (path, other.as_str()) };
        if longer.strip_prefix(shorter).is_some_and(|rest| rest.starts_with('/')) {
            return Err(NameError::BadFilePath {
                path: path.into(),
                reason: if shorter == path { "it is a folder of other files" } else { "a folder of it is a file" },
            });
        }
    }
    Ok(())
}

/// The paths of one resource as a case-insensitive, normalising file
/// system sees them (macOS and Windows, where ZIPs of it get extracted):
/// two names that differ only in case or Unicode normalisation land on one
/// file or folder there, and one hides the other — a reviewed `SKILL.md`
/// replaced by an unreviewed `skill.md`. Every file path and every folder
/// above a file is kept by its folded form (NFD, Unicode full case folding,
/// NFC) with the name it was given.
#[derive(Debug, Default, Clone)]
pub struct FoldedNames {
    /// Folded form → the name it was given.
    seen: HashMap<String, String>,
    /// Names as given, folded already (a folder shared by many files is
    /// folded once).
    given: HashSet<String>,
}

impl FoldedNames {
    /// The names of a file set already stored (taken as they are, not
    /// checked against one another: a new name is checked against them).
    pub fn of<'a>(paths: impl IntoIterator<Item = &'a String>) -> Self {
        let mut names = Self::default();
        for path in paths {
            for name in prefixes(path) {
                if names.given.insert(name.to_string()) {
                    names.seen.entry(folded(name)).or_insert_with(|| name.to_string());
                }
            }
        }
        names
    }

    /// Adds `path`: refused when it or a folder above it folds to the same
    /// name as another name of the set.
    pub fn add(&mut self, path: &str) -> Result<(), NameError> {
        // A name given before is no clash with what it was checked against.
        let names: Vec<(&str, String)> =
            prefixes(path).filter(|name| !self.given.contains(*name)).map(|name| (name, folded(name))).collect();
        for (name, key) in &names {
            if let Some(other) = self.seen.get(key).filter(|other| other != name) {
                return Err(NameError::FoldedClash { path: path.into(), name: name.to_string(), other: other.clone() });
            }
        }
        for (name, key) in names {
            self.given.insert(name.to_string());
            self.seen.entry(key).or_insert_with(|| name.to_string());
        }
        Ok(())
    }
}

/// `a`, `a/b`, `a/b/c.md` for `a/b/c.md`.
fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(|(at, _)| &path[..at]).chain(std::iter::once(path))
}

/// The form two names that a case-insensitive, normalising file system
/// treats as one share: segment by segment, default-ignorable code points
/// left out (HFS+ ignores some, such as U+200C), a Windows alternate data
/// stream (`name:stream`) taken as its file, trailing spaces and dots
/// dropped (Windows drops them), then NFD, full case folding, NFC.
fn folded(name: &str) -> String {
    let ignorable = CodePointSetData::new::<DefaultIgnorableCodePoint>();
    let segments: Vec<String> = name
        .split('/')
        .map(|segment| {
            let file = segment.split(':').next().unwrap_or_default();
            let kept: String = file.chars().filter(|c| !ignorable.contains(*c)).collect();
            kept.trim_end_matches([' ', '.']).to_string()
        })
        .collect();
    let name = segments.join("/");
    // ASCII is its own NFD and NFC, and folds as it lowercases.
    if name.is_ascii() {
        return name.to_ascii_lowercase();
    }
    let decomposed = DecomposingNormalizerBorrowed::new_nfd().normalize(&name).into_owned();
    let folded = UniCase::unicode(decomposed.as_str()).to_folded_case();
    ComposingNormalizerBorrowed::new_nfc().normalize(&folded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_node_names() {
        let segments = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_node_segments(&segments(&["team", "my-skill"])).is_ok());
        for reserved in ["files", "v", ".dial-resources", ".dial-folders", ".dial-resource", ".dial-folder"] {
            assert_eq!(
                check_node_segments(&segments(&["team", reserved])),
                Err(NameError::ReservedNodeName(reserved.into()))
            );
        }
        assert!(check_node_segments(&segments(&["files-and-more", "vv"])).is_ok());
    }

    #[test]
    fn file_paths() {
        for good in ["SKILL.md", "scripts/run.sh", "a/b/c/d.txt", ".hidden", "dir/v/x", "файл.txt", "notes/12:30.md"]
        {
            assert_eq!(check_file_path(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "/abs",
            "a\\b",
            "a//b",
            "a/",
            "./a",
            "a/../b",
            "..",
            "v/x",
            "v",
            "a/.dial-resource",
            "a\nb",
            "C:/Users/me/run.bat",
            "c:run.bat",
            "x.",
            "docs./a.md",
        ] {
            assert!(check_file_path(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn a_file_cannot_also_be_a_folder() {
        let files = ["SKILL.md".to_string(), "docs/a.md".to_string()];
        assert!(check_no_file_folder_clash(&files, "docs/b.md").is_ok());
        assert!(check_no_file_folder_clash(&files, "docs2").is_ok());
        assert!(check_no_file_folder_clash(&files, "docs").is_err(), "docs is a folder of docs/a.md");
        assert!(check_no_file_folder_clash(&files, "SKILL.md/x").is_err(), "SKILL.md is a file");
    }

    #[test]
    fn names_equal_but_for_case_or_normalisation_clash() {
        let mut names = FoldedNames::default();
        names.add("SKILL.md").unwrap();
        names.add("docs/r\u{e9}sum\u{e9}.txt").unwrap();
        names.add("docs/other.txt").unwrap();
        for clash in [
            "skill.md",
            "Skill.MD",
            "docs/re\u{301}sume\u{301}.txt",
            "DOCS/x.txt",
            "skill.md/x",
            "docs/R\u{c9}SUM\u{c9}.TXT",
            "SKILL.md ",
            "SKILL.md:hidden",
            "SKI\u{200c}LL.md",
            "docs\u{feff}/x.txt",
        ] {
            let error = names.clone().add(clash).unwrap_err();
            assert!(matches!(error, NameError::FoldedClash { .. }), "{clash}: {error}");
        }
        assert!(names.clone().add("docs/third.txt").is_ok(), "a new file in a folder already there");
        assert!(
            names.clone().add("docs/other.txt").is_ok(),
            "the same name is no clash (duplicates are refused elsewhere)"
        );
        let mut german = FoldedNames::default();
        german.add("STRASSE.md").unwrap();
        assert!(german.add("stra\u{df}e.md").is_err(), "full case folding: \u{df} is ss");
        let stored = ["SKILL.md".to_string(), "skill.md".to_string()];
        let mut existing = FoldedNames::of(&stored);
        assert!(existing.add("SKILL.md").is_ok(), "a stored name may be written again");
        assert!(existing.add("Skill.md").is_err());
    }
}
