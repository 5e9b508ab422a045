//! Application definitions (`/v1/applications/…`): DIAL stores and returns
//! them in snake_case and accepts camelCase on input.
//!
//! [`normalize_application`] is the one entry point: it converts the keys of
//! known fields to snake_case, writes the stored form, and validates the
//! shape with [`validate_application`], the one place later rules (resource
//! dependencies, interceptors, forced fields) are added.
//!
//! A definition may be as large as `resources.max_size` (64 MiB), so no tree
//! of it is built (a `serde_json::Value` costs ten to twenty times the
//! document). Values stay [`RawValue`]s borrowed from the request body; an
//! object is parsed into its members (key and raw value, about 48 bytes
//! each) when the walk reaches it, an array one element at a time. Memory
//! is the body, the stored form, and the members of the objects on the path
//! being walked. The price is CPU on deep documents: a value is read again
//! by each object or array around it that the walk enters, so text nested
//! d levels deep is read d times (serde_json stops at 128 levels); the
//! blob service's per-CPU parse permits bound what that can take.
//!
//! The stored form is the one serializing a `Value` of the converted
//! definition gives: compact, the keys of every object sorted, a repeated
//! key's last value, strings and numbers re-encoded.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;
use serde_json::value::RawValue;

use crate::apps::fields;
use crate::dependencies::{self, DeclarationPolicy};

use super::error::{BlobError, InvalidApplication};

/// Snake_case names of the application fields (and of the fields of its
/// nested objects) whose camelCase spelling is converted on input. Keys not
/// listed here are kept as sent.
const KNOWN_FIELDS: &[&str] = &[
    // Application
    "display_name",
    "display_version",
    "icon_url",
    "description_keywords",
    "user_roles",
    "forward_auth_token",
    "input_attachment_types",
    "max_input_attachments",
    "max_retry_attempts",
    "application_properties",
    "application_type_schema_id",
    "external_services",
    "resource_dependencies",
    "created_at",
    "updated_at",
    "base_url",
    "responses_defaults",
    // features
    "rate_endpoint",
    "tokenize_endpoint",
    "truncate_prompt_endpoint",
    "configuration_endpoint",
    "system_prompt_supported",
    "tools_supported",
    "seed_supported",
    "url_attachments_supported",
    "folder_attachments_supported",
    "allow_resume",
    "accessible_by_per_request_key",
    "content_parts_supported",
    "temperature_supported",
    "addons_supported",
    "consent_required",
    "skills_supported",
    "cache_supported",
    "auto_caching_supported",
    "parallel_tool_calls_supported",
    "assistant_attachments_in_request_supported",
    "max_tokens_supported",
    "max_completion_tokens_supported",
    "custom_temperature_supported",
    "reasoning_efforts",
    // function
    "author_bucket",
    "source_folder",
    "target_folder",
    "chat_completion",
    "truncate_prompt",
    // interfaces
    "anthropic_messages",
    "chat_completions",
    "openai_chat_completions",
    "openai_responses",
    "openai_embeddings",
    // mcp
    "forward_per_request_key",
    // resource_dependencies entries
    "link_id",
];

/// Fields whose values are free-form maps: their keys are data, not field
/// names, and are never converted.
const FREE_FORM_FIELDS: &[&str] = &["defaults", "responses_defaults", "env", "application_properties", "headers"];

/// Optional string fields of an application.
const STRING_FIELDS: &[&str] = &[
    "name",
    "display_name",
    "display_version",
    "icon_url",
    "description",
    "reference",
    "author",
    "application_type_schema_id",
    "base_url",
];

/// Optional string-array fields of an application.
const STRING_ARRAY_FIELDS: &[&str] = &["user_roles", "input_attachment_types", "description_keywords"];

