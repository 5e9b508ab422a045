//! Consent (SPEC §9): a user's consent to call an application that asks for
//! it (`features.consent_required`), and an admin's consent to an
//! application's resource-dependency declaration.
//!
//! Both are documents under `system/` ([`crate::documents`]), where no
//! resource route can reach them — an application can never write its own
//! yes. The admin record keeps the declaration as approved (placeholders as
//! declared) with a server-stamped `grantedBy`/`grantedAt`; [`is_live`] — the
//! one predicate the status GET and the resolver share — compares it, as a
//! set, with the declaration as it is now: any change makes it stale.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::auth::Caller;
use crate::buckets::BucketLocation;
pub use crate::dependencies::AdminConsentStatus;
use crate::dependencies::Declared;
use crate::documents::{DocumentError, Documents, global_path, path_for};

/// One approved record, as the admin record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovedResource {
    /// The target as declared (`{current-user}` kept).
    pub url: String,
    pub access: Vec<String>,
    pub link_id: String,
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApprovedDeclaration {
    pub resources: Vec<ApprovedResource>,
}

/// `{"consent": {"resources": [{"url", "access", …}]}, "grantedBy", "grantedAt"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminConsent {
    pub consent: ApprovedDeclaration,
    /// The admin's user id, or `project:<name>` for an admin API key.
    pub granted_by: String,
    /// Milliseconds since the Unix epoch.
    pub granted_at: i64,
}

/// The declaration as an admin would approve it now.
pub fn snapshot(declared: &[Declared]) -> ApprovedDeclaration {
    let mut resources: Vec<ApprovedResource> = declared
        .iter()
        .map(|record| ApprovedResource {
            url: record.target.path.clone(),
            access: record.access_set().into_iter().collect(),
            link_id: record.link_id.clone(),
            required: record.required,
        })
        .collect();
    resources.sort();
    ApprovedDeclaration { resources }
}

/// Whether `record` covers `declared` as it is now: the same records, as a
/// set (order and access order do not matter; anything else does).
pub fn is_live(record: &AdminConsent, declared: &[Declared]) -> bool {
    declares(&record.consent, declared)
}

/// Whether `declared` is `declaration`: the same records, as a set.
pub fn declares(declaration: &ApprovedDeclaration, declared: &[Declared]) -> bool {
    let approved: BTreeSet<&ApprovedResource> = declaration.resources.iter().collect();
    let current = snapshot(declared);
    approved == current.resources.iter().collect::<BTreeSet<_>>()
}

/// Who granted, as the record names them.
pub fn granted_by(admin: &Caller) -> String {
    match &admin.identity {
        crate::identity::Identity::User { id } => id.clone(),
        crate::identity::Identity::Project { name } => format!("project:{name}"),
    }
}

/// The consent document a user is asked to accept for a deployment with
/// `features.consent_required` (DIAL's `{"deployments": {id: {"consentRequired": true}}}`),
/// with DIAL's `resources` section when the application declares resource
/// dependencies: each target as declared and the access asked for, so the
/// user sees what the application will reach — and a changed declaration is
/// another document, asked for again.
pub fn user_document(deployment: &str, declared: &[Declared]) -> Value {
    let mut document = serde_json::json!({"deployments": {deployment: {"consentRequired": true}}});
    if !declared.is_empty() {
        let mut resources: Vec<(String, Vec<String>)> = Vec::new();
        for record in declared {
            let access = record.access_set();
            match resources.iter_mut().find(|(url, _)| *url == record.target.path) {
                Some((_, held)) => held.extend(access),
                None => resources.push((record.target.path.clone(), access.into_iter().collect())),
            }
        }
        for (_, access) in &mut resources {
            access.sort();
            access.dedup();
        }
        resources.sort();
        let resources: Vec<Value> =
            resources.into_iter().map(|(url, access)| serde_json::json!({"url": url, "access": access})).collect();
        document["resources"] = Value::Array(resources);
    }
    document
}

/// The consent documents.
#[derive(Debug, Clone)]
pub struct ConsentStore {
    documents: Documents,
}

