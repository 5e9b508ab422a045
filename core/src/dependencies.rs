//! Resource dependencies (seed app-resource-dependencies, SPEC §9): an
//! application declares the user resources it needs; an admin consents once;
//! every call's per-request key gets exactly the declared, consented
//! resources the originating user can reach.
//!
//! - [`normalize`]: write-time validation of the `resource_dependencies`
//!   section, on every writer (the applications API, config applications at
//!   load): record shape, `kind`, unique `link_id`, at most 100 records,
//!   `access` READ/WRITE (stored uppercase), the target grammar
//!   `{type}/{bucket}/{path…}` with `{current-user}` only as the bucket —
//!   all on percent-decoded segments.
//! - [`resolve`]: at request start, on every mint site and at every hop of a
//!   chain: per record, `{current-user}` becomes the originating user's
//!   bucket; the grant is, per access type, what is declared ∩ what the
//!   originating user can do there on their own (never what the calling
//!   application's key holds), and only under live admin consent. A
//!   `required` record that does not fully resolve fails the call (403)
//!   before the application is contacted.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::access::{AccessService, Permissions, Resource, StateRead};
use crate::audit::{Audit, AuditEvent, Call};
use crate::auth::Caller;
use crate::buckets::BucketCodec;
use crate::keys::KeyGrant;
use crate::resource_url::{Intent, ResourceUrl};

/// Whether an admin's consent covers a declaration as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminConsentStatus {
    /// No admin has consented.
    Missing,
    Live,
    /// An admin consented to an earlier declaration.
    Stale,
}

impl AdminConsentStatus {
    /// Why a call gets no grant, naming who can fix it; `None` when live.
    pub fn refusal(self, deployment: &str) -> Option<String> {
        match self {
            Self::Live => None,
            Self::Missing => Some(format!(
                "no admin has consented to the resource dependencies {deployment} declares; an admin must \
                 consent (POST /v1/consent/{deployment}/admin-consent)"
            )),
            Self::Stale => Some(format!(
                "the resource dependencies {deployment} declares changed since an admin consented to them; an \
                 admin must consent to the new declaration (POST /v1/consent/{deployment}/admin-consent)"
            )),
        }
    }
}

/// The one `kind` a record may have.
pub const LINK_KIND: &str = "dial.resourceLink";
/// The bucket placeholder: the originating user's own bucket, per call.
pub const CURRENT_USER: &str = "{current-user}";
/// Most records one application may declare.
pub const MAX_RECORDS: usize = 100;
/// The v1 groups a dependency may target (handler groups are added per host).
pub const V1_GROUPS: [&str; 4] = ["files", "prompts", "conversations", "applications"];

/// Who may declare what, for one write.
#[derive(Debug, Clone, Default)]
pub struct DeclarationPolicy {
    /// Groups a target may name: the v1 groups and the handler groups.
    pub declarable: Vec<String>,
    /// Whether the writer may declare dependencies at all: admins (and the
    /// configuration), or anyone with `access.allow_user_resource_dependencies`.
    pub may_declare: bool,
    /// Whether the definition may ask for the user's token
    /// (`forward_auth_token: true`): the configuration's applications only,
    /// whose endpoints the operator chose.
    pub may_forward_auth_token: bool,
}

/// Why a declaration cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclarationError {
    /// 400, every issue listed.
    #[error("Invalid resource dependencies: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// 403: a user-authored application may not declare.
    #[error(
        "Only admins may declare resource dependencies in an application (access.allow_user_resource_dependencies is off)"
    )]
    NotAllowed,
}

/// One record as the stored definition holds it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Declared {
    pub link_id: String,
    pub target: Target,
    /// `READ` / `WRITE`, uppercase.
    pub access: Vec<String>,
    #[serde(default)]
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Target {
    pub path: String,
}

impl Declared {
    pub fn access_set(&self) -> BTreeSet<String> {
        self.access.iter().cloned().collect()
    }

    fn wants(&self) -> Permissions {
        Permissions { read: self.access.iter().any(|a| a == "READ"), write: self.access.iter().any(|a| a == "WRITE") }
    }
}