/// Converts known camelCase keys to snake_case (recursively, outside
/// free-form maps), validates the result and returns what is stored.
/// `definition` is known to be JSON; a value JSON allows but Rust cannot
/// hold (a number out of `f64` range, a lone surrogate escape) is still a
/// parse error, found while writing and so before any rule, as when the
/// whole definition was parsed first.
///
/// A `resource_dependencies` section is checked against `policy` (who may
/// declare, which types) and stored normalised ([`dependencies::normalize`]);
/// a definition without one is stored exactly as before.
pub fn normalize_application(definition: &RawValue, policy: &DeclarationPolicy) -> Result<Vec<u8>, BlobError> {
    let mut stored = Vec::with_capacity(definition.get().len());
    write_value(definition, true, &mut stored)
        .map_err(|error| BlobError::BadRequest(format!("Failed to parse json: {error}")))?;
    validate_application(definition, policy)?;
    let converted: &RawValue = serde_json::from_slice(&stored).expect("what was just written parses");
    let section = members(converted, false)
        .expect("what was just written parses")
        .into_iter()
        .find(|member| member.name == "resource_dependencies")
        .map(|member| member.value);
    let Some(section) = section else { return Ok(stored) };
    let normalized = dependencies::normalize(section, policy)?;
    // The stored object again, with the section as normalised.
    let mut rewritten = Vec::with_capacity(stored.len());
    rewritten.push(b'{');
    for (index, member) in members(converted, false).expect("parses").iter().enumerate() {
        if index > 0 {
            rewritten.push(b',');
        }
        serde_json::to_writer(&mut rewritten, member.name.as_ref()).expect("writing to memory");
        rewritten.push(b':');
        match member.name.as_ref() {
            "resource_dependencies" => rewritten.extend_from_slice(normalized.as_bytes()),
            _ => rewritten.extend_from_slice(member.value.get().as_bytes()),
        }
    }
    rewritten.push(b'}');
    Ok(rewritten)
}

/// Writes `value` in its stored form; with `convert`, keys are converted
/// (see [`members`]), except inside [`FREE_FORM_FIELDS`].
fn write_value(value: &RawValue, convert: bool, out: &mut Vec<u8>) -> serde_json::Result<()> {
    match kind(value) {
        Kind::Object => {
            out.push(b'{');
            for (index, member) in members(value, convert)?.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, member.name.as_ref())?;
                out.push(b':');
                let free_form = FREE_FORM_FIELDS.contains(&member.name.as_ref());
                write_value(member.value, convert && !free_form, out)?;
            }
            out.push(b'}');
        }
        Kind::Array => {
            out.push(b'[');
            let mut first = true;
            for_each_element(value, |element| {
                if !std::mem::take(&mut first) {
                    out.push(b',');
                }
                write_value(element, convert, out)
            })?;
            out.push(b']');
        }
        Kind::String => serde_json::to_writer(out, text(value)?.as_ref())?,
        Kind::Number => serde_json::to_writer(out, &serde_json::from_str::<Number>(value.get())?)?,
        Kind::Boolean | Kind::Null => out.extend_from_slice(value.get().as_bytes()),
    }
    Ok(())
}

/// One member of an object: its key (converted) and its value.
struct Member<'a> {
    name: Cow<'a, str>,
    value: &'a RawValue,
    /// Whether `name` is a camelCase key converted.
    renamed: bool,
    /// Position among the members: in the object, then in key order.
    rank: usize,
}

/// The members of `object` in the stored order (by name), each name once:
/// a repeated key keeps its last value (as a map does); with `convert`,
/// `displayName` becomes `display_name` for every key in [`KNOWN_FIELDS`],
/// and when both spellings are sent the snake_case one wins (of two
/// camelCase spellings, the first in key order).
fn members(object: &RawValue, convert: bool) -> serde_json::Result<Vec<Member<'_>>> {
    let mut members = serde_json::Deserializer::from_str(object.get()).deserialize_map(MembersVisitor)?;
    members.sort_unstable_by(|a, b| a.name.cmp(&b.name).then(b.rank.cmp(&a.rank)));
    members.dedup_by(|later, kept| later.name == kept.name);
    if convert {
        for (rank, member) in members.iter_mut().enumerate() {
            member.rank = rank;
            if let Some(snake) = known_snake_case(&member.name) {
                member.name = Cow::Owned(snake);
                member.renamed = true;
            }
        }
        members.sort_unstable_by(|a, b| a.name.cmp(&b.name).then(a.renamed.cmp(&b.renamed)).then(a.rank.cmp(&b.rank)));
        members.dedup_by(|later, kept| later.name == kept.name);
    }
    Ok(members)
}

/// An object's members in the order sent.
struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Vec<Member<'de>>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(Text(name)) = map.next_key()? {
            let value = map.next_value()?;
            members.push(Member { name, value, renamed: false, rank: members.len() });
        }
        Ok(members)
    }
}

/// Calls `each` on every element of `array`, parsing one at a time.
fn for_each_element<'a>(
    array: &'a RawValue,
    each: impl FnMut(&'a RawValue) -> serde_json::Result<()>,
) -> serde_json::Result<()> {
    struct Elements<F> {
        each: F,
        /// The error of `each`, kept whole (the deserializer's would wrap it).
        failed: Option<serde_json::Error>,
    }

    impl<'de, F: FnMut(&'de RawValue) -> serde_json::Result<()>> Visitor<'de> for &mut Elements<F> {
        type Value = ();

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("a JSON array")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while let Some(element) = seq.next_element()? {
                if let Err(error) = (self.each)(element) {
                    self.failed = Some(error);
                    return Err(de::Error::custom("an element failed"));
                }
            }
            Ok(())
        }
    }

    let mut elements = Elements { each, failed: None };
    let walked = serde_json::Deserializer::from_str(array.get()).deserialize_seq(&mut elements);
    match elements.failed {
        Some(error) => Err(error),
        None => walked,
    }
}

