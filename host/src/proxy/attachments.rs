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
//!   `{"type": "url", "url": …}`, and `messages[].custom_content.attachments[].url`;
//! - embeddings: the attachments `{"url": …}` of `custom_input` (nested lists too).
//!
//! [`answer_links`] reads an application's answer the same way (the
//! attachments of `choices[].message` or, in a stream, `choices[].delta`).
//!
//! Chat completions also carry the skills a user picked for a message
//! (`messages[].custom_content.skills[].url`, DIAL Core #1956): collected
//! apart, since they are checked as skills; one without a `url` refuses the
//! call. (DIAL collects them on the chat path only, and so does the host.)
//!
//! Absolute (`http…`) and `data:` URLs are the client's business, not links
//! to resources here, and are skipped.
//!
//! The body is read once, as a stream of tokens: only the links are kept
//! (no tree of the document, which would cost ten times its size), each
//! once, and reading stops at the first link past `proxy.max_attachments`.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::apps::Api;

/// Why a body's links could not be collected.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("A request may carry at most {0} attachments")]
    TooMany(usize),
    #[error("A skill of a message has no url: each of custom_content.skills must name one")]
    SkillWithoutUrl,
    #[error("Invalid JSON body: {0}")]
    Json(serde_json::Error),
}

/// What a request hands the application: attachments, and the skills
/// picked for its messages; each once, in order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RequestLinks {
    pub attachments: Vec<String>,
    pub skills: Vec<String>,
}

/// The resource links in a request body; at most `max` of both kinds together.
pub fn collect(api: Api, body: &[u8], max: usize) -> Result<RequestLinks, CollectError> {
    let mut links = Links::new(max, api == Api::ChatCompletions);
    if !api.is_llm() {
        return Ok(RequestLinks::default());
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let outcome =
        Seed(Root { api, links: &mut links }).deserialize(&mut deserializer).and_then(|()| deserializer.end());
    match outcome {
        Ok(()) => Ok(RequestLinks { attachments: links.found, skills: links.skills }),
        Err(_) if links.too_many => Err(CollectError::TooMany(max)),
        Err(_) if links.skill_without_url => Err(CollectError::SkillWithoutUrl),
        Err(error) => Err(CollectError::Json(error)),
    }
}

/// The links found so far.
struct Links {
    found: Vec<String>,
    seen: HashSet<String>,
    /// Skills picked for messages (collected only where `take_skills`).
    skills: Vec<String>,
    take_skills: bool,
    max: usize,
    /// Set when reading stopped because `max` was passed.
    too_many: bool,
    /// Set when reading stopped at a skill without a url.
    skill_without_url: bool,
}

impl Links {
    fn new(max: usize, take_skills: bool) -> Self {
        Links {
            found: Vec::new(),
            seen: HashSet::new(),
            skills: Vec::new(),
            take_skills,
            max,
            too_many: false,
            skill_without_url: false,
        }
    }

    fn push<E: de::Error>(&mut self, url: &str) -> Result<(), E> {
        let absolute = url.contains("://") || url.starts_with("data:");
        if absolute || url.is_empty() || self.seen.contains(url) {
            return Ok(());
        }
        self.room()?;
        self.seen.insert(url.to_string());
        self.found.push(url.to_string());
        Ok(())
    }

    /// A skill picked for a message: its url must be there.
    fn push_skill<E: de::Error>(&mut self, url: Option<String>) -> Result<(), E> {
        let Some(url) = url.filter(|url| !url.trim().is_empty()) else {
            self.skill_without_url = true;
            return Err(E::custom("a skill without a url"));
        };
        if self.skills.contains(&url) {
            return Ok(());
        }
        self.room()?;
        self.skills.push(url);
        Ok(())
    }

    fn room<E: de::Error>(&mut self) -> Result<(), E> {
        if self.found.len() + self.skills.len() == self.max {
            self.too_many = true;
            return Err(E::custom("too many attachments"));
        }
        Ok(())
    }
}

/// What a value is read as: a shape reads the maps, arrays or strings it
/// cares about; every other value is skipped without being kept.
trait Shape: Sized {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn seq<'de, A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn string<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

/// Reads one value as the shape `S`.
struct Seed<S>(S);

impl<'de, S: Shape> DeserializeSeed<'de> for Seed<S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, S: Shape> Visitor<'de> for Seed<S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        self.0.map(map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.0.seq(seq)
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<(), E> {
        self.0.string(value)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// An array whose elements are each read by a fresh `Element` shape.
macro_rules! array_of {
    ($name:ident, $element:ident) => {
        struct $name<'l> {
            links: &'l mut Links,
        }
        impl Shape for $name<'_> {
            fn seq<'de, A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
                while seq.next_element_seed(Seed($element { links: &mut *self.links }))?.is_some() {}
                Ok(())
            }
        }
    };
}