/// A record as sent: every field borrowed raw, so its shape can be judged
/// field by field (and nothing large is built from it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecord<'a> {
    #[serde(borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    link_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    target: Option<&'a RawValue>,
    #[serde(borrow, default)]
    access: Option<&'a RawValue>,
    #[serde(borrow, default)]
    required: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget<'a> {
    #[serde(borrow, default)]
    path: Option<&'a RawValue>,
}

/// Checks a `resource_dependencies` section (keys already snake_case) and
/// returns it as stored: records in order, `access` uppercase and each type
/// once. Every issue is reported at once.
pub fn normalize(section: &RawValue, policy: &DeclarationPolicy) -> Result<String, DeclarationError> {
    let records: Vec<&RawValue> = match serde_json::from_str(section.get()) {
        Ok(records) => records,
        Err(_) if section.get() == "null" => Vec::new(),
        Err(_) => return Err(DeclarationError::Invalid(vec!["resource_dependencies must be an array".into()])),
    };
    if !records.is_empty() && !policy.may_declare {
        return Err(DeclarationError::NotAllowed);
    }
    let mut issues = Vec::new();
    if records.len() > MAX_RECORDS {
        issues.push(format!("at most {MAX_RECORDS} records may be declared, not {}", records.len()));
        return Err(DeclarationError::Invalid(issues));
    }
    let mut link_ids = BTreeSet::new();
    let mut stored = String::from("[");
    for (index, raw) in records.iter().enumerate() {
        let at = format!("record {}", index + 1);
        let record: RawRecord = match serde_json::from_str(raw.get()) {
            Ok(record) => record,
            Err(error) => {
                issues
                    .push(format!("{at}: must be an object with kind, link_id, target, access and required ({error})"));
                continue;
            }
        };
        let kind = string(record.kind);
        if kind.as_deref() != Some(LINK_KIND) {
            issues.push(format!("{at}: kind must be \"{LINK_KIND}\""));
        }
        let link_id = string(record.link_id).filter(|id| !id.trim().is_empty());
        let label = match &link_id {
            Some(id) if !link_ids.insert(id.clone()) => {
                issues.push(format!("{at}: link_id '{id}' is declared twice"));
                format!("link '{id}'")
            }
            Some(id) => format!("link '{id}'"),
            None => {
                issues.push(format!("{at}: link_id must be a non-empty string"));
                at.clone()
            }
        };
        let path = record
            .target
            .and_then(|target| serde_json::from_str::<RawTarget>(target.get()).ok())
            .and_then(|target| string(target.path));
        match &path {
            None => issues.push(format!("{label}: target must be an object with a string path")),
            Some(path) => check_target(path, policy, &label, &mut issues),
        }
        let access = access(record.access, &label, &mut issues);
        let required = match record.required.map(RawValue::get) {
            None => None,
            Some(value @ ("true" | "false")) => Some(value == "true"),
            Some(_) => {
                issues.push(format!("{label}: required must be true or false"));
                None
            }
        };
        if index > 0 {
            stored.push(',');
        }
        // Keys in sorted order, as every stored object has them.
        let json = |text: &str| serde_json::to_string(text).expect("strings serialize");
        let _ = write!(
            stored,
            "{{\"access\":[{}],\"kind\":{},\"link_id\":{},",
            access.iter().map(|a| json(a)).collect::<Vec<_>>().join(","),
            json(kind.as_deref().unwrap_or_default()),
            json(link_id.as_deref().unwrap_or_default()),
        );
        if let Some(required) = required {
            let _ = write!(stored, "\"required\":{required},");
        }
        let _ = write!(stored, "\"target\":{{\"path\":{}}}}}", json(path.as_deref().unwrap_or_default()));
    }
    stored.push(']');
    if issues.is_empty() { Ok(stored) } else { Err(DeclarationError::Invalid(issues)) }
}

fn string(value: Option<&RawValue>) -> Option<String> {
    value.and_then(|value| serde_json::from_str::<String>(value.get()).ok())
}

