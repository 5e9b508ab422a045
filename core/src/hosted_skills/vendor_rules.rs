//! What Anthropic's and OpenAI's hosted skills services refuse that DIAL's
//! skill type accepts (its handler only warns, or allows it outright): a
//! skill with such a name or description can be made here but not synced
//! back. Each rule found is a warning in the SDK answers, or — with
//! `skills_api.vendor_names = "refuse"`, for teams that sync both ways — the
//! reason the upload is refused.

pub use crate::config::VendorNames;

/// The hosted services' longest name and description (in characters).
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Words Anthropic keeps out of skill names.
const RESERVED_WORDS: [&str; 2] = ["anthropic", "claude"];

/// The rules `name` and `description` break, each as a sentence.
pub fn vendor_problems(name: &str, description: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let refused = "the hosted skills services refuse";
    if name.chars().count() > MAX_NAME_CHARS {
        problems.push(format!("The name is over {MAX_NAME_CHARS} characters, which {refused}"));
    }
    if !name.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-') {
        problems.push(format!(
            "The name {name:?} has characters other than a-z, 0-9 and '-', which {refused} (e.g. my-skill)"
        ));
    }
    let lowered = name.to_lowercase();
    for word in RESERVED_WORDS.iter().filter(|word| lowered.contains(*word)) {
        problems.push(format!("The name contains the reserved word {word:?}, which {refused}"));
    }
    if description.trim().is_empty() {
        problems.push(format!("The description is empty, which {refused}"));
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        problems.push(format!("The description is over {MAX_DESCRIPTION_CHARS} characters, which {refused}"));
    }
    if has_xml_tag(name) || has_xml_tag(description) {
        problems.push(format!("The name or description holds an XML tag, which {refused}"));
    }
    problems
}

/// Whether `text` holds something like `<tag>`, `</tag>` or `<tag a="b"/>`.
fn has_xml_tag(text: &str) -> bool {
    text.match_indices('<').any(|(at, _)| {
        let rest = &text[at + 1..];
        let rest = rest.strip_prefix('/').unwrap_or(rest);
        rest.starts_with(|c: char| c.is_ascii_alphabetic())
            && rest.find('>').is_some_and(|end| !rest[..end].contains('<'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_descriptions_the_services_refuse_are_named() {
        assert!(vendor_problems("pdf-tools", "Fills PDF forms. Use for a <form> or a < b.").len() == 1);
        assert!(vendor_problems("pdf-tools", "Fills PDF forms when a < b and c > d.").is_empty());
        let problems = vendor_problems("My Skill", "");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("a-z, 0-9"), "{problems:?}");
        assert!(vendor_problems("claude-helper", "Helps.")[0].contains("reserved word \"claude\""));
        assert!(vendor_problems(&"a".repeat(65), "x").len() == 1);
        assert!(vendor_problems("ok", &"d".repeat(1025)).len() == 1);
        assert!(vendor_problems("ok", "Closes </b> tags.").len() == 1);
    }
}
