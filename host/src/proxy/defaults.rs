//! An application's `defaults`, merged into a request where the client left
//! a field unset — as DIAL Core's `ApplyDefaultDeploymentSettingsFn` does:
//! for each default, a field the request lacks (or sends as `null`) takes
//! it; a field of another JSON type is replaced by it; two objects merge
//! member by member, recursively; any other field the client set stays.
//!
//! A request body may be as large as `proxy.max_request_bytes` (16 MiB), so
//! no tree of it is built: only its top level is parsed, into its members'
//! raw text borrowed from the body, and an object is parsed one level
//! further only where a default names it. The body is written anew once.

use indexmap::IndexMap;
use serde_json::value::RawValue;

/// A JSON value's type, from its first byte (booleans are one type).
fn kind(value: &RawValue) -> u8 {
    match value.get().as_bytes().first() {
        Some(b't' | b'f') => b't',
        Some(b'-' | b'0'..=b'9') => b'0',
        Some(first) => *first,
        None => b' ',
    }
}

fn is_null(value: &RawValue) -> bool {
    value.get() == "null"
}

/// An object's members, borrowed; `None` when `json` is not an object.
fn members(json: &str) -> Result<Option<IndexMap<String, &RawValue>>, serde_json::Error> {
    if !json.trim_start().starts_with('{') {
        return Ok(None);
    }
    serde_json::from_str(json).map(Some)
}

/// `value` merged with `default`, written to `out`.
fn merge_into(value: Option<&RawValue>, default: &RawValue, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let chosen = match value {
        None => default,
        Some(value) if is_null(value) => default,
        Some(value) if is_null(default) => value,
        Some(value) if kind(value) != kind(default) => default,
        Some(value) if kind(value) == b'{' => return merge_objects(value.get(), default.get(), out),
        Some(value) => value,
    };
    out.extend_from_slice(chosen.get().as_bytes());
    Ok(())
}

/// The members of `object`, each default merged in (new ones after the
/// client's), written as one object.
fn merge_objects(object: &str, defaults: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let (Some(object), Some(defaults)) = (members(object)?, members(defaults)?) else {
        unreachable!("both are objects");
    };
    let mut merged: IndexMap<&str, Option<&RawValue>> = object.iter().map(|(k, v)| (k.as_str(), Some(*v))).collect();
    for name in defaults.keys() {
        merged.entry(name.as_str()).or_insert(None);
    }
    out.push(b'{');
    for (index, (name, value)) in merged.into_iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, name)?;
        out.push(b':');
        match defaults.get(name) {
            Some(default) => merge_into(value, default, out)?,
            None => out.extend_from_slice(value.expect("a member of the body").get().as_bytes()),
        }
    }
    out.push(b'}');
    Ok(())
}

/// `body` with `defaults` (a JSON object) merged in; `None` when the body is
/// not a JSON object (it goes on as sent, for the application to refuse).
pub fn merge(body: &[u8], defaults: &RawValue) -> Result<Option<Vec<u8>>, serde_json::Error> {
    let text = std::str::from_utf8(body).map_err(|_| serde::de::Error::custom("the body is not UTF-8"))?;
    if members(text)?.is_none() || !defaults.get().starts_with('{') {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(body.len() + defaults.get().len());
    merge_objects(text, defaults.get(), &mut out)?;
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn merged(body: Value, defaults: Value) -> Value {
        let defaults = RawValue::from_string(defaults.to_string()).unwrap();
        let out = merge(body.to_string().as_bytes(), &defaults).unwrap().unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn unset_fields_take_the_defaults_and_set_ones_stay() {
        let defaults = json!({"temperature": 0.2, "max_tokens": 10, "custom_fields": {"configuration": {"mode": "x"}}});
        assert_eq!(
            merged(json!({"messages": [], "max_tokens": 99}), defaults.clone()),
            json!({"messages": [], "max_tokens": 99, "temperature": 0.2, "custom_fields": {"configuration": {"mode": "x"}}})
        );
        // Objects on both sides merge member by member; null counts as unset;
        // another type is replaced, as DIAL Core does.
        assert_eq!(
            merged(
                json!({"temperature": null, "custom_fields": {"configuration": {"mode": "mine"}, "other": 1}, "max_tokens": "x"}),
                defaults
            ),
            json!({"temperature": 0.2, "custom_fields": {"configuration": {"mode": "mine"}, "other": 1}, "max_tokens": 10})
        );
        assert_eq!(
            merged(json!({"stop": ["a"]}), json!({"stop": ["b", "c"], "n": null})),
            json!({"stop": ["a"], "n": null})
        );
    }

    #[test]
    fn the_body_is_kept_as_written_where_no_default_reaches() {
        let body = r#"{"b" : 1.50, "a":{"x":"\u00e9"},"messages":[ {"role":"user"} ]}"#;
        let defaults = RawValue::from_string(r#"{"c":true}"#.into()).unwrap();
        let out = String::from_utf8(merge(body.as_bytes(), &defaults).unwrap().unwrap()).unwrap();
        assert_eq!(out, r#"{"b":1.50,"a":{"x":"\u00e9"},"messages":[ {"role":"user"} ],"c":true}"#);
        assert_eq!(merge(b"[1]", &defaults).unwrap(), None, "not an object: left as sent");
        assert!(merge(b"{\"a\":", &defaults).is_err());
    }
}
