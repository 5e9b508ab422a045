//! The Agent Skills rules (SPEC §5): what makes a skill invalid (errors), what
//! is accepted but reported (warnings), and the metadata kept in the marker.

use dial_handler_sdk::frontmatter::{Frontmatter, Node, Scalar, ScalarKind};
use dial_handler_sdk::text::{self, shorten};
use dial_handler_sdk::{
    Checked, Description, FileEntry, FileError, FileSet, Handler, Metadata, Mutation, Problem, Problems, ResourceInfo,
    Verdict,
};

pub const TYPE_NAME: &str = "skill";
pub const GROUP: &str = "skills";
pub const DISPLAY_NAME: &str = "Agent skill";

/// The file that defines a skill, at the resource root.
pub const SKILL_FILE: &str = "SKILL.md";
/// Largest `SKILL.md` accepted, in bytes (1 MiB).
pub const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;
const FRONTMATTER: Frontmatter = Frontmatter::new(SKILL_FILE).requiring("the fields `name` and `description`");
/// The marker metadata entry holding the frontmatter as compact JSON.
pub const FRONTMATTER_KEY: &str = "frontmatter";

const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;
const MAX_COMPATIBILITY_CHARS: usize = 500;
/// Top-level fields of the spec, plus `version`, which DIAL accepts silently.
const KNOWN_FIELDS: [&str; 7] =
    ["name", "description", "license", "compatibility", "metadata", "allowed-tools", "version"];

/// The Agent Skills type: `/v2/skills/…`.
pub struct SkillHandler;

impl Handler for SkillHandler {
    fn describe() -> Description {
        Description::new(TYPE_NAME, GROUP, DISPLAY_NAME, env!("CARGO_PKG_VERSION"))
    }

    fn validate(resource: &ResourceInfo, files: &mut dyn FileSet) -> Verdict {
        inspect(resource, files).problems.into_verdict()
    }

    /// Marker metadata, in order: `name`, `description`, `version`, `license`
    /// (each only when present). Invalid sets give the same errors as `validate`.
    fn metadata(resource: &ResourceInfo, files: &mut dyn FileSet) -> Result<Metadata, Vec<Problem>> {
        let report = inspect(resource, files);
        report.problems.into_metadata(report.marker)
    }

    /// One read and one parse of `SKILL.md` for a commit.
    fn check(resource: &ResourceInfo, files: &mut dyn FileSet) -> Checked {
        let report = inspect(resource, files);
        report.problems.into_checked(report.marker)
    }

    /// `SKILL.md` cannot be deleted. A PUT of it is re-validated by `validate`
    /// on the new file set.
    fn validate_file_mutation(path: &str, op: Mutation) -> Result<(), Problem> {
        if op == Mutation::Delete && path == SKILL_FILE {
            return Err(Problem::at(
                SKILL_FILE,
                "SKILL.md cannot be deleted: it defines the skill (its name and description). Replace it with a new \
                 version, or delete the whole skill",
            ));
        }
        Ok(())
    }
}

/// Every problem is about `SKILL.md`; the metadata is gathered on the way.
#[derive(Default)]
struct Report {
    problems: Problems,
    marker: Metadata,
}

impl Report {
    fn error(&mut self, message: impl Into<String>) {
        self.problems.error_at(SKILL_FILE, message);
    }

    fn warning(&mut self, message: impl Into<String>) {
        self.problems.warning_at(SKILL_FILE, message);
    }
}

fn inspect(resource: &ResourceInfo, files: &mut dyn FileSet) -> Report {
    let mut report = Report::default();
    if files.entry(SKILL_FILE).is_none() {
        report.problems.push_error(missing_skill_file(files.entries()));
        return report;
    }
    // An oversized file is refused from its listed size, never read.
    let text = match files.read_text(SKILL_FILE, MAX_SKILL_FILE_BYTES) {
        Ok(text) => text,
        Err(error @ FileError::TooLarge { .. }) => {
            report.error(format!("{error}. Move detailed content into other files of the skill"));
            return report;
        }
        Err(error) => {
            report.error(error.to_string());
            return report;
        }
    };
    // A stray control character is reported, but the frontmatter is still
    // checked so every problem comes back at once.
    if let Some(message) = text::find_control_char(&text, SKILL_FILE) {
        report.error(message);
    }
    match FRONTMATTER.read(&text) {
        Ok(fields) => check_fields(&fields, resource, &mut report),
        Err(message) => report.error(message),
    }
    report
}