/// A string's value, borrowed from the body unless it has escapes.
fn text(value: &RawValue) -> serde_json::Result<Cow<'_, str>> {
    serde_json::from_str::<Text>(value.get()).map(|Text(text)| text)
}

/// A JSON string, borrowed when it can be.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;

        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }

        deserializer.deserialize_str(TextVisitor)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

/// What a valid JSON value is, from its first byte.
fn kind(value: &RawValue) -> Kind {
    match value.get().as_bytes().first() {
        Some(b'{') => Kind::Object,
        Some(b'[') => Kind::Array,
        Some(b'"') => Kind::String,
        Some(b't' | b'f') => Kind::Boolean,
        Some(b'n') => Kind::Null,
        _ => Kind::Number,
    }
}

/// The snake_case field a camelCase key stands for, if it is a known one.
fn known_snake_case(key: &str) -> Option<String> {
    if !key.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let snake = camel_to_snake(key);
    KNOWN_FIELDS.contains(&snake.as_str()).then_some(snake)
}

fn camel_to_snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for (index, c) in key.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if index > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A value of a definition as the rules see it: after key conversion.
#[derive(Clone, Copy)]
struct Field<'a>(&'a RawValue);

impl<'a> Field<'a> {
    fn is_null(self) -> bool {
        kind(self.0) == Kind::Null
    }

    fn is_string(self) -> bool {
        kind(self.0) == Kind::String
    }

    fn is_boolean(self) -> bool {
        kind(self.0) == Kind::Boolean
    }

    fn is_object(self) -> bool {
        kind(self.0) == Kind::Object
    }

    fn is_array(self) -> bool {
        kind(self.0) == Kind::Array
    }

    fn as_str(self) -> Option<Cow<'a, str>> {
        self.is_string().then(|| text(self.0).ok()).flatten()
    }

    /// A non-negative integer (not `1.0`, not `1e2`), as `Value::as_u64`.
    fn as_u64(self) -> Option<u64> {
        (kind(self.0) == Kind::Number).then(|| serde_json::from_str(self.0.get()).ok()).flatten()
    }

    /// An integer, negative or not (not `1.0`, not `1e2`).
    fn is_integer(self) -> bool {
        kind(self.0) == Kind::Number && serde_json::from_str::<i64>(self.0.get()).is_ok()
    }

    fn as_object(self) -> Option<Object<'a>> {
        self.is_object().then(|| members(self.0, true).ok().map(Object)).flatten()
    }

    fn is_array_of_strings(self) -> bool {
        let mut all_strings = true;
        self.is_array()
            && for_each_element(self.0, |element| {
                all_strings &= kind(element) == Kind::String;
                Ok(())
            })
            .is_ok()
            && all_strings
    }

    /// How a message names the value's type.
    fn kind_name(self) -> &'static str {
        match kind(self.0) {
            Kind::Null => "null",
            Kind::Boolean => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }
}

/// An object of a definition, keys converted, sorted by name.
struct Object<'a>(Vec<Member<'a>>);

impl<'a> Object<'a> {
    fn get(&self, name: &str) -> Option<Field<'a>> {
        let found = self.0.binary_search_by(|member| member.name.as_ref().cmp(name)).ok()?;
        Some(Field(self.0[found].value))
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = (&str, Field<'a>)> {
        self.0.iter().map(|member| (member.name.as_ref(), Field(member.value)))
    }
}

