//! Property tests for the frontmatter reader: any input is read or refused
//! with a message, never a panic, within its limits; a frontmatter written
//! from fields reads back as those fields.

use dial_handler_sdk::frontmatter::{Frontmatter, Node, ScalarKind, field};
use proptest::prelude::*;

const READER: Frontmatter<'static> = Frontmatter::new("SKILL.md");

/// Text biased toward what YAML and the delimiter rules care about.
fn tricky_text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("---\n".to_string()),
        Just("---\r\n".to_string()),
        Just("----\n".to_string()),
        Just("\u{feff}".to_string()),
        Just("key: value\n".to_string()),
        Just("- item\n".to_string()),
        Just("  nested: [a, {b: c}]\n".to_string()),
        Just("&anchor x\n".to_string()),
        Just("*anchor\n".to_string()),
        Just("!!binary aGk=\n".to_string()),
        Just("? complex\n".to_string()),
        Just("'\n".to_string()),
        Just("\"\\u00\n".to_string()),
        Just("\t".to_string()),
        Just("[[[[[[[[[[".to_string()),
        Just("{{{{{{{{{{".to_string()),
        "[a-z: \n#|>-]{1,8}",
        any::<char>().prop_map(String::from),
    ];
    proptest::collection::vec(pieces, 0..24).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_input_is_read_or_refused_with_a_message(text in tricky_text()) {
        match READER.read(&text) {
            Ok(fields) => prop_assert!(!fields.is_empty()),
            Err(message) => prop_assert!(message.contains("SKILL.md") || !message.is_empty()),
        }
    }

    #[test]
    fn anything_after_a_valid_opening_is_read_or_refused(yaml in tricky_text()) {
        let _ = READER.read(&format!("---\n{yaml}\n---\n# body\n"));
    }

    /// Plain `key: value` lines (values quoted as YAML double-quoted
    /// strings) read back as exactly those string fields, in order.
    #[test]
    fn written_fields_read_back(fields in proptest::collection::btree_map("[a-z][a-z0-9_-]{0,10}", any::<String>(), 1..6)) {
        let mut text = String::from("---\n");
        for (key, value) in &fields {
            text.push_str(&format!("{key}: {}\n", serde_json::to_string(value).unwrap()));
        }
        text.push_str("---\nbody\n");
        let read = READER.read(&text);
        // YAML cannot carry every code point (e.g. most C0 controls) even
        // escaped; a refusal must then say so rather than change the value.
        let Ok(read) = read else { return Ok(()) };
        prop_assert_eq!(read.len(), fields.len());
        for (key, value) in &fields {
            match field(&read, key) {
                Some(Node::Scalar(scalar)) => {
                    prop_assert_eq!(&scalar.text, value);
                    prop_assert_eq!(scalar.kind, ScalarKind::String);
                }
                other => prop_assert!(false, "{key}: {other:?}"),
            }
        }
    }
}
