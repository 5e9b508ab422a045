//! The rules, natively: `MemoryFiles` stands in for the host's `files.read`.

use dial_handler_sdk::MemoryFiles;

use super::*;

const MANIFEST_OK: &str = r#"
name = "support-prompts"
description = "Prompts the support team uses."
version = "1.2.0"

[[prompts]]
id = "triage"
file = "prompts/triage.md"
description = "Sorts a ticket into a queue."
variables = ["ticket", "product"]

[[prompts]]
id = "reply"
file = "prompts/reply.md"
variables = ["customer"]
"#;

const TRIAGE: &str = "Product: {{product}}\nTicket:\n{{ ticket }}\n\nWhich queue?\n";
const REPLY: &str = "Write a kind reply to {{customer}}.\n";

fn library(manifest: &str) -> MemoryFiles {
    MemoryFiles::new()
        .with(MANIFEST, manifest)
        .with("prompts/triage.md", TRIAGE)
        .with("prompts/reply.md", REPLY)
        .with("README.md", "# Support prompts\n")
}

fn resource() -> ResourceInfo {
    ResourceInfo::at("team/support-prompts")
}

fn validate(files: &mut MemoryFiles) -> Verdict {
    PromptLibrary::validate(&resource(), files)
}

fn errors(files: &mut MemoryFiles) -> Vec<Problem> {
    match validate(files) {
        Ok(warnings) => panic!("expected errors, got Ok with warnings {warnings:?}"),
        Err(errors) => errors,
    }
}

fn warnings(files: &mut MemoryFiles) -> Vec<Problem> {
    match validate(files) {
        Ok(warnings) => warnings,
        Err(errors) => panic!("expected Ok, got errors {errors:?}"),
    }
}

/// Exactly one error, on `path`, containing every fragment (a rejected
/// library lists its warnings after its errors; none of them is an error).
fn assert_one_error(files: &mut MemoryFiles, path: Option<&str>, fragments: &[&str]) {
    let errors = errors(files);
    let warnings_after = errors
        .iter()
        .skip(1)
        .filter(|p| !p.message.contains("is not used") && !p.message.contains("but the resource is named"));
    assert_eq!(warnings_after.count(), 0, "{errors:?}");
    assert_eq!(errors[0].path.as_deref(), path, "{errors:?}");
    for fragment in fragments {
        assert!(errors[0].message.contains(fragment), "{fragment:?} not in {:?}", errors[0].message);
    }
}

#[test]
fn a_valid_library_has_no_problems_and_its_metadata() {
    assert_eq!(warnings(&mut library(MANIFEST_OK)), vec![]);
    let metadata = PromptLibrary::metadata(&resource(), &mut library(MANIFEST_OK)).unwrap();
    let expected = [
        ("name", "support-prompts"),
        ("description", "Prompts the support team uses."),
        ("version", "1.2.0"),
        ("prompts", "2"),
        ("ids", "triage, reply"),
    ];
    assert_eq!(metadata, expected.map(|(k, v)| (k.to_string(), v.to_string())));
}

#[test]
fn metadata_reads_only_the_manifest() {
    let mut files = library(MANIFEST_OK);
    PromptLibrary::metadata(&resource(), &mut files).unwrap();
    assert_eq!(files.bytes_read(), MANIFEST_OK.len() as u64);
}

#[test]
fn missing_manifest() {
    assert_one_error(&mut MemoryFiles::new().with("a.md", "x"), None, &["library.toml is missing: a prompt library"]);
    let nested = MemoryFiles::new().with("lib/library.toml", MANIFEST_OK);
    assert_one_error(&mut nested.clone(), None, &["found lib/library.toml", "without an enclosing folder"]);
    let problems = PromptLibrary::metadata(&resource(), &mut nested.clone()).unwrap_err();
    assert!(problems[0].message.contains("library.toml is missing"));
}