/// A document name for a deployment id (which may hold `/`).
fn key(deployment: &str) -> String {
    Sha256::digest(deployment.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

impl ConsentStore {
    pub fn new(documents: Documents) -> Self {
        Self { documents }
    }

    fn admin_path(deployment: &str) -> object_store::path::Path {
        global_path("consent/admin", &key(deployment))
    }

    fn user_path(user: &BucketLocation, deployment: &str) -> object_store::path::Path {
        path_for("consent", user, &key(deployment))
    }

    pub async fn admin(&self, deployment: &str) -> Result<Option<AdminConsent>, DocumentError> {
        self.documents.get(&Self::admin_path(deployment)).await
    }

    /// Records (or replaces) the admin's consent.
    pub async fn grant(&self, deployment: &str, record: &AdminConsent) -> Result<(), DocumentError> {
        let record = record.clone();
        self.documents
            .update(&Self::admin_path(deployment), |stored: &mut Option<AdminConsent>| {
                *stored = Some(record.clone());
                Ok::<_, DocumentError>(crate::documents::Update::Changed(()))
            })
            .await
    }

    /// Withdraws it; whether there was one.
    pub async fn withdraw(&self, deployment: &str) -> Result<bool, DocumentError> {
        let existed = self.admin(deployment).await?.is_some();
        self.documents.delete(&Self::admin_path(deployment)).await?;
        Ok(existed)
    }

    /// Whether live admin consent covers the declaration (the resolver's check).
    pub async fn admin_status(
        &self,
        deployment: &str,
        declared: &[Declared],
    ) -> Result<AdminConsentStatus, DocumentError> {
        Ok(match self.admin(deployment).await? {
            None => AdminConsentStatus::Missing,
            Some(record) if is_live(&record, declared) => AdminConsentStatus::Live,
            Some(_) => AdminConsentStatus::Stale,
        })
    }

    /// Whether the user accepted the consent document the deployment asks
    /// for now (as DIAL: the stored document equals the one rebuilt).
    pub async fn user_accepted(
        &self,
        user: &BucketLocation,
        deployment: &str,
        declared: &[Declared],
    ) -> Result<bool, DocumentError> {
        let stored: Option<Value> = self.documents.get(&Self::user_path(user, deployment)).await?;
        Ok(stored.is_some_and(|stored| stored == user_document(deployment, declared)))
    }

    pub async fn accept(&self, user: &BucketLocation, deployment: &str, consent: &Value) -> Result<(), DocumentError> {
        let consent = consent.clone();
        self.documents
            .update(&Self::user_path(user, deployment), |stored: &mut Option<Value>| {
                *stored = Some(consent.clone());
                Ok::<_, DocumentError>(crate::documents::Update::Changed(()))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependencies::Target;

    fn record(link: &str, path: &str, access: &[&str], required: bool) -> Declared {
        Declared {
            link_id: link.into(),
            target: Target { path: path.into() },
            access: access.iter().map(|a| a.to_string()).collect(),
            required,
        }
    }

    #[test]
    fn consent_goes_stale_on_any_declaration_change_but_not_on_order() {
        let declared = vec![
            record("a", "files/{current-user}/x/", &["READ", "WRITE"], true),
            record("b", "prompts/P/y", &["READ"], false),
        ];
        let granted = AdminConsent { consent: snapshot(&declared), granted_by: "root".into(), granted_at: 1 };
        assert!(is_live(&granted, &declared));
        let reordered = vec![
            record("b", "prompts/P/y", &["READ"], false),
            record("a", "files/{current-user}/x/", &["WRITE", "READ"], true),
        ];
        assert!(is_live(&granted, &reordered), "order-insensitive");
        for changed in [
            vec![declared[0].clone()],
            vec![declared[0].clone(), record("b", "prompts/P/z", &["READ"], false)],
            vec![declared[0].clone(), record("b", "prompts/P/y", &["READ", "WRITE"], false)],
            vec![declared[0].clone(), record("b", "prompts/P/y", &["READ"], true)],
            vec![declared[0].clone(), record("c", "prompts/P/y", &["READ"], false)],
        ] {
            assert!(!is_live(&granted, &changed), "{changed:?}");
        }
    }
}