/// The request object: `messages` (chat completions, Anthropic) or `input`
/// (responses); anything else, or a body that is not an object, has no links.
struct Root<'l> {
    api: Api,
    links: &'l mut Links,
}

impl Shape for Root<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let list = match self.api {
            Api::Responses => "input",
            Api::ChatCompletions | Api::AnthropicMessages => "messages",
            Api::Embeddings => "custom_input",
            // Completions carry a prompt; the other APIs no resource links.
            _ => "",
        };
        while let Some(key) = map.next_key::<String>()? {
            if key == list && self.api == Api::Embeddings {
                map.next_value_seed(Seed(CustomInput { links: &mut *self.links }))?;
            } else if key == list {
                map.next_value_seed(Seed(Messages { links: &mut *self.links }))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// Embeddings' `custom_input`: strings, attachments `{"url": …}` and lists
/// of them (DIAL's multi-modal embeddings input).
struct CustomInput<'l> {
    links: &'l mut Links,
}

impl Shape for CustomInput<'_> {
    fn seq<'de, A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Seed(CustomInput { links: &mut *self.links }))?.is_some() {}
        Ok(())
    }
    fn map<'de, A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        Attachment { links: self.links }.map(map)
    }
}

/// The resource links an answer (a chat completion, or one event of its
/// stream) carries: `choices[].message` or `choices[].delta`, their
/// `custom_content.attachments` and those of its stages. A body that is not
/// such JSON (`[DONE]`) carries none.
pub fn answer_links(answer: &[u8]) -> Vec<String> {
    let mut links = Links::new(usize::MAX, false);
    let mut deserializer = serde_json::Deserializer::from_slice(answer);
    let _ = Seed(Answer { links: &mut links }).deserialize(&mut deserializer);
    links.found
}

/// A chat completion (or chunk): its `choices`.
struct Answer<'l> {
    links: &'l mut Links,
}

impl Shape for Answer<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "choices" {
                map.next_value_seed(Seed(Choices { links: &mut *self.links }))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

array_of!(Choices, Choice);

/// A choice: its `message` (a whole answer) or `delta` (a stream's event).
struct Choice<'l> {
    links: &'l mut Links,
}

impl Shape for Choice<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "message" || key == "delta" {
                map.next_value_seed(Seed(Message { links: &mut *self.links }))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

array_of!(Messages, Message);

/// A message (or a Responses input item): its `custom_content` and its
/// `content` parts.
struct Message<'l> {
    links: &'l mut Links,
}

impl Shape for Message<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "custom_content" => map.next_value_seed(Seed(CustomContent { links: &mut *self.links }))?,
                "content" => map.next_value_seed(Seed(Parts { links: &mut *self.links }))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            };
        }
        Ok(())
    }
}

/// DIAL's `custom_content`: attachments, those of each stage, and the
/// skills picked for the message.
struct CustomContent<'l> {
    links: &'l mut Links,
}

impl Shape for CustomContent<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "attachments" => map.next_value_seed(Seed(Attachments { links: &mut *self.links }))?,
                "stages" => map.next_value_seed(Seed(Stages { links: &mut *self.links }))?,
                "skills" if self.links.take_skills => map.next_value_seed(Seed(Skills { links: &mut *self.links }))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            };
        }
        Ok(())
    }
}

array_of!(Stages, Stage);

struct Stage<'l> {
    links: &'l mut Links,
}

impl Shape for Stage<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "attachments" => map.next_value_seed(Seed(Attachments { links: &mut *self.links }))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            };
        }
        Ok(())
    }
}

array_of!(Attachments, Attachment);

/// `{"url": …}`.
struct Attachment<'l> {
    links: &'l mut Links,
}

impl Shape for Attachment<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut url = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "url" => map.next_value_seed(Seed(Captured { slot: &mut url }))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            };
        }
        match url {
            Some(url) => self.links.push(&url),
            None => Ok(()),
        }
    }
}