#[test]
fn unparseable_manifest() {
    assert_one_error(&mut library("name = \n"), Some(MANIFEST), &["library.toml is not valid TOML", "line 1"]);
    assert_one_error(&mut library("name = 5\n"), Some(MANIFEST), &["invalid type"]);
    assert_one_error(&mut library("[[prompts]\n"), Some(MANIFEST), &["not valid TOML"]);
    let not_utf8 = MemoryFiles::new().with(MANIFEST, b"name = \"\xff\"\n".to_vec());
    assert_one_error(&mut not_utf8.clone(), Some(MANIFEST), &["not valid UTF-8", "byte offset 8"]);
    let huge = MemoryFiles::new().with(MANIFEST, vec![b'#'; 64 * 1024 + 1]);
    assert_one_error(&mut huge.clone(), Some(MANIFEST), &["the limit is 65536 bytes (64 KiB)"]);
}

#[test]
fn required_fields_are_reported_together() {
    let manifest =
        "[[prompts]]\nid = \"triage\"\nfile = \"prompts/triage.md\"\nvariables = [\"ticket\", \"product\"]\n";
    let errors = errors(&mut library(manifest).with("prompts/reply.md", "unused but fine {{x}}"));
    let messages: Vec<&str> = errors.iter().map(|p| p.message.as_str()).collect();
    // The three errors, then the warning: every problem comes back at once.
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(messages[3].contains("prompts/reply.md is not used"), "{messages:?}");
    for field in ["name", "description", "version"] {
        assert!(messages.iter().any(|m| m.starts_with(&format!("Field '{field}' is missing"))), "{messages:?}");
    }
    let blank = MANIFEST_OK.replace("name = \"support-prompts\"", "name = \"  \"");
    assert_one_error(&mut library(&blank), Some(MANIFEST), &["Field 'name' is empty"]);
}

#[test]
fn field_limits_and_version_format() {
    let long_name = MANIFEST_OK.replace("support-prompts", &"n".repeat(65));
    let errors = errors(&mut library(&long_name));
    assert!(errors[0].message.contains("Field 'name' is 65 characters; the limit is 64"), "{errors:?}");
    let long_description = MANIFEST_OK.replace("Prompts the support team uses.", &"é".repeat(1025));
    assert_one_error(&mut library(&long_description), Some(MANIFEST), &["'description' is 1025 characters"]);
    assert_eq!(warnings(&mut library(&MANIFEST_OK.replace("support team uses.", &"é".repeat(1000)))), vec![]);
    for bad in ["1.0", "v1.2.0", "1.2.x", "1.2.3-", "01234567890.1.1", "latest"] {
        let manifest = MANIFEST_OK.replace("\"1.2.0\"", &format!("\"{bad}\""));
        assert_one_error(&mut library(&manifest), Some(MANIFEST), &["Field 'version'", "like `1.2.0`"]);
    }
    for good in ["0.1.0", "10.20.30", "1.0.0-rc.1", "1.0.0+build.5"] {
        let manifest = MANIFEST_OK.replace("\"1.2.0\"", &format!("\"{good}\""));
        assert_eq!(warnings(&mut library(&manifest)), vec![], "{good}");
    }
}

#[test]
fn zero_prompts() {
    let manifest = "name = \"support-prompts\"\ndescription = \"d\"\nversion = \"1.0.0\"\n";
    let errors = errors(&mut MemoryFiles::new().with(MANIFEST, manifest));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains("declares no prompts"));
    let empty_list = format!("{manifest}prompts = []\n");
    assert!(self::errors(&mut MemoryFiles::new().with(MANIFEST, empty_list))[0].message.contains("no prompts"));
}

#[test]
fn duplicate_and_invalid_ids() {
    let duplicate = MANIFEST_OK.replace("id = \"reply\"", "id = \"triage\"");
    let errors = errors(&mut library(&duplicate));
    assert!(
        errors.iter().any(|p| p.message == "The prompt 'triage' is declared twice; each prompt `id` must be unique")
    );
    let invalid = MANIFEST_OK.replace("id = \"reply\"", "id = \"Reply Now\"");
    assert_one_error(&mut library(&invalid), Some(MANIFEST), &["prompt 'Reply Now' has an invalid `id`", "lowercase"]);
    let missing = MANIFEST_OK.replace("id = \"reply\"\n", "");
    assert_one_error(&mut library(&missing), Some(MANIFEST), &["The prompt #2 has no `id`"]);
}

