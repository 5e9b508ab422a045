//! Public-folder rules (DIAL's `RuleMatcher`): who may read under a folder of
//! the `public` bucket.
//!
//! A rule is `{function, source, targets}`; `source` is `roles` or a claim
//! name. Within one folder the rules are ORed; a path is readable when every
//! ancestor folder that has rules admits the caller. A folder without rules
//! (or with an empty list) admits everyone. EQUAL and CONTAIN compare without
//! case; REGEX must match the whole value. A caller without token claims
//! never matches a claim rule. Admins are not checked here: access gives
//! them everything on `public` before rules are consulted.

use std::collections::BTreeMap;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Caller;
use crate::documents::{DocumentError, Documents, global_path};
use crate::resource_url::ResourceUrl;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum RuleFunction {
    True,
    False,
    Equal,
    Contain,
    Regex,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Rule {
    pub function: RuleFunction,
    pub source: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// REGEX targets, compiled on first use: a listing checks one rule
    /// against many items.
    #[serde(skip)]
    compiled: CompiledTargets,
}

/// The compiled patterns of a REGEX rule; not part of the rule's identity.
#[derive(Debug, Clone, Default)]
struct CompiledTargets(std::sync::OnceLock<Vec<Regex>>);

impl PartialEq for CompiledTargets {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for CompiledTargets {}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuleError {
    #[error("Rule function is missing")]
    MissingFunction,
    #[error("Rule source is missing")]
    MissingSource,
    #[error("Rule targets are missing for function {0:?}")]
    MissingTargets(RuleFunction),
    #[error("Invalid rule regex '{0}'")]
    BadRegex(String),
}

impl Rule {
    pub fn new(function: RuleFunction, source: impl Into<String>, targets: Vec<String>) -> Self {
        Self { function, source: source.into(), targets, compiled: CompiledTargets::default() }
    }

    /// Checks a rule as submitted with a publication.
    pub fn check(&self) -> Result<(), RuleError> {
        if self.source.trim().is_empty() {
            return Err(RuleError::MissingSource);
        }
        match self.function {
            RuleFunction::True | RuleFunction::False => Ok(()),
            _ if self.targets.is_empty() => Err(RuleError::MissingTargets(self.function)),
            RuleFunction::Regex => {
                for target in &self.targets {
                    full_match(target).map_err(|_| RuleError::BadRegex(target.clone()))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Whether this rule admits `caller`.
    pub fn matches(&self, caller: &Caller) -> bool {
        let values = match self.function {
            RuleFunction::True => return true,
            RuleFunction::False => return false,
            _ => source_values(caller, &self.source),
        };
        let Some(values) = values else { return false };
        match self.function {
            RuleFunction::Equal => values.iter().any(|v| self.targets.iter().any(|t| t.eq_ignore_ascii_case(v))),
            RuleFunction::Contain => values.iter().any(|v| {
                let v = v.to_lowercase();
                self.targets.iter().any(|t| v.contains(&t.to_lowercase()))
            }),
            RuleFunction::Regex => {
                let patterns =
                    self.compiled.0.get_or_init(|| self.targets.iter().filter_map(|t| full_match(t).ok()).collect());
                patterns.iter().any(|re| values.iter().any(|v| re.is_match(v)))
            }
            RuleFunction::True | RuleFunction::False => unreachable!("handled above"),
        }
    }
}

fn full_match(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{pattern})$"))
}

/// The caller's values for a rule source. `roles` are every caller's (API
/// keys have roles too); any other source is a token claim, which API-key
/// callers do not have, so they never match a claim-based rule.
fn source_values(caller: &Caller, source: &str) -> Option<Vec<String>> {
    if source == "roles" {
        return Some(caller.roles.clone());
    }
    let claims = caller.claims.as_ref()?;
    Some(match claims.get(source)? {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        Value::Bool(b) => vec![b.to_string()],
        Value::Number(n) => vec![n.to_string()],
        _ => Vec::new(),
    })
}

/// The rules of every public folder: folder URL (`<group>/public/<path>/`) → rules.
pub type RulesDocument = BTreeMap<String, Vec<Rule>>;

/// Reads and changes the rules document.
#[derive(Debug, Clone)]
pub struct PublicRules {
    documents: Documents,
}

impl PublicRules {
    pub fn new(documents: Documents) -> Self {
        Self { documents }
    }

    pub fn path() -> object_store::path::Path {
        global_path("publication", "rules")
    }

    pub async fn all(&self) -> Result<RulesDocument, DocumentError> {
        self.documents.read(&Self::path()).await
    }

    /// Whether `caller` may read `url` (in `public`) by the rules of its
    /// ancestor folders.
    pub async fn admits(&self, caller: &Caller, url: &ResourceUrl) -> Result<bool, DocumentError> {
        let rules = self.all().await?;
        Ok(admits_with(&rules, caller, url))
    }

    /// The rules of `folder` and each of its ancestors, by folder URL.
    pub async fn along(&self, folder: &ResourceUrl) -> Result<RulesDocument, DocumentError> {
        let rules = self.all().await?;
        Ok(public_folders(folder).into_iter().filter_map(|url| rules.get(&url).map(|r| (url, r.clone()))).collect())
    }
}

/// The check itself, on a rules document already read (listings filter many
/// items with one read).
pub fn admits_with(rules: &RulesDocument, caller: &Caller, url: &ResourceUrl) -> bool {
    public_folders(url).iter().all(|folder| match rules.get(folder) {
        None => true,
        Some(list) if list.is_empty() => true,
        Some(list) => list.iter().any(|rule| rule.matches(caller)),
    })
}

/// `public/` folder URLs above `url`, outermost first, ignoring the group so
/// one rule set covers every resource type: `public/`, `public/a/`,
/// `public/a/b/`. (For a folder URL, the folder itself is included.)
pub fn public_folders(url: &ResourceUrl) -> Vec<String> {
    let segments = url.segments();
    let depth = if url.is_folder() { segments.len() } else { segments.len().saturating_sub(1) };
    let mut folders = vec!["public/".to_string()];
    let mut current = "public/".to_string();
    for segment in &segments[..depth] {
        current.push_str(&utf8_percent_encode(segment));
        current.push('/');
        folders.push(current.clone());
    }
    folders
}

fn utf8_percent_encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, crate::resource_url::SEGMENT_ESCAPES).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Identity;
    use crate::resource_url::Intent;
    use serde_json::json;

    fn user(roles: &[&str], claims: Value) -> Caller {
        Caller {
            identity: Identity::User { id: "u".into() },
            roles: roles.iter().map(|r| r.to_string()).collect(),
            is_admin: false,
            claims: Some(claims),
            per_request: None,
        }
    }

    fn rule(function: RuleFunction, source: &str, targets: &[&str]) -> Rule {
        Rule::new(function, source, targets.iter().map(|t| t.to_string()).collect())
    }

    #[test]
    fn functions_match_roles_and_claims() {
        let alice = user(&["Team-A"], json!({"email": "alice@corp.com", "groups": ["eng", "ops"]}));
        assert!(rule(RuleFunction::True, "roles", &[]).matches(&alice));
        assert!(!rule(RuleFunction::False, "roles", &[]).matches(&alice));
        assert!(rule(RuleFunction::Equal, "roles", &["team-a"]).matches(&alice));
        assert!(!rule(RuleFunction::Equal, "roles", &["team"]).matches(&alice));
        assert!(rule(RuleFunction::Contain, "email", &["@CORP.com"]).matches(&alice));
        assert!(rule(RuleFunction::Equal, "groups", &["ops"]).matches(&alice));
        assert!(rule(RuleFunction::Regex, "email", &[".*@corp\\.com"]).matches(&alice));
        assert!(!rule(RuleFunction::Regex, "email", &["corp"]).matches(&alice), "REGEX is a full match");
        assert!(!rule(RuleFunction::Equal, "missing", &["x"]).matches(&alice));

        let key_caller = Caller { claims: None, ..alice.clone() };
        assert!(rule(RuleFunction::Equal, "roles", &["team-a"]).matches(&key_caller), "API keys have roles");
        assert!(!rule(RuleFunction::Contain, "email", &["@corp.com"]).matches(&key_caller), "but no claims");
    }

    #[test]
    fn every_ancestor_with_rules_must_admit() {
        let alice = user(&["a"], json!({}));
        let url = ResourceUrl::parse("skills/public/team/tools/pdf", Intent::Read).unwrap();
        assert_eq!(public_folders(&url), ["public/", "public/team/", "public/team/tools/"]);

        let mut rules = RulesDocument::new();
        assert!(admits_with(&rules, &alice, &url), "no rules: everyone");
        rules.insert("public/team/".into(), vec![rule(RuleFunction::Equal, "roles", &["a"])]);
        assert!(admits_with(&rules, &alice, &url));
        rules.insert("public/team/tools/".into(), vec![rule(RuleFunction::Equal, "roles", &["b"])]);
        assert!(!admits_with(&rules, &alice, &url));
        rules.get_mut("public/team/tools/").unwrap().push(rule(RuleFunction::Contain, "roles", &["A"]));
        assert!(admits_with(&rules, &alice, &url), "rules of one folder are ORed");
    }

    #[test]
    fn regex_targets_are_compiled_once_per_rule() {
        let rule = rule(RuleFunction::Regex, "email", &[".*@corp\\.com", "("]);
        assert!(rule.compiled.0.get().is_none());
        let alice = user(&[], json!({"email": "alice@corp.com"}));
        assert!(rule.matches(&alice));
        let compiled = rule.compiled.0.get().expect("compiled on first use").as_ptr();
        assert!(rule.matches(&alice));
        assert_eq!(rule.compiled.0.get().unwrap().as_ptr(), compiled, "reused, not compiled again");
        assert_eq!(rule.compiled.0.get().unwrap().len(), 1, "an invalid pattern matches nothing");
    }

    #[test]
    fn rules_are_checked_on_submit() {
        assert_eq!(
            rule(RuleFunction::Equal, "roles", &[]).check(),
            Err(RuleError::MissingTargets(RuleFunction::Equal))
        );
        assert_eq!(rule(RuleFunction::True, " ", &[]).check(), Err(RuleError::MissingSource));
        assert!(matches!(rule(RuleFunction::Regex, "roles", &["("]).check(), Err(RuleError::BadRegex(_))));
        assert!(rule(RuleFunction::False, "roles", &[]).check().is_ok());
    }
}
