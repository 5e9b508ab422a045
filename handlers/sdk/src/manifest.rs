//! Manifests (`library.toml`, `manifest.json`, …) read and deserialized
//! safely: the size is checked from the listing before any byte is read, the
//! text must be UTF-8, and the parsers' own nesting limits apply (`toml` and
//! `serde_json` both stop deep nesting with an error instead of overflowing
//! the stack). Every error is a [`Problem`] on the manifest's path.
//!
//! Tip: deserialize required fields as `Option<T>` and report the missing
//! ones yourself, so one upload shows every missing field at once instead of
//! the first one serde meets.

use serde::de::DeserializeOwned;

use crate::{FileSet, Problem};

/// A reasonable cap for a manifest: 256 KiB.
pub const DEFAULT_MAX_MANIFEST_BYTES: u64 = 256 * 1024;

/// Reads `path` (at most `max_bytes`) and deserializes it from TOML.
#[cfg(feature = "toml")]
pub fn read_toml<T: DeserializeOwned>(files: &mut dyn FileSet, path: &str, max_bytes: u64) -> Result<T, Problem> {
    let text = files.read_text(path, max_bytes)?;
    parse_toml(&text, path, max_bytes)
}

/// Deserializes TOML text that came from `path`.
#[cfg(feature = "toml")]
pub fn parse_toml<T: DeserializeOwned>(text: &str, path: &str, max_bytes: u64) -> Result<T, Problem> {
    check_size(text, path, max_bytes)?;
    // Syntax first, then the shape: a value of the wrong type in valid TOML
    // is not "not valid TOML". The toml errors name the line and column (or
    // the key) and quote the offending line; keep them, on one paragraph.
    let table: toml::Table = toml::from_str(text)
        .map_err(|error| Problem::at(path, format!("{path} is not valid TOML: {}", error.to_string().trim_end())))?;
    T::deserialize(table).map_err(|error| {
        Problem::at(path, format!("{path} has a value of the wrong kind: {}", error.to_string().trim_end()))
    })
}

/// Reads `path` (at most `max_bytes`) and deserializes it from JSON.
#[cfg(feature = "json")]
pub fn read_json<T: DeserializeOwned>(files: &mut dyn FileSet, path: &str, max_bytes: u64) -> Result<T, Problem> {
    let text = files.read_text(path, max_bytes)?;
    parse_json(&text, path, max_bytes)
}

/// Deserializes JSON text that came from `path`.
#[cfg(feature = "json")]
pub fn parse_json<T: DeserializeOwned>(text: &str, path: &str, max_bytes: u64) -> Result<T, Problem> {
    check_size(text, path, max_bytes)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(text).map_err(|error| {
        let what = match error.classify() {
            serde_json::error::Category::Data => "has a value of the wrong kind",
            _ => "is not valid JSON",
        };
        Problem::at(path, format!("{path} {what}: {error}"))
    })
}

fn check_size(text: &str, path: &str, max_bytes: u64) -> Result<(), Problem> {
    if text.len() as u64 > max_bytes {
        return Err(Problem::at(
            path,
            format!(
                "{path} is {} bytes; the limit is {max_bytes} bytes{}",
                text.len(),
                crate::text::human_size(max_bytes)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::MemoryFiles;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Manifest {
        name: Option<String>,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[cfg(feature = "toml")]
    #[test]
    fn toml_manifests() {
        let mut files = MemoryFiles::new().with("m.toml", "name = \"x\"\ntags = [\"a\"]\n");
        let manifest: Manifest = read_toml(&mut files, "m.toml", 1024).unwrap();
        assert_eq!(manifest, Manifest { name: Some("x".into()), tags: vec!["a".into()] });

        let error = parse_toml::<Manifest>("name = \n", "m.toml", 1024).unwrap_err();
        assert_eq!(error.path.as_deref(), Some("m.toml"));
        assert!(error.message.starts_with("m.toml is not valid TOML:") && error.message.contains("line 1"), "{error}");
        let error = parse_toml::<Manifest>("name = 5\n", "m.toml", 1024).unwrap_err();
        assert!(error.message.starts_with("m.toml has a value of the wrong kind:"), "{error}");
        assert!(error.message.contains("invalid type") && !error.message.contains("not valid TOML"), "{error}");
        assert_eq!(error.to_string(), error.message, "the path is not repeated in front");
        let deep = format!("x = {}", "[".repeat(100_000));
        assert!(parse_toml::<toml::Table>(&deep, "m.toml", 1 << 20).is_err());
    }

    #[cfg(feature = "json")]
    #[test]
    fn json_manifests() {
        let manifest: Manifest = parse_json("\u{feff}{\"name\": \"x\"}", "m.json", 1024).unwrap();
        assert_eq!(manifest.name.as_deref(), Some("x"));
        let error = parse_json::<Manifest>("{\"name\": }", "m.json", 1024).unwrap_err();
        assert!(error.message.starts_with("m.json is not valid JSON:") && error.message.contains("line 1"));
        let error = parse_json::<Manifest>("{\"name\": 5}", "m.json", 1024).unwrap_err();
        assert!(error.message.starts_with("m.json has a value of the wrong kind:"), "{error}");
        let deep = "[".repeat(100_000);
        assert!(parse_json::<serde_json::Value>(&deep, "m.json", 1 << 20).unwrap_err().message.contains("recursion"));
    }

    #[cfg(all(feature = "toml", feature = "json"))]
    #[test]
    fn size_is_checked_before_reading_and_parsing() {
        let mut files = MemoryFiles::new().with("m.toml", vec![b'#'; 2048]);
        let error = read_toml::<Manifest>(&mut files, "m.toml", 1024).unwrap_err();
        assert_eq!(error.message, "m.toml is 2048 bytes; the limit is 1024 bytes (1 KiB)");
        assert_eq!(files.bytes_read(), 0);
        assert!(parse_json::<Manifest>(&"1".repeat(2048), "m.json", 1024).unwrap_err().message.contains("limit"));
        let missing = read_toml::<Manifest>(&mut files, "missing.toml", 1024).unwrap_err();
        assert_eq!(missing.to_string(), "missing.toml is missing: add missing.toml to the resource", "said once");
        assert_eq!(missing.path, None);
    }
}