fn missing_skill_file(files: &[FileEntry]) -> Problem {
    let miscased = files.iter().find(|file| file.path.eq_ignore_ascii_case(SKILL_FILE));
    let nested = files.iter().find(|file| file.path.ends_with("/SKILL.md"));
    match (miscased, nested) {
        (Some(file), _) => Problem::at(&file.path, format!("Found {}; the file must be named SKILL.md", file.path)),
        (None, Some(file)) => Problem::new(format!(
            "SKILL.md is missing at the root of the skill (found {}); upload the skill's files without an enclosing \
             folder",
            file.path
        )),
        (None, None) => Problem::new(
            "SKILL.md is missing: a skill needs a SKILL.md file at its root with YAML frontmatter giving at least \
             `name` and `description`",
        ),
    }
}

fn check_fields(fields: &[(Scalar, Node)], resource: &ResourceInfo, report: &mut Report) {
    let field = |key: &str| fields.iter().find(|(name, _)| name.text == key).map(|(_, value)| value);

    if let Some(name) = required_string(field("name"), "name", "my-skill", report) {
        check_name(name, resource, report);
        report.marker.push(("name".into(), name.to_string()));
    }
    if let Some(description) =
        required_string(field("description"), "description", "What the skill does and when to use it", report)
    {
        check_length("description", description, MAX_DESCRIPTION_CHARS, report);
        report.marker.push(("description".into(), description.to_string()));
    }
    let license = field("license").and_then(|value| string_value("license", value, report));
    if let Some(compatibility) = field("compatibility").and_then(|value| string_value("compatibility", value, report)) {
        if compatibility.trim().is_empty() {
            report.error(
                "Field 'compatibility' is empty; describe the environment the skill needs or \
                 remove the field",
            );
        }
        check_length("compatibility", compatibility, MAX_COMPATIBILITY_CHARS, report);
    }
    let top_level_version = field("version").and_then(|value| string_value("version", value, report));
    let (metadata_version, entries) = field("metadata").map(|value| check_metadata(value, report)).unwrap_or_default();
    if let Some(tools) = field("allowed-tools") {
        check_allowed_tools(tools, report);
    }

    if let Some(version) = metadata_version.or(top_level_version) {
        report.marker.push(("version".into(), version.to_string()));
    }
    if let Some(license) = license {
        report.marker.push(("license".into(), license.to_string()));
    }
    // The rest of `metadata` is cached too (listings show it without reading
    // SKILL.md), as `metadata.<key>`, nested values as compact JSON.
    report.marker.extend(entries);
    // The whole frontmatter as JSON, for agents that take it verbatim (the
    // MCP Skills Extension's `frontmatter`) without reading SKILL.md. The
    // reader bounds it (64 KiB of YAML).
    report.marker.push((FRONTMATTER_KEY.into(), Node::Mapping(fields.to_vec()).to_compact_json()));

    for (key, _) in fields {
        if !KNOWN_FIELDS.contains(&key.text.as_str()) {
            report.warning(unknown_field_message(&shorten(&key.text)));
        }
    }
}

/// A required string field: present, a string, and not blank.
fn required_string<'a>(value: Option<&'a Node>, field: &str, example: &str, report: &mut Report) -> Option<&'a str> {
    let Some(value) = value else {
        report.error(format!(
            "Field '{field}' is missing from the frontmatter; add a line such as `{field}: \
             {example}`"
        ));
        return None;
    };
    let text = string_value(field, value, report)?;
    if text.trim().is_empty() {
        report.error(format!("Field '{field}' is empty; give it a value such as `{field}: {example}`"));
        return None;
    }
    Some(text)
}

/// The text of a string value, or an error naming the field and the fix.
fn string_value<'a>(field: &str, value: &'a Node, report: &mut Report) -> Option<&'a str> {
    let text = value.as_str();
    if text.is_none() {
        report.error(not_a_string_message(field, value));
    }
    text
}

fn not_a_string_message(field: &str, value: &Node) -> String {
    match value {
        Node::Scalar(scalar) if scalar.kind == ScalarKind::Null && scalar.text.is_empty() => {
            format!("Field '{field}' is empty; it must be a string, so give it a value or remove it")
        }
        // The fix is written as the line to type, so a metadata entry shows
        // its own key rather than the `metadata.` label.
        Node::Scalar(scalar) => format!(
            "Field '{field}' must be a string, but `{text}` is read as {kind}; put it in quotes: \
             {key}: \"{text}\"",
            key = field.strip_prefix("metadata.").unwrap_or(field),
            text = shorten(&scalar.text),
            kind = value.describe(),
        ),
        _ => format!("Field '{field}' must be a string, but it is {}", value.describe()),
    }
}

