//! The structural names v2 reserves, and the rules for file paths inside a
//! resource. Checked before anything is written.

use super::layout::{FOLDER_INDEX, RESOURCE_INDEX, VERSIONS_DIR};
use super::marker::{FOLDER_MARKER, RESOURCE_MARKER};

/// Segment that separates a resource from a file inside it in URLs.
pub const FILES_SEGMENT: &str = "files";

/// Names no resource or folder may take: the structure's own, and the
/// marker names of the layout before issue 28 (kept, so that a store being
/// migrated holds nothing named like them).
const RESERVED_NODE_NAMES: [&str; 6] =
    [FILES_SEGMENT, VERSIONS_DIR, RESOURCE_INDEX, FOLDER_INDEX, RESOURCE_MARKER, FOLDER_MARKER];

/// Why a name or file path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("'{0}' is a reserved name and cannot name a resource or folder")]
    ReservedNodeName(String),
    #[error("Invalid file path '{path}': {reason}")]
    BadFilePath { path: String, reason: &'static str },
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
}