/// The shape every stored application must have (after key conversion):
/// a JSON object with a chat-completion `endpoint`, an `interfaces` object,
/// or an `mcp` object; optional fields, when present, of the right type; no
/// field the host neither acts on nor lists ([`crate::apps::fields`]),
/// each refused by name; and `forward_auth_token: true` only where
/// `policy` allows it (the configuration's applications: a stored one never
/// gets the user's token, as DIAL Core forces it false for custom apps).
pub fn validate_application(definition: &RawValue, policy: &DeclarationPolicy) -> Result<(), InvalidApplication> {
    let Some(app) = Field(definition).as_object() else {
        return Err(InvalidApplication(vec!["the definition must be a JSON object".into()]));
    };
    let mut issues = Vec::new();
    let present = |name: &str| app.get(name).is_some_and(|v| !v.is_null());
    unsupported("", &app, fields::APPLICATION, &mut issues);

    if !present("endpoint") && !present("interfaces") && !present("mcp") {
        issues.push("application endpoint, interfaces or mcp must be provided".into());
    }
    if let Some(endpoint) = app.get("endpoint").filter(|v| !v.is_null()) {
        check_endpoint("endpoint", endpoint, &mut issues);
    }
    for name in STRING_FIELDS {
        if let Some(value) = app.get(name).filter(|v| !v.is_null() && !v.is_string()) {
            issues.push(format!("{name} must be a string, not {}", value.kind_name()));
        }
    }
    for name in STRING_ARRAY_FIELDS {
        if let Some(value) = app.get(name).filter(|v| !v.is_null())
            && !value.is_array_of_strings()
        {
            issues.push(format!("{name} must be an array of strings"));
        }
    }
    if let Some(value) = app.get("max_input_attachments").filter(|v| !v.is_null())
        && value.as_u64().is_none()
    {
        issues.push("max_input_attachments must be a non-negative integer".into());
    }
    if let Some(value) = app.get("forward_auth_token").filter(|v| !v.is_null()) {
        if !value.is_boolean() {
            issues.push("forward_auth_token must be a boolean".into());
        } else if value.0.get() == "true" && !policy.may_forward_auth_token {
            issues.push(
                "forward_auth_token: true is honoured for configuration applications only: \
                 a stored application never gets the user's token"
                    .into(),
            );
        }
    }
    for name in ["created_at", "updated_at"] {
        if let Some(value) = app.get(name).filter(|v| !v.is_null())
            && !value.is_integer()
        {
            issues.push(format!("{name} must be an integer (epoch milliseconds)"));
        }
    }
    for name in ["defaults", "responses_defaults", "application_properties"] {
        if let Some(value) = app.get(name).filter(|v| !v.is_null())
            && !value.is_object()
        {
            issues.push(format!("{name} must be an object"));
        }
    }
    if let Some(features) = app.get("features").filter(|v| !v.is_null()) {
        check_features(features, &mut issues);
    }
    if let Some(interfaces) = app.get("interfaces").filter(|v| !v.is_null()) {
        check_interfaces(interfaces, present("base_url"), &mut issues);
    }
    if let Some(mcp) = app.get("mcp").filter(|v| !v.is_null()) {
        check_mcp(mcp, &mut issues);
    }
    if let Some(value) = app.get("resource_dependencies").filter(|v| !v.is_null())
        && !value.is_array()
    {
        issues.push("resource_dependencies must be an array".into());
    }
    if issues.is_empty() { Ok(()) } else { Err(InvalidApplication(issues)) }
}

fn check_endpoint(name: &str, value: Field, issues: &mut Vec<String>) {
    match value.as_str() {
        Some(endpoint) if !endpoint.trim().is_empty() => {}
        Some(_) => issues.push(format!("{name} must not be empty")),
        None => issues.push(format!("{name} must be a string, not {}", value.kind_name())),
    }
}

fn check_features(features: Field, issues: &mut Vec<String>) {
    let Some(features) = features.as_object() else {
        issues.push("features must be an object".into());
        return;
    };
    let known = [fields::FEATURE_ENDPOINTS, fields::FEATURE_FLAGS, fields::FEATURE_LISTS].concat();
    unsupported("features.", &features, &known, issues);
    for (name, value) in features.iter() {
        if value.is_null() {
            continue;
        }
        if fields::FEATURE_ENDPOINTS.contains(&name) {
            check_endpoint(&format!("features.{name}"), value, issues);
        } else if fields::FEATURE_FLAGS.contains(&name) && !value.is_boolean() {
            issues.push(format!("features.{name} must be a boolean"));
        } else if fields::FEATURE_LISTS.contains(&name) && !value.is_array_of_strings() {
            issues.push(format!("features.{name} must be an array of strings"));
        }
    }
}

