//! A prompt library: a folder of prompt templates described by `library.toml`.
//!
//! ```toml
//! name = "support-prompts"
//! description = "Prompts the support team uses for triage and replies."
//! version = "1.2.0"
//!
//! [[prompts]]
//! id = "triage"
//! file = "prompts/triage.md"
//! description = "Sorts a ticket into a queue."
//! variables = ["ticket", "product"]
//! ```
//!
//! Templates use `{{variable}}` placeholders (spaces inside the braces are
//! allowed); each one must be declared in its prompt's `variables`.
//!
//! Built to `wasm32-wasip2` this crate is a dial-host handler serving
//! `/v2/prompt-libraries/…`; natively, its rules are unit-tested (`tests.rs`).

use std::collections::{BTreeMap, BTreeSet};

use dial_handler_sdk::manifest::read_toml;
use dial_handler_sdk::text::{join_capped, shorten};
use dial_handler_sdk::{
    Description, FileSet, Handler, Limits, Metadata, Mutation, Problem, Problems, ResourceInfo, Verdict,
};
use serde::Deserialize;

pub const TYPE_NAME: &str = "prompt-library";
pub const GROUP: &str = "prompt-libraries";
pub const DISPLAY_NAME: &str = "Prompt library";

/// The file that describes the library, at its root.
pub const MANIFEST: &str = "library.toml";
const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// Largest template read; also the per-file limit the type asks the host for.
const MAX_TEMPLATE_BYTES: u64 = 1 << 20;
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;
const MAX_ID_CHARS: usize = 64;
/// The `ids` metadata value is cut after this many characters.
const MAX_IDS_METADATA_CHARS: usize = 256;

pub struct PromptLibrary;

impl Handler for PromptLibrary {
    fn describe() -> Description {
        Description::new(TYPE_NAME, GROUP, DISPLAY_NAME, env!("CARGO_PKG_VERSION")).with_limits(Limits {
            max_files: Some(500),
            max_file_bytes: Some(MAX_TEMPLATE_BYTES),
            // The host's default read budget per call, so validation can
            // always read every template.
            max_total_bytes: Some(16 << 20),
        })
    }

    fn validate(resource: &ResourceInfo, files: &mut dyn FileSet) -> Verdict {
        let mut problems = Problems::new();
        if let Some(manifest) = read_manifest(files, &mut problems) {
            check_manifest(&manifest, &mut problems);
            check_templates(&manifest, files, &mut problems);
            check_unreferenced_files(&manifest, files, &mut problems);
            if let Some(name) = manifest.name.as_deref().filter(|name| *name != resource.name) {
                problems.warning_at(
                    MANIFEST,
                    format!(
                        "Field 'name' is '{}' but the resource is named '{}'; keeping them equal makes the library \
                         easy to find",
                        shorten(name),
                        shorten(&resource.name)
                    ),
                );
            }
        }
        problems.into_verdict()
    }

    /// `name`, `description`, `version`, `prompts` (how many) and `ids`
    /// (comma-separated, cut after 256 characters). Only the manifest is read.
    fn metadata(_resource: &ResourceInfo, files: &mut dyn FileSet) -> Result<Metadata, Vec<Problem>> {
        let mut problems = Problems::new();
        let Some(manifest) = read_manifest(files, &mut problems) else {
            return problems.into_metadata(Metadata::new());
        };
        check_manifest(&manifest, &mut problems);
        let ids: Vec<&str> = manifest.prompts.iter().filter_map(|prompt| prompt.id.as_deref()).collect();
        let text = |value: &Option<String>| value.clone().unwrap_or_default();
        problems.into_metadata(vec![
            ("name".into(), text(&manifest.name)),
            ("description".into(), text(&manifest.description)),
            ("version".into(), text(&manifest.version)),
            ("prompts".into(), manifest.prompts.len().to_string()),
            ("ids".into(), join_capped(&ids, MAX_IDS_METADATA_CHARS)),
        ])
    }

    /// `library.toml` cannot be deleted; a new one is re-validated as usual.
    fn validate_file_mutation(path: &str, op: Mutation) -> Result<(), Problem> {
        if op == Mutation::Delete && path == MANIFEST {
            return Err(Problem::at(
                MANIFEST,
                "library.toml cannot be deleted: it describes the library and its prompts. Replace it with a new \
                 version, or delete the whole library",
            ));
        }
        Ok(())
    }
}

dial_handler_sdk::export_handler!(PromptLibrary);