fn check_length(field: &str, text: &str, limit: usize, report: &mut Report) {
    let chars = text.chars().count();
    if chars > limit {
        report.error(format!("Field '{field}' is {chars} characters; the limit is {limit}"));
    }
}

fn check_name(name: &str, resource: &ResourceInfo, report: &mut Report) {
    check_length("name", name, MAX_NAME_CHARS, report);

    // The spec's prose allows Unicode lowercase alphanumerics (its reference
    // validator accepts `技能` and `мой-навык`), so only uppercase letters,
    // punctuation and spaces are flagged.
    let mut invalid_chars: Vec<char> = Vec::new();
    for c in name.chars() {
        let allowed = c == '-' || (c.is_alphanumeric() && !c.is_uppercase());
        if !allowed && !invalid_chars.contains(&c) {
            invalid_chars.push(c);
        }
    }
    let mut issues = Vec::new();
    if !invalid_chars.is_empty() {
        let shown: Vec<String> = invalid_chars.iter().map(|c| format!("'{c}'")).collect();
        issues.push(format!("contains {}", shown.join(", ")));
    }
    if name.starts_with('-') || name.ends_with('-') {
        issues.push("starts or ends with a hyphen".to_string());
    }
    if name.contains("--") {
        issues.push("contains `--`".to_string());
    }
    if !issues.is_empty() {
        report.warning(format!(
            "Field 'name' is '{name}', which {}; the Agent Skills spec wants lowercase letters, \
             digits and single hyphens inside the name (e.g. `my-skill`), and other Agent Skills \
             tools may reject this name",
            issues.join(" and ")
        ));
    }

    if name != resource.name {
        report.warning(format!(
            "Field 'name' is '{name}' but the resource is named '{}'; the Agent Skills spec \
             wants them to be equal",
            resource.name
        ));
    }
}

/// Checks `metadata` is a string→string map; returns `metadata.version` and
/// the other entries to cache (`metadata.<key>` → value). A nested list or
/// mapping is only a warning: real published skills use them and the
/// reference validator accepts them; it is cached as compact JSON.
fn check_metadata<'a>(value: &'a Node, report: &mut Report) -> (Option<&'a str>, Metadata) {
    let Node::Mapping(entries) = value else {
        report.error(format!(
            "Field 'metadata' must be a mapping of string keys to string values, but it is {}",
            value.describe()
        ));
        return (None, Metadata::new());
    };
    let mut version = None;
    let mut cached = Metadata::new();
    for (key, value) in entries {
        if key.kind != ScalarKind::String {
            report.error(format!(
                "Key `{}` in 'metadata' is read as {}; metadata keys must be strings, so put it \
                 in quotes",
                shorten(&key.text),
                key.describe()
            ));
            continue;
        }
        let field = format!("metadata.{}", shorten(&key.text));
        if matches!(value, Node::Mapping(_) | Node::Sequence(_)) {
            report.warning(format!(
                "Field '{field}' is {}, but the Agent Skills spec wants 'metadata' to map strings to strings; \
                 other tools may read it differently or reject it",
                value.describe()
            ));
            cached.push((format!("metadata.{}", key.text), value.to_compact_json()));
            continue;
        }
        let text = string_value(&field, value, report);
        match text {
            Some(text) if key.text == "version" => version = Some(text),
            Some(text) => cached.push((format!("metadata.{}", key.text), text.to_string())),
            None => {}
        }
    }
    (version, cached)
}

fn check_allowed_tools(value: &Node, report: &mut Report) {
    let valid = match value {
        Node::Sequence(items) => items.iter().all(|item| item.as_str().is_some()),
        other => other.as_str().is_some(),
    };
    if !valid {
        report.error(format!(
            "Field 'allowed-tools' must be a space-separated string (e.g. `allowed-tools: Read \
             Bash(git:*)`) or a list of strings, but it is {}",
            match value {
                Node::Sequence(_) => "a list with a value that is not a string",
                other => other.describe(),
            }
        ));
    }
}

fn unknown_field_message(key: &str) -> String {
    let lowercase = key.to_lowercase();
    let hint = if key != lowercase && KNOWN_FIELDS.contains(&lowercase.as_str()) {
        format!(" (did you mean '{lowercase}'? field names are case-sensitive)")
    } else {
        String::new()
    };
    format!(
        "Unknown top-level field '{key}'{hint}; the Agent Skills spec defines name, description, \
         license, compatibility, metadata and allowed-tools, and other tools may ignore or reject it"
    )
}