/// `access`: a non-empty list of READ / WRITE, any case; stored uppercase,
/// each once, in the order sent.
fn access(value: Option<&RawValue>, label: &str, issues: &mut Vec<String>) -> Vec<String> {
    let Some(list) = value.and_then(|value| serde_json::from_str::<Vec<String>>(value.get()).ok()) else {
        issues.push(format!("{label}: access must be a list of READ and WRITE"));
        return Vec::new();
    };
    if list.is_empty() {
        issues.push(format!("{label}: access must not be empty"));
    }
    let mut seen = Vec::new();
    for item in list {
        let upper = item.to_ascii_uppercase();
        if upper != "READ" && upper != "WRITE" {
            issues.push(format!("{label}: access '{item}' is not READ or WRITE"));
        } else if !seen.contains(&upper) {
            seen.push(upper);
        }
    }
    seen
}

/// The target grammar: `{type}/{bucket}/{path…}` (a trailing `/` names a
/// folder), checked on percent-decoded segments. A whole bucket is a folder
/// like any other (`skills/{current-user}/`, `files/public/`: DIAL Core's
/// own tests declare exactly these); only a bare type root is refused.
fn check_target(path: &str, policy: &DeclarationPolicy, label: &str, issues: &mut Vec<String>) {
    let mut bad = |why: String| issues.push(format!("{label}: target '{path}' {why}"));
    let folder = path.ends_with('/');
    let body = path.strip_suffix('/').unwrap_or(path);
    let segments: Vec<String> = body
        .split('/')
        .map(|segment| percent_encoding::percent_decode_str(segment).decode_utf8_lossy().into_owned())
        .collect();
    let [group, bucket, below @ ..] = segments.as_slice() else {
        return bad("must be {type}/{bucket}/{path…}".into());
    };
    if !policy.declarable.iter().any(|declarable| declarable == group) {
        return bad(format!(
            "names type '{group}', which cannot be declared (allowed: {})",
            policy.declarable.join(", ")
        ));
    }
    if bucket != CURRENT_USER && (bucket.is_empty() || !bucket.bytes().all(|b| b.is_ascii_alphanumeric())) {
        bad(format!("has bucket '{bucket}': a bucket id or {CURRENT_USER}"));
    }
    // `{type}/{bucket}` without the `/` is neither the bucket (a folder) nor
    // an item in it.
    if below.is_empty() && !folder {
        bad(format!("names a bucket as an item: its folder is {path}/"));
    }
    for segment in below {
        match segment.as_str() {
            "" => bad("has an empty segment".into()),
            "." | ".." => bad("has a . or .. segment".into()),
            s if s.contains('/') => bad("has an encoded / inside a segment".into()),
            s if s.contains('*') => bad("has a wildcard (*): name the folder instead".into()),
            s if s.contains(CURRENT_USER) || s.contains('{') || s.contains('}') => {
                bad(format!("has a placeholder outside the bucket: only the bucket may be {CURRENT_USER}"))
            }
            _ => {}
        }
    }
}

/// The records a stored definition declares (a definition written before the
/// section existed declares none).
pub fn declared(section: Option<&serde_json::Value>) -> Vec<Declared> {
    section.and_then(|value| serde_json::from_value(value.clone()).ok()).unwrap_or_default()
}

/// A `required` record that does not resolve: the call is refused (403).
#[derive(Debug, Clone, thiserror::Error)]
#[error("Required resource dependency {target} of {deployment} cannot be granted: {reason}")]
pub struct RequiredUnresolved {
    pub deployment: String,
    pub target: String,
    pub reason: String,
}

/// Each record's target on this call: `{current-user}` replaced by the
/// originating user's bucket. The caller may then key each as grants key a
/// link (a v2 resource declared in its listing form `…/x/`, a folder by the
/// grammar, is the resource `…/x` when one lives there, as sharing and
/// attachments key it) before handing them to [`resolve`].
pub fn targets(buckets: &BucketCodec, user: &Caller, declared: &[Declared]) -> Vec<String> {
    let user_bucket = buckets.encode(&user.user_location());
    declared.iter().map(|record| record.target.path.replacen(CURRENT_USER, &user_bucket, 1)).collect()
}

