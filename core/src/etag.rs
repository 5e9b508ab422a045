//! `If-Match` / `If-None-Match`, as DIAL Core applies them.
//!
//! Both headers take `*` or a list of tags (quotes optional). A resource that
//! does not exist (a tombstone counts as absent) has no etag.

/// One conditional header's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtagMatch {
    Any,
    Tags(Vec<String>),
}

impl EtagMatch {
    fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        if value == "*" {
            return Some(Self::Any);
        }
        let tags = value
            .split(',')
            .map(|tag| tag.trim().trim_start_matches("W/").trim_matches('"').to_string())
            .filter(|tag| !tag.is_empty())
            .collect();
        Some(Self::Tags(tags))
    }

    fn matches(&self, etag: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Tags(tags) => tags.iter().any(|tag| tag == etag),
        }
    }
}

/// The conditions of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    pub if_match: Option<EtagMatch>,
    pub if_none_match: Option<EtagMatch>,
}

/// A failed write condition: 412 with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PreconditionFailed(pub String);

impl Preconditions {
    /// `If-None-Match: *`: the write creates, never replaces.
    pub fn create_only() -> Self {
        Self { if_match: None, if_none_match: Some(EtagMatch::Any) }
    }

    /// The conditions of the raw `If-Match` and `If-None-Match` values. A
    /// value that is not ASCII is still a condition: it matches no etag
    /// (etags are hex), so `If-Match` with it fails rather than being ignored.
    pub fn from_values(if_match: Option<&[u8]>, if_none_match: Option<&[u8]>) -> Self {
        let parse = |value: &[u8]| EtagMatch::parse(&String::from_utf8_lossy(value));
        Self { if_match: if_match.and_then(parse), if_none_match: if_none_match.and_then(parse) }
    }

    /// Whether a write may go ahead given the current etag (`None`: absent).
    pub fn check_write(&self, current: Option<&str>) -> Result<(), PreconditionFailed> {
        match (current, &self.if_none_match) {
            (Some(_), Some(EtagMatch::Any)) => return Err(PreconditionFailed("Resource already exists".into())),
            (Some(etag), Some(none_match)) if none_match.matches(etag) => {
                return Err(PreconditionFailed(format!("if-none-match condition is failed for etag: {etag}")));
            }
            _ => {}
        }
        match (current, &self.if_match) {
            (_, None) => Ok(()),
            (Some(etag), Some(if_match)) if if_match.matches(etag) => Ok(()),
            (Some(etag), Some(_)) => Err(PreconditionFailed(format!("If-match condition is failed for etag: {etag}"))),
            (None, Some(_)) => {
                Err(PreconditionFailed("If-match condition is failed: the resource does not exist".into()))
            }
        }
    }

    /// Whether a read should answer 304 Not Modified.
    pub fn not_modified(&self, current: &str) -> bool {
        self.if_none_match.as_ref().is_some_and(|m| m.matches(current))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(if_match: Option<&str>, if_none_match: Option<&str>) -> Preconditions {
        Preconditions {
            if_match: if_match.and_then(EtagMatch::parse),
            if_none_match: if_none_match.and_then(EtagMatch::parse),
        }
    }

    #[test]
    fn writes() {
        assert!(conditions(None, None).check_write(Some("a")).is_ok());
        assert!(conditions(None, Some("*")).check_write(None).is_ok());
        assert_eq!(conditions(None, Some("*")).check_write(Some("a")).unwrap_err().0, "Resource already exists");
        assert!(conditions(Some("\"a\", \"b\""), None).check_write(Some("b")).is_ok());
        assert_eq!(
            conditions(Some("x"), None).check_write(Some("a")).unwrap_err().0,
            "If-match condition is failed for etag: a"
        );
        assert!(conditions(Some("*"), None).check_write(Some("a")).is_ok());
        assert!(conditions(Some("*"), None).check_write(None).is_err());
        assert!(conditions(None, Some("a")).check_write(Some("a")).is_err());
        assert!(conditions(None, Some("b")).check_write(Some("a")).is_ok());
    }

    #[test]
    fn reads() {
        assert!(conditions(None, Some("\"a\"")).not_modified("a"));
        assert!(conditions(None, Some("*")).not_modified("a"));
        assert!(!conditions(None, Some("b")).not_modified("a"));
        assert!(!conditions(Some("a"), None).not_modified("a"));
    }
}