/// `interfaces`: DIAL's keys (`chat_completions`, `embeddings`,
/// `responses`, `anthropic_messages`) or DIAL Core's (`openai_…`), each an
/// object with a complete `endpoint` or a `base_url` the request path is
/// appended to (or neither, when the definition has a `base_url`).
fn check_interfaces(interfaces: Field, has_base_url: bool, issues: &mut Vec<String>) {
    let Some(interfaces) = interfaces.as_object() else {
        issues.push("interfaces must be an object".into());
        return;
    };
    if interfaces.is_empty() {
        issues.push("interfaces must name at least one interface".into());
    }
    unsupported("interfaces.", &interfaces, fields::INTERFACES, issues);
    for (plain, core) in [
        ("chat_completions", "openai_chat_completions"),
        ("embeddings", "openai_embeddings"),
        ("responses", "openai_responses"),
    ] {
        if interfaces.get(plain).is_some() && interfaces.get(core).is_some() {
            issues.push(format!("interfaces.{plain} and interfaces.{core} name the same interface: keep one"));
        }
    }
    for (name, interface) in interfaces.iter().filter(|(name, _)| fields::INTERFACES.contains(name)) {
        let Some(entry) = interface.as_object() else {
            issues.push(format!("interfaces.{name} must be an object with an endpoint or a base_url"));
            continue;
        };
        unsupported(&format!("interfaces.{name}."), &entry, fields::INTERFACE, issues);
        let (endpoint, base_url) = (entry.get("endpoint"), entry.get("base_url"));
        match (endpoint.filter(|v| !v.is_null()), base_url.filter(|v| !v.is_null())) {
            (Some(_), Some(_)) => {
                issues.push(format!("interfaces.{name} takes an endpoint or a base_url, not both"));
            }
            (Some(endpoint), None) => check_endpoint(&format!("interfaces.{name}.endpoint"), endpoint, issues),
            (None, Some(base_url)) => check_endpoint(&format!("interfaces.{name}.base_url"), base_url, issues),
            (None, None) if has_base_url => {}
            (None, None) => issues.push(format!("interfaces.{name} must be an object with an endpoint or a base_url")),
        }
    }
}

/// Refuses, by name, every member of `object` not in `known`: a field the
/// host would store and then ignore.
fn unsupported(prefix: &str, object: &Object, known: &[&str], issues: &mut Vec<String>) {
    for (name, _) in object.iter().filter(|(name, _)| !known.contains(name)) {
        issues.push(format!("{prefix}{name} is not supported by this host"));
    }
}