/// `library.toml`. Required fields are options so every missing one is
/// reported at once; unknown keys are ignored (newer manifests stay loadable).
#[derive(Debug, Deserialize)]
struct Manifest {
    name: Option<String>,
    description: Option<String>,
    version: Option<String>,
    #[serde(default)]
    prompts: Vec<Prompt>,
}

#[derive(Debug, Deserialize)]
struct Prompt {
    id: Option<String>,
    file: Option<String>,
    #[allow(dead_code)] // shown to people reading the manifest; not checked
    description: Option<String>,
    #[serde(default)]
    variables: Vec<String>,
}

impl Prompt {
    /// How messages name the prompt: by its id, or by its position.
    fn label(&self, index: usize) -> String {
        match &self.id {
            Some(id) => format!("prompt '{}'", shorten(id)),
            None => format!("prompt #{}", index + 1),
        }
    }
}

fn read_manifest(files: &mut dyn FileSet, problems: &mut Problems) -> Option<Manifest> {
    if files.entry(MANIFEST).is_none() {
        let nested = files.entries().iter().find(|entry| entry.path.ends_with("/library.toml"));
        problems.error(match nested {
            Some(entry) => format!(
                "library.toml is missing at the root of the library (found {}); upload the library's files without \
                 an enclosing folder",
                entry.path
            ),
            None => "library.toml is missing: a prompt library needs a library.toml at its root with `name`, \
                     `description`, `version` and at least one [[prompts]] entry"
                .to_string(),
        });
        return None;
    }
    read_toml(files, MANIFEST, MAX_MANIFEST_BYTES).map_err(|problem| problems.push_error(problem)).ok()
}

/// Checks that need only `library.toml`.
fn check_manifest(manifest: &Manifest, problems: &mut Problems) {
    let mut required = |field: &str, value: &Option<String>, limit: usize, example: &str| match value.as_deref() {
        None => problems.error_at(MANIFEST, format!("Field '{field}' is missing; add a line such as {example}")),
        Some(text) if text.trim().is_empty() => {
            problems.error_at(MANIFEST, format!("Field '{field}' is empty; give it a value such as {example}"))
        }
        Some(text) if text.chars().count() > limit => problems.error_at(
            MANIFEST,
            format!("Field '{field}' is {} characters; the limit is {limit}", text.chars().count()),
        ),
        Some(_) => {}
    };
    required("name", &manifest.name, MAX_NAME_CHARS, "`name = \"support-prompts\"`");
    required(
        "description",
        &manifest.description,
        MAX_DESCRIPTION_CHARS,
        "`description = \"What the prompts are for\"`",
    );
    required("version", &manifest.version, usize::MAX, "`version = \"1.0.0\"`");
    if let Some(version) = manifest.version.as_deref().filter(|v| !v.trim().is_empty() && !is_version(v)) {
        problems.error_at(
            MANIFEST,
            format!("Field 'version' is '{}'; it must be a version like `1.2.0` (major.minor.patch)", shorten(version)),
        );
    }

    if manifest.prompts.is_empty() {
        problems.error_at(
            MANIFEST,
            "library.toml declares no prompts; add at least one [[prompts]] entry with an `id` and a `file`",
        );
    }
    let mut seen_ids = BTreeSet::new();
    for (index, prompt) in manifest.prompts.iter().enumerate() {
        let label = prompt.label(index);
        match prompt.id.as_deref() {
            None => problems.error_at(MANIFEST, format!("The {label} has no `id`; add one such as `id = \"triage\"`")),
            Some(id) if !is_id(id) => problems.error_at(
                MANIFEST,
                format!(
                    "The {label} has an invalid `id`: it must be 1 to {MAX_ID_CHARS} lowercase letters, digits and hyphens (e.g. \
                     `triage-v2`)"
                ),
            ),
            Some(id) if !seen_ids.insert(id) => {
                problems.error_at(MANIFEST, format!("The {label} is declared twice; each prompt `id` must be unique"))
            }
            Some(_) => {}
        }
        match prompt.file.as_deref() {
            None => problems.error_at(
                MANIFEST,
                format!("The {label} has no `file`; add the template's path, such as `file = \"prompts/triage.md\"`"),
            ),
            Some(file) if !is_relative_path(file) => problems.error_at(
                MANIFEST,
                format!(
                    "The {label} has `file` = '{}'; it must be a path relative to the library root, such as \
                     `prompts/triage.md`",
                    shorten(file)
                ),
            ),
            Some(MANIFEST) => problems.error_at(
                MANIFEST,
                format!("The {label} has `file` = library.toml, which is the manifest; point it at a template"),
            ),
            Some(_) => {}
        }
        let mut declared = BTreeSet::new();
        for variable in &prompt.variables {
            if !is_variable_name(variable) {
                problems.error_at(
                    MANIFEST,
                    format!(
                        "The {label} declares the variable '{}'; variable names are letters, digits, `_` and `-`, \
                         starting with a letter or `_`, as written in `{{{{name}}}}`",
                        shorten(variable)
                    ),
                );
            } else if !declared.insert(variable.as_str()) {
                problems.warning_at(MANIFEST, format!("The {label} declares the variable '{variable}' twice"));
            }
        }
    }
}