#[test]
fn listed_file_problems() {
    let mut files = library(MANIFEST_OK);
    let missing = MemoryFiles::new().with(MANIFEST, MANIFEST_OK).with("prompts/triage.md", TRIAGE);
    assert_one_error(
        &mut missing.clone(),
        Some(MANIFEST),
        &["prompt 'reply' uses the file prompts/reply.md", "not in"],
    );

    files.insert("prompts/reply.md", b"Hello \xc3\x28 {{customer}}".to_vec());
    assert_one_error(&mut files, Some("prompts/reply.md"), &["prompts/reply.md is not valid UTF-8", "byte offset 6"]);

    for bad in ["/abs.md", "../up.md", "a//b.md", "a\\\\b.md", "./x.md"] {
        let manifest = MANIFEST_OK.replace("prompts/reply.md", bad);
        let errors = errors(&mut library(&manifest));
        assert!(errors.iter().any(|p| p.message.contains("relative to the library root")), "{bad}: {errors:?}");
    }
    let manifest_as_template = MANIFEST_OK.replace("prompts/reply.md", "library.toml");
    assert!(errors(&mut library(&manifest_as_template))[0].message.contains("which is the manifest"));
    let no_file = MANIFEST_OK.replace("file = \"prompts/reply.md\"\n", "");
    assert!(errors(&mut library(&no_file))[0].message.contains("The prompt 'reply' has no `file`"));
}

#[test]
fn undeclared_variables_are_errors_on_the_template() {
    let mut files =
        library(MANIFEST_OK).with("prompts/reply.md", "Dear {{customer}}, about {{order_id}} and {{ order_id }}");
    let errors = errors(&mut files);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path.as_deref(), Some("prompts/reply.md"));
    assert_eq!(
        errors[0].message,
        "prompts/reply.md uses {{order_id}}, but prompt 'reply' does not declare it; add \"order_id\" to its \
         `variables` in library.toml"
    );
    let bad_name = MANIFEST_OK.replace("[\"customer\"]", "[\"customer\", \"two words\"]");
    assert_one_error(&mut library(&bad_name), Some(MANIFEST), &["declares the variable 'two words'"]);
}

#[test]
fn one_template_shared_by_two_prompts_is_read_once() {
    let shared = MANIFEST_OK
        .replace("prompts/reply.md", "prompts/triage.md")
        .replace("[\"customer\"]", "[\"ticket\", \"product\"]");
    let mut files = MemoryFiles::new().with(MANIFEST, shared.as_str()).with("prompts/triage.md", TRIAGE);
    assert_eq!(warnings(&mut files), vec![]);
    assert_eq!(files.bytes_read(), (shared.len() + TRIAGE.len()) as u64);
}

#[test]
fn unused_variables_warn() {
    let manifest = MANIFEST_OK.replace("[\"customer\"]", "[\"customer\", \"tone\", \"tone\"]");
    let warnings = warnings(&mut library(&manifest));
    let messages: Vec<&str> = warnings.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "The prompt 'reply' declares the variable 'tone' twice",
            "The prompt 'reply' declares the variable 'tone', but prompts/reply.md never uses {{tone}}",
        ]
    );
    assert!(warnings.iter().all(|p| p.path.as_deref() == Some(MANIFEST)));
}

