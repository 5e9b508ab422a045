//! The resource links a request hands an application (SPEC §8): the app's
//! per-request key gets READ on each, and the call fails with 403 before the
//! upstream is contacted if the caller cannot read one of them.
//!
//! Where each API carries them:
//! - chat completions: `messages[].custom_content.attachments[].url` (and
//!   `…custom_content.stages[].attachments[].url`), and `image_url` parts of
//!   `messages[].content[]`;
//! - responses: `input[].content[]` parts `input_image.image_url` and
//!   `input_file.file_url`, and `input[].custom_content.attachments[].url`;
//! - Anthropic messages: `messages[].content[]` blocks whose `source` is
//!   `{"type": "url", "url": …}`, and `messages[].custom_content.attachments[].url`.
//!
//! Absolute (`http…`) and `data:` URLs are the client's business, not links
//! to resources here, and are skipped.

use serde_json::Value;

use crate::apps::Api;

/// The resource links in a request body, in order, each once.
pub fn collect(api: Api, body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    match api {
        Api::ChatCompletions | Api::AnthropicMessages => {
            for message in array(body.get("messages")) {
                custom_content(message, &mut found);
                for part in array(message.get("content")) {
                    content_part(part, &mut found);
                }
            }
        }
        Api::Responses => {
            for item in array(body.get("input")) {
                custom_content(item, &mut found);
                for part in array(item.get("content")) {
                    content_part(part, &mut found);
                }
            }
        }
        Api::Mcp => {}
    }
    let mut unique = Vec::new();
    for url in found {
        if !unique.contains(&url) {
            unique.push(url);
        }
    }
    unique
}

fn array(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value.and_then(Value::as_array).into_iter().flatten()
}

/// DIAL's `custom_content`: attachments, and those of each stage.
fn custom_content(holder: &Value, found: &mut Vec<String>) {
    let Some(custom) = holder.get("custom_content") else { return };
    let stages = array(custom.get("stages")).map(|stage| stage.get("attachments"));
    for attachments in std::iter::once(custom.get("attachments")).chain(stages) {
        for attachment in array(attachments) {
            push(attachment.get("url"), found);
        }
    }
}

/// A content part of any of the three APIs that points at a URL.
fn content_part(part: &Value, found: &mut Vec<String>) {
    match part.get("type").and_then(Value::as_str) {
        // Chat completions: {"type": "image_url", "image_url": {"url": …}} (or the url itself).
        Some("image_url") => match part.get("image_url") {
            Some(Value::Object(image)) => push(image.get("url"), found),
            other => push(other, found),
        },
        // Responses: {"type": "input_image", "image_url": …} / {"type": "input_file", "file_url": …}.
        Some("input_image") => push(part.get("image_url"), found),
        Some("input_file") => push(part.get("file_url"), found),
        // Anthropic: {"type": "image"|"document", "source": {"type": "url", "url": …}}.
        Some("image" | "document") => {
            let source = part.get("source");
            if source.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("url") {
                push(source.and_then(|s| s.get("url")), found);
            }
        }
        _ => {}
    }
}

fn push(url: Option<&Value>, found: &mut Vec<String>) {
    let Some(url) = url.and_then(Value::as_str) else { return };
    let absolute = url.contains("://") || url.starts_with("data:");
    if !absolute && !url.is_empty() {
        found.push(url.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_completions_attachments_and_image_parts() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi", "custom_content": {
                "attachments": [{"url": "files/B/a.txt"}, {"url": "https://example.com/x.png"}],
                "stages": [{"attachments": [{"url": "files/B/stage/"}]}]}},
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "files/B/pic.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
            {"role": "user", "content": "again", "custom_content": {"attachments": [{"url": "files/B/a.txt"}]}}
        ]});
        assert_eq!(collect(Api::ChatCompletions, &body), ["files/B/a.txt", "files/B/stage/", "files/B/pic.png"]);
    }

    #[test]
    fn responses_and_anthropic_equivalents() {
        let responses = json!({"input": [{"role": "user", "content": [
            {"type": "input_text", "text": "x"},
            {"type": "input_image", "image_url": "files/B/i.png"},
            {"type": "input_file", "file_url": "files/B/doc.pdf"}]}]});
        assert_eq!(collect(Api::Responses, &responses), ["files/B/i.png", "files/B/doc.pdf"]);
        assert!(collect(Api::Responses, &json!({"input": "just text"})).is_empty());

        let anthropic = json!({"messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "files/B/i.png"}},
            {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
            {"type": "document", "source": {"type": "url", "url": "files/B/d.pdf"}}]}]});
        assert_eq!(collect(Api::AnthropicMessages, &anthropic), ["files/B/i.png", "files/B/d.pdf"]);
    }
}