/// Reads each prompt's template (once per file) and checks its placeholders
/// against the prompt's `variables`.
fn check_templates(manifest: &Manifest, files: &mut dyn FileSet, problems: &mut Problems) {
    let mut templates: BTreeMap<&str, Option<Vec<String>>> = BTreeMap::new();
    for (index, prompt) in manifest.prompts.iter().enumerate() {
        let Some(file) = prompt.file.as_deref().filter(|file| is_relative_path(file) && *file != MANIFEST) else {
            continue;
        };
        let label = prompt.label(index);
        if files.entry(file).is_none() {
            problems.error_at(
                MANIFEST,
                format!("The {label} uses the file {file}, which is not in the library; add the file or fix `file`"),
            );
            continue;
        }
        let used = templates.entry(file).or_insert_with(|| match files.read_text(file, MAX_TEMPLATE_BYTES) {
            Ok(text) => Some(placeholders(&text).into_iter().map(str::to_string).collect()),
            Err(error) => {
                problems.push_error(error.into());
                None
            }
        });
        let Some(used) = used else { continue };
        for variable in used.iter().filter(|used| !prompt.variables.contains(used)) {
            problems.error_at(
                file,
                format!(
                    "{file} uses {{{{{variable}}}}}, but {} does not declare it; add \"{variable}\" to its \
                     `variables` in library.toml",
                    label
                ),
            );
        }
        let mut unused: Vec<&String> = Vec::new();
        for variable in &prompt.variables {
            if is_variable_name(variable) && !used.contains(variable) && !unused.contains(&variable) {
                unused.push(variable);
            }
        }
        for variable in unused {
            problems.warning_at(
                MANIFEST,
                format!("The {label} declares the variable '{variable}', but {file} never uses {{{{{variable}}}}}"),
            );
        }
    }
}

/// Files no prompt points at, except `library.toml` and a root `README.md`.
fn check_unreferenced_files(manifest: &Manifest, files: &dyn FileSet, problems: &mut Problems) {
    let referenced: BTreeSet<&str> = manifest.prompts.iter().filter_map(|prompt| prompt.file.as_deref()).collect();
    for entry in files.entries() {
        let path = entry.path.as_str();
        if path != MANIFEST && path != "README.md" && !referenced.contains(path) {
            problems.warning_at(
                path,
                format!("{path} is not used by any prompt; reference it from a [[prompts]] entry or remove it"),
            );
        }
    }
}

/// The distinct `{{name}}` placeholders of a template, in order of first use.
/// Braces around anything else (`{{ two words }}`, `{{#if}}`) are text.
/// Linear in the template's length, whatever it contains.
fn placeholders(text: &str) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        // Only ASCII name characters and blanks may sit between the braces.
        let inner_len =
            after.bytes().take_while(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b' ' | b'\t')).count();
        let name = after[..inner_len].trim();
        if after[inner_len..].starts_with("}}") && is_variable_name(name) {
            if !found.contains(&name) {
                found.push(name);
            }
            rest = &after[inner_len + 2..];
        } else {
            rest = &rest[start + 1..];
        }
    }
    found
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= MAX_ID_CHARS
}

fn is_id(id: &str) -> bool {
    (1..=MAX_ID_CHARS).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// `major.minor.patch`, each a number, optionally followed by a `-pre` or
/// `+build` suffix as in semver.
fn is_version(version: &str) -> bool {
    let (core, suffix) = match version.find(['-', '+']) {
        Some(at) => (&version[..at], Some(&version[at + 1..])),
        None => (version, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3
        && numbers.iter().all(|n| (1..=9).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
        && suffix.is_none_or(|s| {
            !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
        })
}

/// A path inside the library: relative, `/`-separated, no `.`/`..`/empty segments.
fn is_relative_path(path: &str) -> bool {
    !path.contains('\\') && path.split('/').all(|segment| !matches!(segment, "" | "." | ".."))
}

#[cfg(test)]
mod tests;