#[test]
fn unreferenced_files_warn_except_the_readme() {
    let mut files = library(MANIFEST_OK).with("prompts/old.md", "x").with("docs/README.md", "x");
    let warnings = warnings(&mut files);
    let paths: Vec<&str> = warnings.iter().filter_map(|p| p.path.as_deref()).collect();
    assert_eq!(paths, ["docs/README.md", "prompts/old.md"]);
    assert!(warnings[1].message.contains("prompts/old.md is not used by any prompt"));
    assert_eq!(files.bytes_read(), (MANIFEST_OK.len() + TRIAGE.len() + REPLY.len()) as u64, "never read");

    let mut many = library(MANIFEST_OK);
    for i in 0..200 {
        many.insert(format!("extra/{i:03}.md"), "x");
    }
    let warnings = self::warnings(&mut many);
    assert_eq!(warnings.len(), dial_handler_sdk::DEFAULT_MAX_PROBLEMS + 1);
    assert!(warnings.last().unwrap().message.starts_with("More problems of this kind"));
}

#[test]
fn name_different_from_the_resource_warns() {
    let warnings = PromptLibrary::validate(&ResourceInfo::at("team/other"), &mut library(MANIFEST_OK)).unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].path.as_deref(), Some(MANIFEST));
    assert!(warnings[0].message.contains("'support-prompts' but the resource is named 'other'"));
}

#[test]
fn all_errors_come_back_together() {
    let manifest = "version = \"1\"\n[[prompts]]\nid = \"a\"\nfile = \"missing.md\"\n[[prompts]]\nid = \"a\"\n";
    let errors = errors(&mut MemoryFiles::new().with(MANIFEST, manifest));
    // name, description, version format, duplicate id, no file, missing file
    assert_eq!(errors.len(), 6, "{errors:#?}");
}

#[test]
fn the_manifest_cannot_be_deleted() {
    let problem = PromptLibrary::validate_file_mutation(MANIFEST, Mutation::Delete).unwrap_err();
    assert_eq!(problem.path.as_deref(), Some(MANIFEST));
    assert!(problem.message.starts_with("library.toml cannot be deleted"));
    assert_eq!(PromptLibrary::validate_file_mutation(MANIFEST, Mutation::Put), Ok(()));
    assert_eq!(PromptLibrary::validate_file_mutation("prompts/reply.md", Mutation::Delete), Ok(()));
}

#[test]
fn ids_metadata_is_capped() {
    let mut manifest = String::from("name = \"support-prompts\"\ndescription = \"d\"\nversion = \"1.0.0\"\n");
    let mut files = MemoryFiles::new();
    for i in 0..100 {
        manifest.push_str(&format!("[[prompts]]\nid = \"prompt-number-{i:03}\"\nfile = \"p/{i}.md\"\n"));
        files.insert(format!("p/{i}.md"), "text");
    }
    files.insert(MANIFEST, manifest);
    let metadata = PromptLibrary::metadata(&resource(), &mut files).unwrap();
    assert_eq!(metadata[3], ("prompts".into(), "100".into()));
    let ids = &metadata[4].1;
    assert!(ids.chars().count() < 300 && ids.starts_with("prompt-number-000, ") && ids.ends_with("more)"), "{ids}");
}

#[test]
fn describe_sets_the_type_and_its_limits() {
    let description = PromptLibrary::describe();
    assert_eq!(
        (description.type_name.as_str(), description.group.as_str(), description.display_name.as_str()),
        ("prompt-library", "prompt-libraries", "Prompt library")
    );
    assert_eq!(description.limits.max_files, Some(500));
    assert_eq!(description.limits.max_file_bytes, Some(1 << 20));
}

#[test]
fn placeholders_are_names_in_double_braces() {
    assert_eq!(placeholders("{{a}} {{ b }} {{a}} {{c-d}} {{_e1}}"), ["a", "b", "c-d", "_e1"]);
    assert_eq!(placeholders("{{}} {{ two words }} {{#if x}} {{1a}} { {x} } {{unclosed"), Vec::<&str>::new());
    assert_eq!(placeholders("{{{x}}}"), ["x"]);
    assert_eq!(placeholders("é{{ü}}{{ok}}"), ["ok"]);
    // A template full of `{{` is scanned in linear time.
    let hostile = "{{".repeat(500_000) + "}}";
    let started = std::time::Instant::now();
    assert!(placeholders(&hostile).is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}