/// The grants the records of `declared` earn on this call (see the module
/// docs), `targets` being theirs from [`targets`], one per record.
/// `consent`: whether live admin consent covers the declaration.
pub async fn resolve(
    access: &AccessService,
    buckets: &BucketCodec,
    audit: &Audit,
    call: &Call<'_>,
    declared: &[Declared],
    targets: Vec<String>,
    consent: AdminConsentStatus,
) -> Result<Vec<KeyGrant>, RequiredUnresolved> {
    debug_assert_eq!(declared.len(), targets.len(), "one target per record");
    let mut grants = Vec::new();
    // One decision: the rules and each owner's shares are read once for all records.
    let mut state = StateRead::default();
    for (record, target) in declared.iter().zip(targets) {
        let outcome = match (consent.refusal(call.deployment), call.key_forwarded) {
            (Some(refusal), _) => Err(refusal),
            (None, false) => Err("the application does not receive a per-request key".to_string()),
            (None, true) => reach(access, buckets, call.user, &target, &mut state).await,
        };
        let wants = record.wants();
        let granted = match outcome {
            Ok(reach) => Permissions { read: wants.read && reach.read, write: wants.write && reach.write },
            Err(reason) => {
                audit.emit(AuditEvent::denial(call, &target, &reason));
                if record.required {
                    audit.emit(AuditEvent::runtime_fail(call, &target, &reason));
                    return Err(RequiredUnresolved { deployment: call.deployment.into(), target, reason });
                }
                continue;
            }
        };
        if granted != wants {
            let reason = format!(
                "the user holds {} of the declared {}",
                names(granted).unwrap_or_else(|| "none".into()),
                names(wants).unwrap_or_default()
            );
            audit.emit(AuditEvent::denial(call, &target, &reason));
            if record.required {
                audit.emit(AuditEvent::runtime_fail(call, &target, &reason));
                return Err(RequiredUnresolved { deployment: call.deployment.into(), target, reason });
            }
        }
        if granted.read || granted.write {
            audit.emit(AuditEvent::grant(call, &target, granted));
            grants.push(KeyGrant { url: target, read: granted.read, write: granted.write });
        }
    }
    Ok(grants)
}

fn names(permissions: Permissions) -> Option<String> {
    let names = permissions.names();
    (!names.is_empty()).then(|| names.join("+"))
}