#[cfg(test)]
mod tests {
    use dial_handler_sdk::{DEFAULT_MAX_PROBLEMS as MAX_PROBLEMS, MemoryFiles};

    use super::*;

    fn resource() -> ResourceInfo {
        ResourceInfo::at("team/my-skill")
    }

    /// These files, served from memory like the host's `files.read`.
    fn file_set(files: &[(&str, &[u8])]) -> MemoryFiles {
        files.iter().fold(MemoryFiles::new(), |set, (path, bytes)| set.with(*path, *bytes))
    }

    fn validate(files: &mut MemoryFiles) -> Verdict {
        SkillHandler::validate(&resource(), files)
    }

    fn validate_file_mutation(path: &str, op: Mutation) -> Result<(), Problem> {
        SkillHandler::validate_file_mutation(path, op)
    }

    fn run_files(files: &[(&str, &[u8])]) -> Verdict {
        validate(&mut file_set(files))
    }

    fn marker_of_bytes(skill_md: &[u8]) -> Result<Metadata, Vec<Problem>> {
        SkillHandler::metadata(&resource(), &mut file_set(&[(SKILL_FILE, skill_md)]))
    }

    fn run_bytes(skill_md: &[u8]) -> Verdict {
        run_files(&[(SKILL_FILE, skill_md)])
    }

    /// A SKILL.md with these frontmatter lines and a short body.
    fn skill_md(frontmatter: &str) -> String {
        format!("---\n{frontmatter}---\n# Instructions\n\nDo the thing.\n")
    }

    const VALID: &str = "name: my-skill\ndescription: Does things. Use when asked.\n";

    fn messages(problems: &[Problem]) -> Vec<&str> {
        problems.iter().map(|p| p.message.as_str()).collect()
    }

    fn errors_of(result: Result<Vec<Problem>, Vec<Problem>>) -> Vec<String> {
        match result {
            Ok(warnings) => panic!("expected errors, got Ok with warnings {warnings:?}"),
            Err(errors) => errors.into_iter().map(|p| p.message).collect(),
        }
    }

    fn warnings_of(result: Result<Vec<Problem>, Vec<Problem>>) -> Vec<String> {
        match result {
            Ok(warnings) => warnings.into_iter().map(|p| p.message).collect(),
            Err(errors) => panic!("expected Ok, got errors {:?}", messages(&errors)),
        }
    }

    /// The errors alone (a rejected verdict lists the warnings after them).
    fn errors_for(frontmatter: &str) -> Vec<String> {
        let mut files = file_set(&[(SKILL_FILE, skill_md(frontmatter).as_bytes())]);
        let errors: Vec<String> =
            inspect(&resource(), &mut files).problems.errors().iter().map(|p| p.message.clone()).collect();
        assert!(!errors.is_empty(), "expected errors for {frontmatter:?}");
        errors
    }

    fn warnings_for(frontmatter: &str) -> Vec<String> {
        warnings_of(run_bytes(skill_md(frontmatter).as_bytes()))
    }

    /// Asserts exactly one error, containing every fragment.
    fn assert_one_error(frontmatter: &str, fragments: &[&str]) {
        let errors = errors_for(frontmatter);
        assert_eq!(errors.len(), 1, "{errors:?}");
        for fragment in fragments {
            assert!(errors[0].contains(fragment), "{fragment:?} not in {:?}", errors[0]);
        }
    }