array_of!(Skills, Skill);

/// `{"url": …}`, which must be there.
struct Skill<'l> {
    links: &'l mut Links,
}

impl Shape for Skill<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut url = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "url" => map.next_value_seed(Seed(Captured { slot: &mut url }))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            };
        }
        self.links.push_skill(url)
    }
}

array_of!(Parts, Part);

/// A content part of any of the three APIs that points at a URL:
/// chat completions `{"type": "image_url", "image_url": {"url": …}}` (or the
/// url itself); Responses `{"type": "input_image", "image_url": …}` and
/// `{"type": "input_file", "file_url": …}`; Anthropic `{"type":
/// "image"|"document", "source": {"type": "url", "url": …}}`. The `type`
/// may come after the URL, so candidates are kept until the part ends.
struct Part<'l> {
    links: &'l mut Links,
}

impl Shape for Part<'_> {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (mut kind, mut image_url, mut file_url) = (None, None, None);
        let mut source = Source::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "type" => map.next_value_seed(Seed(Captured { slot: &mut kind }))?,
                "image_url" => map.next_value_seed(Seed(UrlOrObject { slot: &mut image_url }))?,
                "file_url" => map.next_value_seed(Seed(Captured { slot: &mut file_url }))?,
                "source" => map.next_value_seed(Seed(&mut source))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            };
        }
        let url = match kind.as_deref() {
            Some("image_url" | "input_image") => image_url,
            Some("input_file") => file_url,
            Some("image" | "document") if source.kind.as_deref() == Some("url") => source.url,
            _ => None,
        };
        match url {
            Some(url) => self.links.push(&url),
            None => Ok(()),
        }
    }
}

/// A string value, kept.
struct Captured<'s> {
    slot: &'s mut Option<String>,
}

impl Shape for Captured<'_> {
    fn string<E: de::Error>(self, value: &str) -> Result<(), E> {
        *self.slot = Some(value.to_string());
        Ok(())
    }
}

/// A URL given as a string or as `{"url": …}`.
struct UrlOrObject<'s> {
    slot: &'s mut Option<String>,
}

impl Shape for UrlOrObject<'_> {
    fn string<E: de::Error>(self, value: &str) -> Result<(), E> {
        *self.slot = Some(value.to_string());
        Ok(())
    }
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "url" => map.next_value_seed(Seed(Captured { slot: &mut *self.slot }))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            };
        }
        Ok(())
    }
}

/// Anthropic's `source`: `{"type", "url", …}`.
#[derive(Default)]
struct Source {
    kind: Option<String>,
    url: Option<String>,
}