/// What the originating user can do at `target` on their own: own bucket,
/// shares, public rules (the one access check, asked as the user).
async fn reach(
    access: &AccessService,
    buckets: &BucketCodec,
    user: &Caller,
    target: &str,
    state: &mut StateRead,
) -> Result<Permissions, String> {
    let url = ResourceUrl::parse(target, Intent::Read).map_err(|e| format!("the target is not a resource URL: {e}"))?;
    let location = buckets.decode(url.bucket()).map_err(|_| "the target's bucket does not exist".to_string())?;
    access
        .permissions_within(user, Resource { url: &url, location: &location }, state)
        .await
        .map_err(|error| format!("access could not be decided: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> DeclarationPolicy {
        DeclarationPolicy {
            declarable: ["files", "prompts", "conversations", "applications", "skills"].map(String::from).to_vec(),
            may_declare: true,
            may_forward_auth_token: false,
        }
    }

    fn check(section: &str) -> Result<String, DeclarationError> {
        normalize(&serde_json::from_str::<Box<RawValue>>(section).unwrap(), &policy())
    }

    fn issues(section: &str) -> Vec<String> {
        match check(section) {
            Err(DeclarationError::Invalid(issues)) => issues,
            other => panic!("expected issues, got {other:?}"),
        }
    }

    #[test]
    fn valid_records_are_stored_normalized() {
        let stored = check(
            r#"[{"kind": "dial.resourceLink", "link_id": "l1", "target": {"path": "files/{current-user}/skills/"},
                 "access": ["read", "Write", "READ"], "required": true},
                {"kind": "dial.resourceLink", "link_id": "l2", "target": {"path": "skills/public/policies/x"}, "access": ["READ"]}]"#,
        )
        .unwrap();
        assert_eq!(
            stored,
            r#"[{"access":["READ","WRITE"],"kind":"dial.resourceLink","link_id":"l1","required":true,"target":{"path":"files/{current-user}/skills/"}},{"access":["READ"],"kind":"dial.resourceLink","link_id":"l2","target":{"path":"skills/public/policies/x"}}]"#
        );
        assert_eq!(check("[]").unwrap(), "[]");
    }

    #[test]
    fn every_issue_is_reported() {
        let found = issues(
            r#"[{"kind": "other", "link_id": "a", "target": {"path": "system/x/y"}, "access": []},
                {"kind": "dial.resourceLink", "link_id": "a", "target": {"path": "files"}, "access": ["SHARE"]},
                {"kind": "dial.resourceLink", "link_id": "b", "target": {"path": "files/B/a/../b"}, "access": ["READ"]},
                {"kind": "dial.resourceLink", "link_id": "c", "target": {"path": "files/B/x/{current-user}/y"}, "access": ["READ"]},
                {"kind": "dial.resourceLink", "link_id": "d", "target": {"path": "files/B/*"}, "access": ["READ"]},
                {"kind": "dial.resourceLink", "link_id": "e", "target": {"path": "files/B/a%2F..%2Fb/%2E%2E"}, "access": ["READ"]},
                {"kind": "dial.resourceLink", "link_id": "f", "target": {"path": "files/B//x"}, "access": ["READ"], "required": "yes"},
                {"kind": "dial.resourceLink", "link_id": "g", "target": "files/B/x", "access": "READ", "extra": 1}]"#,
        );
        let text = found.join("\n");
        for expected in [
            "kind must be",
            "type 'system'",
            "access must not be empty",
            "'a' is declared twice",
            "target 'files' must be {type}/{bucket}/{path…}",
            "'SHARE' is not READ or WRITE",
            "a . or .. segment",
            "placeholder outside the bucket",
            "wildcard",
            "empty segment",
            "required must be true or false",
            "record 8: must be an object",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
        }
        let many: Vec<String> = (0..101)
            .map(|i| format!(r#"{{"kind":"dial.resourceLink","link_id":"l{i}","target":{{"path":"files/B/x"}},"access":["READ"]}}"#))
            .collect();
        assert!(issues(&format!("[{}]", many.join(",")))[0].contains("at most 100"));
    }

    /// DIAL Core's own declarations and validator tests: a whole bucket is a
    /// folder target; a bare type root, or a bucket named as an item, is not.
    #[test]
    fn a_whole_bucket_is_a_folder_target() {
        for path in ["skills/{current-user}/", "files/public/"] {
            let record = format!(
                r#"[{{"kind":"dial.resourceLink","link_id":"l","target":{{"path":"{path}"}},"access":["READ"]}}]"#
            );
            assert!(check(&record).is_ok(), "{path}: {:?}", check(&record));
        }
        for (path, why) in [
            ("files", "must be {type}/{bucket}/{path…}"),
            ("skills/", "must be {type}/{bucket}/{path…}"),
            ("files/public", "names a bucket as an item: its folder is files/public/"),
        ] {
            let record = format!(
                r#"[{{"kind":"dial.resourceLink","link_id":"l","target":{{"path":"{path}"}},"access":["READ"]}}]"#
            );
            let found = issues(&record).join("\n");
            assert!(found.contains(why), "{path}: {found}");
        }
    }

    #[test]
    fn user_authored_applications_may_not_declare() {
        let section: Box<RawValue> = serde_json::from_str(
            r#"[{"kind":"dial.resourceLink","link_id":"l","target":{"path":"files/B/x"},"access":["READ"]}]"#,
        )
        .unwrap();
        let user = DeclarationPolicy { may_declare: false, ..policy() };
        assert_eq!(normalize(&section, &user), Err(DeclarationError::NotAllowed));
        let empty: Box<RawValue> = serde_json::from_str("[]").unwrap();
        assert!(normalize(&empty, &user).is_ok(), "an empty section declares nothing");
    }
}