    fn marker(frontmatter: &str) -> Vec<(String, String)> {
        marker_of_bytes(skill_md(frontmatter).as_bytes()).unwrap()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// `check` (one parse per commit) says what `validate` then `metadata`
    /// say, on valid, warned and invalid skills alike.
    #[test]
    fn check_agrees_with_validate_then_metadata() {
        let cases: Vec<Vec<u8>> = vec![
            skill_md(VALID).into_bytes(),
            skill_md(&format!("{VALID}license: MIT\nversion: 2.0.1\nextra: 1\n")).into_bytes(),
            skill_md("name: My Skill\ndescription: d\n").into_bytes(),
            skill_md("name: my-skill\n").into_bytes(),
            b"no frontmatter at all".to_vec(),
            vec![0xff, 0xfe],
        ];
        for bytes in cases {
            let expected = SkillHandler::validate(&resource(), &mut file_set(&[(SKILL_FILE, &bytes)]))
                .and_then(|warnings| Ok((warnings, marker_of_bytes(&bytes)?)));
            let checked = SkillHandler::check(&resource(), &mut file_set(&[(SKILL_FILE, &bytes)]));
            assert_eq!(checked, expected, "{}", String::from_utf8_lossy(&bytes));
        }
        let expected = run_files(&[("README.md", b"hi")]);
        assert_eq!(
            SkillHandler::check(&resource(), &mut file_set(&[("README.md", b"hi")])),
            expected.map(|w| (w, vec![]))
        );
    }

    #[test]
    fn valid_skill_has_no_problems() {
        assert_eq!(warnings_for(VALID), Vec::<String>::new());
        let full = format!(
            "{VALID}license: Apache-2.0\ncompatibility: Needs git\nallowed-tools: Read Grep\n\
             metadata:\n  author: me\n  version: \"1.0\"\n"
        );
        assert_eq!(warnings_for(&full), Vec::<String>::new());
        assert_eq!(warnings_for(&format!("{VALID}allowed-tools:\n  - Read\n  - Grep\n")).len(), 0);
    }

    #[test]
    fn ten_file_skill_validates() {
        let skill = skill_md(VALID);
        let mut files: Vec<(&str, &[u8])> = vec![(SKILL_FILE, skill.as_bytes())];
        let others = [
            "scripts/a.py",
            "scripts/b.sh",
            "references/REFERENCE.md",
            "references/FORMS.md",
            "assets/logo.png",
            "assets/template.docx",
            "assets/data.csv",
            "LICENSE.txt",
            "README.md",
        ];
        files.extend(others.iter().map(|path| (*path, &b"\xff\x00binary"[..])));
        assert_eq!(files.len(), 10);
        assert_eq!(warnings_of(run_files(&files)), Vec::<String>::new());
    }

    #[test]
    fn missing_skill_file() {
        let errors = run_files(&[("README.md", b"hi")]).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, None);
        assert!(errors[0].message.contains("SKILL.md is missing"));

        let skill = skill_md(VALID);
        let errors = run_files(&[("skill.md", skill.as_bytes())]).unwrap_err();
        assert_eq!(errors[0].path.as_deref(), Some("skill.md"));
        assert!(errors[0].message.contains("Found skill.md; the file must be named SKILL.md"));

        let errors = errors_of(run_files(&[("my-skill/SKILL.md", skill.as_bytes())]));
        assert!(errors[0].contains("found my-skill/SKILL.md"), "{errors:?}");
    }

    #[test]
    fn oversized_skill_file_is_rejected_from_its_listed_size() {
        let mut files = MemoryFiles::new().with(SKILL_FILE, vec![b'x'; MAX_SKILL_FILE_BYTES as usize + 1]);
        let errors = validate(&mut files).unwrap_err();
        assert!(errors[0].message.contains("1048577 bytes; the limit is 1048576"));
        assert_eq!(files.bytes_read(), 0, "decided from the listing alone");
    }

    #[test]
    fn skill_file_of_exactly_one_mebibyte_is_read_in_full() {
        let mut skill = skill_md(VALID).into_bytes();
        skill.resize(MAX_SKILL_FILE_BYTES as usize, b'x');
        assert_eq!(warnings_of(run_bytes(&skill)), Vec::<String>::new());
    }

    #[test]
    fn read_errors_are_reported() {
        let errors = validate(&mut MemoryFiles::new().list_only(SKILL_FILE, 10)).unwrap_err();
        assert!(errors[0].message.contains("could not be found"));
        let skill = skill_md(VALID);
        let errors = validate(&mut file_set(&[(SKILL_FILE, skill.as_bytes())]).with_read_budget(10)).unwrap_err();
        assert!(errors[0].message.contains("read budget of 10 bytes"), "{errors:?}");
    }