fn check_mcp(mcp: Field, issues: &mut Vec<String>) {
    let Some(mcp) = mcp.as_object() else {
        issues.push("mcp must be an object".into());
        return;
    };
    unsupported("mcp.", &mcp, fields::MCP, issues);
    match mcp.get("endpoint") {
        Some(endpoint) => check_endpoint("mcp.endpoint", endpoint, issues),
        None => issues.push("mcp.endpoint must be provided".into()),
    }
    if let Some(transport) = mcp.get("transport").filter(|v| !v.is_null())
        && !transport.is_string()
    {
        issues.push("mcp.transport must be a string".into());
    }
    if let Some(forward) = mcp.get("forward_per_request_key").filter(|v| !v.is_null())
        && !forward.is_boolean()
    {
        issues.push("mcp.forward_per_request_key must be a boolean".into());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::*;

    /// An admin's policy: dependencies on the v1 groups may be declared.
    fn declaring() -> DeclarationPolicy {
        DeclarationPolicy {
            declarable: dependencies::V1_GROUPS.map(String::from).to_vec(),
            may_declare: true,
            may_forward_auth_token: false,
        }
    }

    /// The stored form of `input` (JSON text), or the rules it breaks.
    fn normalize_text(input: &str) -> Result<Vec<u8>, InvalidApplication> {
        let definition: &RawValue = serde_json::from_str(input).expect("test input is JSON");
        match normalize_application(definition, &declaring()) {
            Ok(stored) => Ok(stored),
            Err(BlobError::InvalidApplication(invalid)) => Err(invalid),
            Err(other) => panic!("unexpected {other}"),
        }
    }

    fn normalize(input: Value) -> Result<Value, InvalidApplication> {
        normalize_text(&input.to_string()).map(|stored| serde_json::from_slice(&stored).expect("stored JSON"))
    }

    /// The conversion as it was done on a whole `Value` tree: what the
    /// streaming one must store, byte for byte.
    fn value_based(input: &str) -> Vec<u8> {
        fn convert(value: Value) -> Value {
            match value {
                Value::Object(map) => Value::Object(convert_object(map)),
                Value::Array(items) => Value::Array(items.into_iter().map(convert).collect()),
                other => other,
            }
        }
        fn convert_object(map: Map<String, Value>) -> Map<String, Value> {
            let mut converted = Map::with_capacity(map.len());
            let mut renamed = Vec::new();
            for (key, value) in map {
                let snake = known_snake_case(&key);
                let name = snake.clone().unwrap_or(key);
                let value = if FREE_FORM_FIELDS.contains(&name.as_str()) { value } else { convert(value) };
                if snake.is_some() {
                    renamed.push((name, value));
                } else {
                    converted.insert(name, value);
                }
            }
            for (name, value) in renamed {
                converted.entry(name).or_insert(value);
            }
            converted
        }
        // What a (key-sorted) `Map` gave: the stored form's keys are sorted.
        fn sorted(value: Value) -> Value {
            match value {
                Value::Object(map) => {
                    let mut map: Map<String, Value> = map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
                    map.sort_keys();
                    Value::Object(map)
                }
                Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
                other => other,
            }
        }
        serde_json::to_vec(&sorted(convert(sorted(serde_json::from_str(input).unwrap())))).unwrap()
    }

    #[test]
    fn the_stored_form_is_the_one_a_value_tree_gave() {
        let definitions = [
            r#"{"endpoint":"http://a","displayName":"A"}"#,
            // Unsorted, spaced, repeated keys; both spellings of one field.
            r#" { "zeta" : 1 , "endpoint" : "http://a" , "zeta" : 2, "display_name": "snake", "displayName": "camel" } "#,
            // Two camelCase spellings of one field: the first in key order wins.
            r#"{"endpoint":"x","displayName":"lower","DisplayName":"upper"}"#,
            // Nested conversion; free-form maps are not converted but still sorted.
            r#"{"endpoint":"x","features":{"toolsSupported":true,"rateEndpoint":"r"},
                "defaults":{"zMaxTokens":1,"displayName":{"b":1,"a":2}},
                "applicationProperties":{"b":[{"linkId":1}],"a":{"iconUrl":2}},
                "resourceDependencies":[{"linkId":"l","kind":"dial.resourceLink","target":{"path":"files/B/x"},"access":["READ"]}],
                "customField":{"innerCamel":1,"displayName":"converted below unknown fields"}}"#,
            // Strings and numbers are re-encoded as a Value re-encodes them.
            r#"{"endpoint":"\u0068ttp:\/\/a","description":"tab\there \"quoted\" \u00e9 \ud83d\ude00 é",
                "n":[1.0,-0,1e2,1E-2,12345678901234567890,-9223372036854775808,0.1,2.50,-1.5e300],
                "nested":[[],{},[[{"displayName":null}]],true,false,null],"\u0065scaped key":1}"#,
            r#"{"mcp":{"endpoint":"m","forwardPerRequestKey":false,"headers":{"X-Camel":"kept","displayName":"kept"}}}"#,
        ];
        for definition in definitions {
            // The stored form is written before the rules run (unknown
            // fields, refused by them, are still converted as data here).
            let raw: &RawValue = serde_json::from_str(definition).unwrap();
            let mut stored = Vec::new();
            write_value(raw, true, &mut stored).unwrap_or_else(|e| panic!("{definition}: {e}"));
            assert_eq!(String::from_utf8(stored).unwrap(), String::from_utf8(value_based(definition)).unwrap());
        }
        // And a definition the rules accept is stored in that form.
        let accepted = r#"{"endpoint":"http://a","displayName":"A","defaults":{"zMaxTokens":1,"a":[1.0]}}"#;
        assert_eq!(normalize_text(accepted).unwrap(), value_based(accepted));
    }

    #[test]
    fn values_json_allows_but_rust_cannot_hold_are_parse_errors() {
        for definition in [r#"{"endpoint":"x","n":1e999}"#, r#"{"endpoint":"x","s":["\ud800"]}"#] {
            let error = normalize_application(serde_json::from_str(definition).unwrap(), &DeclarationPolicy::default())
                .unwrap_err();
            assert!(matches!(&error, BlobError::BadRequest(m) if m.starts_with("Failed to parse json: ")), "{error}");
            assert!(serde_json::from_str::<Value>(definition).is_err(), "a Value refuses it too");
        }
    }

    #[test]
    fn camel_case_in_snake_case_out() {
        let input = json!({
            "displayName": "My app",
            "displayVersion": "1.0",
            "iconUrl": "https://x/icon.png",
            "endpoint": "http://app/chat",
            "userRoles": ["a"],
            "inputAttachmentTypes": ["image/png"],
            "maxInputAttachments": 2,
            "features": {"systemPromptSupported": true, "rateEndpoint": "http://app/rate", "consentRequired": false},
            "mcp": {"endpoint": "http://app/mcp", "transport": "http", "forwardPerRequestKey": false},
            "interfaces": {"anthropicMessages": {"endpoint": "http://app/messages"}, "responses": {"endpoint": "http://app/r"}},
            "resourceDependencies": [{"kind": "dial.resourceLink", "linkId": "l1", "target": {"path": "files/b/x"}, "access": ["READ"], "required": true}],
            "defaults": {"maxTokens": 5, "nested": {"displayName": "kept"}},
            "applicationProperties": {"someKey": 1},
        });
        let output = normalize(input).unwrap();
        assert_eq!(
            output,
            json!({
                "display_name": "My app",
                "display_version": "1.0",
                "icon_url": "https://x/icon.png",
                "endpoint": "http://app/chat",
                "user_roles": ["a"],
                "input_attachment_types": ["image/png"],
                "max_input_attachments": 2,
                "features": {"system_prompt_supported": true, "rate_endpoint": "http://app/rate", "consent_required": false},
                "mcp": {"endpoint": "http://app/mcp", "transport": "http", "forward_per_request_key": false},
                "interfaces": {"anthropic_messages": {"endpoint": "http://app/messages"}, "responses": {"endpoint": "http://app/r"}},
                "resource_dependencies": [{"kind": "dial.resourceLink", "link_id": "l1", "target": {"path": "files/b/x"}, "access": ["READ"], "required": true}],
                "defaults": {"maxTokens": 5, "nested": {"displayName": "kept"}},
                "application_properties": {"someKey": 1},
            })
        );
    }

    #[test]
    fn snake_case_input_is_kept_and_wins_over_camel_case() {
        let input = json!({"endpoint": "http://a", "display_name": "snake", "displayName": "camel"});
        assert_eq!(normalize(input).unwrap(), json!({"endpoint": "http://a", "display_name": "snake"}));
        let snake = json!({"endpoint": "http://a", "display_name": "x", "features": {"tools_supported": true}});
        assert_eq!(normalize(snake.clone()).unwrap(), snake);
    }

    /// Every field the host would store and then ignore is refused, named,
    /// at every level; the ones it acts on or lists are accepted.
    #[test]
    fn fields_the_host_would_ignore_are_refused_by_name() {
        let issues = |value: Value| normalize(value).unwrap_err().0;
        assert_eq!(
            issues(json!({"endpoint": "http://a", "function": {"runtime": "python3.11"}, "interceptors": ["i"],
                          "maxRetryAttempts": 3, "customField": 1})),
            [
                "customField is not supported by this host",
                "function is not supported by this host",
                "interceptors is not supported by this host",
                "max_retry_attempts is not supported by this host",
            ]
        );
        assert_eq!(
            issues(json!({"endpoint": "http://a", "features": {"addonsSupported": true, "rateEndpoint": 1},
                          "mcp": {"endpoint": "http://m", "headers": {}},
                          "interfaces": {"embeddings": {"baseUrl": "http://e", "mode": "translator"}, "images": {}}})),
            [
                "features.addons_supported is not supported by this host",
                "features.rate_endpoint must be a string, not a number",
                "interfaces.images is not supported by this host",
                "interfaces.embeddings.mode is not supported by this host",
                "mcp.headers is not supported by this host",
            ]
        );
        let everything = r#"{
            "name": "n", "endpoint": "http://a", "baseUrl": "http://b", "displayName": "d", "displayVersion": "1",
            "description": "x", "iconUrl": "http://i", "reference": "r", "author": "me", "descriptionKeywords": ["k"],
            "inputAttachmentTypes": ["image/png"], "maxInputAttachments": 2, "createdAt": 1, "updatedAt": 2,
            "userRoles": ["u"], "forwardAuthToken": false, "defaults": {"temperature": 0.1},
            "responsesDefaults": {"store": false}, "applicationTypeSchemaId": "s", "applicationProperties": {"p": 1},
            "interfaces": {"chatCompletions": {}, "openaiResponses": {"endpoint": "http://r"},
                           "embeddings": {"baseUrl": "http://e"}, "anthropicMessages": {"endpoint": "http://m"}},
            "mcp": {"endpoint": "http://mcp", "transport": "http", "forwardPerRequestKey": true},
            "features": {"rateEndpoint": "http://rate", "tokenizeEndpoint": "http://t", "truncatePromptEndpoint": "http://tp",
                         "configurationEndpoint": "http://c", "consentRequired": false, "accessibleByPerRequestKey": true,
                         "systemPromptSupported": true, "toolsSupported": true, "seedSupported": true,
                         "urlAttachmentsSupported": true, "folderAttachmentsSupported": true, "allowResume": true,
                         "contentPartsSupported": true, "temperatureSupported": true, "cacheSupported": true,
                         "autoCachingSupported": true, "parallelToolCallsSupported": true,
                         "assistantAttachmentsInRequestSupported": true, "maxTokensSupported": true,
                         "maxCompletionTokensSupported": true, "customTemperatureSupported": true,
                         "reasoningEfforts": ["low"]},
            "resourceDependencies": []
        }"#;
        let stored = normalize_text(everything).unwrap_or_else(|e| panic!("{e}"));
        // Every field the host reads is read from the stored form.
        let app = crate::apps::Application::from_stored(&stored).unwrap();
        assert_eq!(
            (app.base_url.as_deref(), app.max_input_attachments, app.created_at),
            (Some("http://b"), Some(2), Some(1))
        );
        assert!(app.interfaces.chat_completions.is_some() && app.interfaces.responses.is_some());
        assert_eq!(app.features.reasoning_efforts.as_deref(), Some(&["low".to_string()][..]));
        assert_eq!(app.application_properties.as_ref().map(|p| p.get()), Some(r#"{"p":1}"#));
    }

    /// A stored application never gets the user's token; the
    /// configuration's may (its policy says so).
    #[test]
    fn only_the_configuration_may_forward_the_users_token() {
        let definition = json!({"endpoint": "http://a", "forwardAuthToken": true}).to_string();
        let raw: &RawValue = serde_json::from_str(&definition).unwrap();
        let Err(BlobError::InvalidApplication(refused)) = normalize_application(raw, &declaring()) else {
            panic!("a stored definition asked for the user's token and got it");
        };
        assert!(refused.0[0].starts_with("forward_auth_token: true is honoured for configuration applications only"));
        let operator = DeclarationPolicy { may_forward_auth_token: true, ..declaring() };
        assert!(normalize_application(raw, &operator).is_ok());
        assert!(normalize(json!({"endpoint": "http://a", "forwardAuthToken": false})).is_ok());
    }

    #[test]
    fn key_conversion() {
        assert_eq!(camel_to_snake("displayName"), "display_name");
        assert_eq!(camel_to_snake("accessibleByPerRequestKey"), "accessible_by_per_request_key");
        assert_eq!(known_snake_case("forwardPerRequestKey").as_deref(), Some("forward_per_request_key"));
        assert_eq!(known_snake_case("somethingElse"), None);
        assert_eq!(known_snake_case("display_name"), None);
    }

    #[test]
    fn accepted_shapes() {
        assert!(normalize(json!({"endpoint": "http://a"})).is_ok());
        assert!(normalize(json!({"interfaces": {"responses": {"endpoint": "http://a"}}})).is_ok());
        assert!(normalize(json!({"mcp": {"endpoint": "http://a/mcp"}})).is_ok());
    }

    #[test]
    fn rejected_shapes() {
        let issues = |value: Value| normalize(value).unwrap_err().0;
        assert_eq!(issues(json!([1, 2])), ["the definition must be a JSON object"]);
        assert_eq!(issues(json!("x")), ["the definition must be a JSON object"]);
        assert_eq!(issues(json!({"displayName": "x"})), ["application endpoint, interfaces or mcp must be provided"]);
        assert_eq!(issues(json!({"endpoint": 5})), ["endpoint must be a string, not a number"]);
        assert_eq!(issues(json!({"endpoint": ""})), ["endpoint must not be empty"]);
        assert_eq!(
            issues(json!({"endpoint": "http://a", "displayName": 1, "userRoles": "admin"})),
            ["display_name must be a string, not a number", "user_roles must be an array of strings"]
        );
        assert_eq!(issues(json!({"mcp": {"transport": "http"}})), ["mcp.endpoint must be provided"]);
        assert_eq!(
            issues(json!({"interfaces": {"responses": "http://a"}})),
            ["interfaces.responses must be an object with an endpoint or a base_url"]
        );
        assert_eq!(
            issues(json!({"endpoint": "http://a", "features": {"toolsSupported": "yes"}})),
            ["features.tools_supported must be a boolean"]
        );
        assert_eq!(
            issues(json!({"endpoint": "http://a", "resourceDependencies": {}})),
            ["resource_dependencies must be an array"]
        );
        assert_eq!(
            issues(json!({"interfaces": {"responses": {"endpoint": "http://r", "base_url": "http://b"}}})),
            ["interfaces.responses takes an endpoint or a base_url, not both"]
        );
        assert_eq!(
            issues(json!({"interfaces": {"chat_completions": {}}})),
            ["interfaces.chat_completions must be an object with an endpoint or a base_url"]
        );
        assert!(normalize(json!({"baseUrl": "http://b", "interfaces": {"chatCompletions": {}}})).is_ok());
        assert_eq!(
            issues(
                json!({"interfaces": {"responses": {"endpoint": "http://r"}, "openaiResponses": {"baseUrl": "http://b"}}})
            ),
            ["interfaces.responses and interfaces.openai_responses name the same interface: keep one"]
        );
        assert_eq!(
            issues(json!({"endpoint": "http://a", "createdAt": 1.5})),
            ["created_at must be an integer (epoch milliseconds)"]
        );
        let message = InvalidApplication(vec!["a".into(), "b".into()]).to_string();
        assert_eq!(message, "Invalid application: a; b");
    }
}