impl Shape for &mut Source {
    fn map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "type" => map.next_value_seed(Seed(Captured { slot: &mut self.kind }))?,
                "url" => map.next_value_seed(Seed(Captured { slot: &mut self.url }))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            };
        }
        Ok(())
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
        assert_eq!(links(Api::ChatCompletions, &body), ["files/B/a.txt", "files/B/stage/", "files/B/pic.png"]);
    }

    #[test]
    fn responses_and_anthropic_equivalents() {
        let responses = json!({"input": [{"role": "user", "content": [
            {"type": "input_text", "text": "x"},
            {"type": "input_image", "image_url": "files/B/i.png"},
            {"type": "input_file", "file_url": "files/B/doc.pdf"}]}]});
        assert_eq!(links(Api::Responses, &responses), ["files/B/i.png", "files/B/doc.pdf"]);
        assert!(links(Api::Responses, &json!({"input": "just text"})).is_empty());

        let anthropic = json!({"messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "files/B/i.png"}},
            {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
            {"type": "document", "source": {"type": "url", "url": "files/B/d.pdf"}}]}]});
        assert_eq!(links(Api::AnthropicMessages, &anthropic), ["files/B/i.png", "files/B/d.pdf"]);
    }

    fn links(api: Api, body: &serde_json::Value) -> Vec<String> {
        collect(api, body.to_string().as_bytes(), 1000).unwrap().attachments
    }

    #[test]
    fn the_type_may_follow_the_url_and_odd_shapes_are_skipped() {
        let body = json!({"model": "m", "messages": [
            {"content": [{"image_url": {"detail": "low", "url": "files/B/late.png"}, "type": "image_url"}]},
            {"content": [{"source": {"url": "files/B/s.pdf", "type": "url"}, "type": "document"}]},
            {"content": [{"type": "text", "image_url": "files/B/not-an-image-part"}]},
            {"custom_content": null, "content": null},
            {"custom_content": {"attachments": "x", "stages": [1, "two", {"attachments": [{"url": 3}]}]}},
            "a string message", 7, null
        ]});
        assert_eq!(links(Api::ChatCompletions, &body), ["files/B/late.png", "files/B/s.pdf"]);
        assert!(links(Api::ChatCompletions, &json!([1, 2])).is_empty(), "not an object: no links");
        assert!(matches!(collect(Api::ChatCompletions, b"{\"messages\": [", 10), Err(CollectError::Json(_))));
        assert!(matches!(collect(Api::ChatCompletions, b"{} trailing", 10), Err(CollectError::Json(_))));
    }

    #[test]
    fn embeddings_custom_input_and_answers() {
        let body = json!({"input": ["x"], "custom_input": ["text", {"type": "image/png", "url": "files/B/e.png"},
                                                          [{"url": "files/B/nested.png"}, "t"]]});
        assert_eq!(links(Api::Embeddings, &body), ["files/B/e.png", "files/B/nested.png"]);
        assert!(links(Api::Completions, &json!({"prompt": "files/B/not-a-link"})).is_empty());
        let answer = json!({"choices": [{"message": {"content": "done", "custom_content": {
            "attachments": [{"title": "t", "url": "files/B/appdata/x/out.png"}],
            "stages": [{"attachments": [{"url": "files/B/stage.txt"}]}]}}}]});
        assert_eq!(answer_links(answer.to_string().as_bytes()), ["files/B/appdata/x/out.png", "files/B/stage.txt"]);
        assert!(answer_links(b"[DONE]").is_empty());
    }

    #[test]
    fn links_are_counted_once_and_bounded() {
        let attachment = |i: usize| json!({"url": format!("files/B/{i}.txt")});
        let many: Vec<_> = (0..5).map(attachment).chain((0..5).map(attachment)).collect();
        let body = json!({"messages": [{"custom_content": {"attachments": many}}]}).to_string();
        assert_eq!(
            collect(Api::ChatCompletions, body.as_bytes(), 5).unwrap().attachments.len(),
            5,
            "repeats count once"
        );
        assert!(matches!(collect(Api::ChatCompletions, body.as_bytes(), 4), Err(CollectError::TooMany(4))));
    }

    /// DIAL Core #1956: the skills picked for a message, chat completions
    /// only; a skill without a url (or a blank one) refuses the call; they
    /// count toward the bound with the attachments.
    #[test]
    fn skills_picked_for_messages() {
        let body = json!({"messages": [
            {"role": "user", "content": "one", "custom_content": {
                "skills": [{"url": "skills/B/pdf"}, {"url": "skills/public/team/review"}],
                "attachments": [{"url": "files/B/a.txt"}]}},
            {"role": "user", "content": "two", "custom_content": {"skills": [{"url": "skills/B/pdf"}]}}
        ]});
        let collected = collect(Api::ChatCompletions, body.to_string().as_bytes(), 1000).unwrap();
        assert_eq!(collected.skills, ["skills/B/pdf", "skills/public/team/review"]);
        assert_eq!(collected.attachments, ["files/B/a.txt"]);
        assert!(matches!(collect(Api::ChatCompletions, body.to_string().as_bytes(), 2), Err(CollectError::TooMany(2))));
        for api in [Api::Responses, Api::AnthropicMessages] {
            let other = json!({"messages": [{"custom_content": {"skills": [{"url": "skills/B/pdf"}]}}],
                               "input": [{"custom_content": {"skills": [{"url": "skills/B/pdf"}]}}]});
            assert!(collect(api, other.to_string().as_bytes(), 10).unwrap().skills.is_empty(), "{api:?}");
        }
        for skill in [json!({}), json!({"url": ""}), json!({"url": "  "}), json!({"title": "x"})] {
            let body = json!({"messages": [{"custom_content": {"skills": [skill]}}]});
            let refused = collect(Api::ChatCompletions, body.to_string().as_bytes(), 10);
            assert!(matches!(refused, Err(CollectError::SkillWithoutUrl)), "{body}");
        }
    }
}