    #[test]
    fn text_encoding_rules() {
        let mut bytes = skill_md(VALID).into_bytes();
        bytes.extend_from_slice(b"caf\xe9\n");
        let errors = errors_of(run_bytes(&bytes));
        let offset = bytes.len() - 2;
        assert!(errors[0].contains(&format!("first invalid byte is at byte offset {offset}")));

        let with_nul = skill_md(VALID) + "a\0b\n";
        let errors = errors_of(run_bytes(with_nul.as_bytes()));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("control character U+0000"));
        assert!(errors_for(&format!("{VALID}license: a\x07b\n"))[0].contains("U+0007"));
    }

    #[test]
    fn bom_and_crlf_are_tolerated() {
        let with_bom = format!("\u{feff}{}", skill_md(VALID));
        assert_eq!(warnings_of(run_bytes(with_bom.as_bytes())).len(), 0);
        let crlf = skill_md(VALID).replace('\n', "\r\n");
        assert_eq!(warnings_of(run_bytes(crlf.as_bytes())).len(), 0);
        assert_eq!(marker(VALID), marker_of_bytes(crlf.as_bytes()).unwrap());
    }

    #[test]
    fn frontmatter_delimiters() {
        let no_frontmatter = errors_of(run_bytes(b"# My skill\n"));
        assert!(no_frontmatter[0].contains("must start with YAML frontmatter"));
        let unterminated = errors_of(run_bytes(format!("---\n{VALID}# Body\n").as_bytes()));
        assert!(unterminated[0].contains("not closed"));
        // `---` inside a value and a `----` line do not end the frontmatter.
        let inside = "name: my-skill\ndescription: before --- after\n";
        assert_eq!(marker(inside)[1].1, "before --- after");
        let dashes = format!("{VALID}----\n");
        assert!(errors_for(&dashes)[0].contains("not valid YAML"));
        let trailing_spaces = format!("--- \t\n{VALID}---  \n");
        assert_eq!(warnings_of(run_bytes(trailing_spaces.as_bytes())).len(), 0);
    }

    #[test]
    fn huge_frontmatter_is_capped_before_parsing() {
        let huge = format!("{VALID}license: \"{}\"\n", "x".repeat(1024 * 1024 - 200));
        let errors = errors_of(run_bytes(skill_md(&huge).as_bytes()));
        assert!(errors[0].contains("the limit is 65536 bytes (64 KiB)"), "{errors:?}");

        let many_keys: String = (0..10_000).map(|i| format!("  key{i:05}: value\n")).collect();
        assert_one_error(&format!("{VALID}metadata:\n{many_keys}"), &["64 KiB"]);

        let some_keys: String = (0..2_000).map(|i| format!("  k{i}: v\n")).collect();
        assert_eq!(warnings_for(&format!("{VALID}metadata:\n{some_keys}")).len(), 0);
    }

    #[test]
    fn yaml_syntax_errors() {
        assert_one_error(&format!("{VALID}\tlicense: MIT\n"), &["not valid YAML", "line 4", "indented with a tab"]);
        assert_one_error(
            "name: my-skill\ndescription: Use when: asked\n",
            &["not valid YAML", "line 3", "must be quoted"],
        );
        // A tab inside a quoted value is just text.
        assert_eq!(warnings_for("name: my-skill\ndescription: \"a\tb\"\n").len(), 0);
        assert_one_error("- name\n- description\n", &["must be a YAML mapping", "a list"]);
        assert_one_error("", &["frontmatter of SKILL.md is empty"]);
    }

    #[test]
    fn duplicate_keys_are_rejected_at_any_level() {
        assert_one_error(&format!("{VALID}name: other\n"), &["Duplicate key 'name' at line 4", "first at line 2"]);
        assert_one_error(&format!("{VALID}metadata:\n  a: x\n  a: y\n"), &["Duplicate key 'a'"]);
    }

    #[test]
    fn anchors_aliases_and_tags_are_rejected() {
        assert_one_error(&format!("{VALID}license: &l MIT\ncompatibility: *l\n"), &["anchors"]);
        assert_one_error(&format!("{VALID}license: *undefined\n"), &["aliases"]);
        let bomb = "a: &a [\"lol\",\"lol\"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n\
                    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n";
        assert_one_error(&format!("{VALID}{bomb}"), &["anchors", "line 4"]);
        assert_one_error("name: !!str my-skill\ndescription: x\n", &["tags such as '!!str'"]);
    }

    #[test]
    fn nesting_deeper_than_eight_is_rejected() {
        let deep: String = (1..=8).map(|level| format!("{}k{level}:\n", "  ".repeat(level))).collect();
        let depth_9 = format!("{VALID}metadata:\n{deep}{}leaf: x\n", "  ".repeat(9));
        assert_one_error(&depth_9, &["nested more than 8 levels"]);
    }

    #[test]
    fn required_fields() {
        assert_one_error("description: x\n", &["Field 'name' is missing"]);
        assert_one_error("name: my-skill\n", &["Field 'description' is missing"]);
        assert_one_error("name: \"  \"\ndescription: x\n", &["Field 'name' is empty"]);
        assert_one_error("name: my-skill\ndescription:\n", &["Field 'description' is empty"]);
        assert_eq!(errors_for("Name: my-skill\nDescription: x\n").len(), 2);
    }

    #[test]
    fn typed_scalars_are_not_strings() {
        for (value, kind) in [("123", "a number"), ("true", "a boolean"), ("null", "null"), ("1.0", "a number")] {
            assert_one_error(
                &format!("name: {value}\ndescription: x\n"),
                &["Field 'name' must be a string", kind, &format!("name: \"{value}\"")],
            );
        }
        assert_one_error("name: my-skill\ndescription: 1.0\n", &["Field 'description' must be a string"]);
        assert_eq!(marker("name: \"123\"\ndescription: x\n")[0].1, "123");
        assert_one_error(&format!("{VALID}license: 2\n"), &["Field 'license' must be a string"]);
        assert_one_error(&format!("{VALID}name2: x\nversion: 1.0\n"), &["Field 'version'", "version: \"1.0\""]);
        assert_one_error("name:\n  - a\ndescription: x\n", &["Field 'name' must be a string, but it is a list"]);
    }

    #[test]
    fn length_limits_count_characters() {
        let name_64 = "a".repeat(64);
        assert!(warnings_for(&format!("name: {name_64}\ndescription: x\n")).iter().all(|w| !w.contains("characters")));
        assert_one_error(
            &format!("name: {}\ndescription: x\n", "a".repeat(65)),
            &["Field 'name' is 65 characters; the limit is 64"],
        );
        // 1024 two-byte characters are 2048 bytes but within the limit.
        assert_eq!(warnings_for(&format!("name: my-skill\ndescription: {}\n", "é".repeat(1024))).len(), 0);
        assert_one_error(
            &format!("name: my-skill\ndescription: {}\n", "é".repeat(1025)),
            &["Field 'description' is 1025 characters; the limit is 1024"],
        );
        assert_eq!(warnings_for(&format!("{VALID}compatibility: {}\n", "c".repeat(500))).len(), 0);
        assert_one_error(
            &format!("{VALID}compatibility: {}\n", "c".repeat(501)),
            &["Field 'compatibility' is 501 characters; the limit is 500"],
        );
        assert_one_error(&format!("{VALID}compatibility: \"\"\n"), &["Field 'compatibility' is empty"]);
    }

    #[test]
    fn name_charset_warnings() {
        for unicode in ["技能", "мой-навык", "pdf-tools-2"] {
            let found = warnings_for(&format!("name: {unicode}\ndescription: x\n"));
            assert!(found.iter().all(|w| !w.contains("spec wants lowercase")), "{unicode}: {found:?}");
        }
        for (name, issue) in [
            ("Café", "'C'"),
            ("My Skill", "'M', ' ', 'S'"),
            ("-pdf", "hyphen"),
            ("pdf-", "hyphen"),
            ("pdf--tools", "`--`"),
            ("pdf_tools", "'_'"),
        ] {
            let found = warnings_for(&format!("name: {name}\ndescription: x\n"));
            let charset: Vec<_> = found.iter().filter(|w| w.contains("spec wants lowercase")).collect();
            assert_eq!(charset.len(), 1, "{name}: {found:?}");
            assert!(
                charset[0].contains(issue)
                    && charset[0].contains("`my-skill`")
                    && charset[0].contains("may reject this name")
                    && !charset[0].contains("accepted"),
                "worded to fit a warning and, in strict mode, an error: {}",
                charset[0]
            );
        }
    }

    #[test]
    fn name_must_match_the_resource_name() {
        let found = warnings_for("name: other-skill\ndescription: x\n");
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("'other-skill' but the resource is named 'my-skill'"));
    }

    #[test]
    fn unknown_fields_warn_but_version_does_not() {
        let found = warnings_for(&format!("{VALID}argument-hint: \"[file]\"\n"));
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("Unknown top-level field 'argument-hint'"));
        assert_eq!(warnings_for(&format!("{VALID}version: \"2.1\"\n")).len(), 0);
        let problems = run_bytes(skill_md("Name: x\nname: my-skill\ndescription: x\n").as_bytes()).unwrap();
        assert!(problems[0].message.contains("did you mean 'name'"));
        assert_eq!(problems[0].path.as_deref(), Some(SKILL_FILE));
    }

    #[test]
    fn problems_are_capped_and_long_keys_shortened() {
        let bad_keys: String = (0..500).map(|i| format!("  {i}: x\n")).collect();
        let errors = errors_for(&format!("{VALID}metadata:\n{bad_keys}"));
        assert_eq!(errors.len(), MAX_PROBLEMS + 1);
        assert!(errors[MAX_PROBLEMS].contains("More problems"));
        let long_key = "k".repeat(1000);
        let warnings = warnings_for(&format!("{VALID}{long_key}: x\n"));
        assert!(warnings[0].len() < 500 && warnings[0].contains("kkk…'"));
    }

    #[test]
    fn a_rejected_skill_reports_every_problem_at_once() {
        let frontmatter = "name: My Skill\ndescription: 5\ncompatibility: \"\"\nextra: 1\n";
        assert_eq!(errors_for(frontmatter).len(), 2);
        let all = errors_of(run_bytes(skill_md(frontmatter).as_bytes()));
        assert_eq!(all.len(), 5, "the 2 errors, then the 3 warnings: {all:?}");
        assert!(all[0].contains("'description' must be a string") && all[1].contains("'compatibility' is empty"));
        assert!(all[2..].iter().any(|w| w.contains("Unknown top-level field 'extra'")), "{all:?}");
        for message in &all {
            assert!(!message.contains("It is kept") && !message.contains("are accepted"), "{message}");
        }
    }

    #[test]
    fn metadata_must_be_a_string_map_but_nested_values_only_warn() {
        // Real skills nest values under metadata, and skills-ref accepts them.
        let nested = format!("{VALID}metadata:\n  requires:\n    bins: [a, \"b c\"]\n    min: 2\n  tags: [x]\n");
        let warnings = warnings_for(&nested);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("'metadata.requires' is a mapping"), "{warnings:?}");
        assert!(warnings[1].contains("'metadata.tags' is a list"), "{warnings:?}");
        let cached = marker(&nested);
        assert_eq!(cached[2], ("metadata.requires".into(), r#"{"bins":["a","b c"],"min":2}"#.into()));
        assert_eq!(cached[3], ("metadata.tags".into(), r#"["x"]"#.into()));
        assert_one_error(
            &format!("{VALID}metadata:\n  version: 1.0\n"),
            &["'metadata.version' must be a string", "version: \"1.0\""],
        );
        assert_one_error(&format!("{VALID}metadata:\n  1: x\n"), &["Key `1` in 'metadata' is read as a number"]);
        assert_one_error(&format!("{VALID}metadata: text\n"), &["Field 'metadata' must be a mapping", "a string"]);
        assert_one_error(&format!("{VALID}allowed-tools:\n  - Read\n  - [x]\n"), &["allowed-tools"]);
        assert_one_error(&format!("{VALID}allowed-tools: 3\n"), &["allowed-tools", "a number"]);
    }

    #[test]
    fn marker_metadata() {
        let without_frontmatter = |text: &str| -> Vec<(String, String)> {
            marker(text).into_iter().filter(|(key, _)| key != FRONTMATTER_KEY).collect()
        };
        assert_eq!(
            without_frontmatter(VALID),
            pairs(&[("name", "my-skill"), ("description", "Does things. Use when asked.")])
        );
        let full = format!("license: MIT\nversion: \"0.9\"\n{VALID}metadata:\n  version: \"1.0\"\n");
        assert_eq!(
            without_frontmatter(&full),
            pairs(&[
                ("name", "my-skill"),
                ("description", "Does things. Use when asked."),
                ("version", "1.0"),
                ("license", "MIT")
            ])
        );
        // The whole frontmatter, verbatim as JSON, last.
        assert_eq!(
            marker(&full).last().unwrap(),
            &(
                FRONTMATTER_KEY.to_string(),
                r#"{"license":"MIT","version":"0.9","name":"my-skill","description":"Does things. Use when asked.","metadata":{"version":"1.0"}}"#.to_string()
            )
        );
        assert_eq!(marker(&format!("{VALID}version: \"2.0\"\n"))[2], ("version".into(), "2.0".into()));
        // A licence kept under metadata is just metadata: cached as such.
        let under = without_frontmatter(&format!("{VALID}metadata:\n  license: MIT\n  author: me\n"));
        assert_eq!(under[2..], pairs(&[("metadata.license", "MIT"), ("metadata.author", "me")]));

        let errors = marker_of_bytes(skill_md("name: my-skill\n").as_bytes()).unwrap_err();
        assert!(errors[0].message.contains("'description' is missing"));
    }

    #[test]
    fn skill_file_cannot_be_deleted() {
        let problem = validate_file_mutation(SKILL_FILE, Mutation::Delete).unwrap_err();
        assert_eq!(problem.path.as_deref(), Some(SKILL_FILE));
        assert!(problem.message.starts_with("SKILL.md cannot be deleted: it defines the skill"));
        assert_eq!(validate_file_mutation("scripts/run.py", Mutation::Delete), Ok(()));
        assert_eq!(validate_file_mutation("docs/SKILL.md", Mutation::Delete), Ok(()));
        assert_eq!(validate_file_mutation(SKILL_FILE, Mutation::Put), Ok(()));
    }
}
