//! DIAL's publication flow: source → review bucket → `public`. (The rules
//! that decide who reads what under `public` are an access concern:
//! `access::public_rules`.)
//!
//! - this module: the publication record and where records are kept. Each
//!   publication is one document (`system/publication/items/<id>.json`);
//!   two index documents list an author's publications and the admins'
//!   queue of pending ones.
//! - [`workflow`]: create, withdraw, approve with undo, reject — the copying
//!   through the catalog, which reaches the v1 and v2 stores.

pub mod workflow;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::access::public_rules::Rule;
use crate::buckets::BucketLocation;
use crate::documents::{DocumentError, Documents, Update, global_path, path_for};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pending,
    Approved,
    Rejected,
    /// The author withdrew it while pending; the record is removed right
    /// after this state is written (it only shows if that removal failed).
    Withdrawn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Action {
    Add,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicationResource {
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
    pub target_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Publication {
    /// `publications/<author bucket>/<id>`.
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub target_folder: String,
    pub status: Status,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    pub resources: Vec<PublicationResource>,
    #[serde(default)]
    pub rules: Vec<Rule>,
    pub resource_types: BTreeSet<String>,
    /// The decision's comment (an admin's, to the author).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Who approved or rejected it, as consent records name admins
    /// (`project:<name>` for a key, the user id for a JWT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// When it was approved or rejected, in epoch milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<i64>,
}

/// A publication as listings show it: without its resources and rules.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicationSummary {
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub target_folder: String,
    pub status: Status,
    pub created_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    pub resource_types: BTreeSet<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<i64>,
}

impl From<&Publication> for PublicationSummary {
    fn from(p: &Publication) -> Self {
        Self {
            url: p.url.clone(),
            name: p.name.clone(),
            target_folder: p.target_folder.clone(),
            status: p.status,
            created_at: p.created_at,
            author: p.author.clone(),
            resource_types: p.resource_types.clone(),
            comment: p.comment.clone(),
            decided_by: p.decided_by.clone(),
            decided_at: p.decided_at,
        }
    }
}

/// An admin's decision on a pending publication.
#[derive(Debug, Clone)]
pub struct Decision {
    pub status: Status,
    pub comment: Option<String>,
    /// As [`Publication::decided_by`].
    pub by: String,
    pub at: i64,
}

/// The id and author bucket of a `publications/<bucket>/<id>` URL.
pub fn parse_publication_url(url: &str) -> Option<(String, String)> {
    let rest = url.trim_start_matches('/').strip_prefix("publications/")?;
    let (bucket, id) = rest.split_once('/')?;
    let valid = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
    (valid(bucket) && valid(id)).then(|| (bucket.to_string(), id.to_string()))
}

/// Where publication records live.
#[derive(Debug, Clone)]
pub struct PublicationStore {
    documents: Documents,
}

type Index = BTreeSet<String>;

impl PublicationStore {
    pub fn new(documents: Documents) -> Self {
        Self { documents }
    }

    fn item(id: &str) -> object_store::path::Path {
        global_path("publication/items", id)
    }

    fn author_index(author: &BucketLocation) -> object_store::path::Path {
        path_for("publication", author, "publications")
    }

    fn pending_index() -> object_store::path::Path {
        global_path("publication", "pending")
    }

    /// The approved and rejected ones: "who approved this into public?"
    fn decided_index() -> object_store::path::Path {
        global_path("publication", "decided")
    }

    pub async fn get(&self, id: &str) -> Result<Option<Publication>, DocumentError> {
        self.documents.get(&Self::item(id)).await
    }

    /// Records a new publication: its document, then the indexes.
    pub async fn create(
        &self,
        id: &str,
        author: &BucketLocation,
        publication: &Publication,
    ) -> Result<(), DocumentError> {
        self.documents.create(&Self::item(id), publication).await?;
        self.index(&Self::author_index(author), id, true).await?;
        self.index(&Self::pending_index(), id, true).await
    }

    /// Moves a pending publication to its final status, keeping who decided,
    /// when, and the comment; `None` when it was no longer pending (another
    /// admin decided first).
    pub async fn finalize(&self, id: &str, decision: Decision) -> Result<Option<Publication>, DocumentError> {
        let decided = self
            .documents
            .update(&Self::item(id), |publication: &mut Option<Publication>| {
                Ok::<_, DocumentError>(match publication {
                    Some(p) if p.status == Status::Pending => {
                        p.status = decision.status;
                        p.comment = decision.comment.clone();
                        p.decided_by = Some(decision.by.clone());
                        p.decided_at = Some(decision.at);
                        Update::Changed(Some(p.clone()))
                    }
                    _ => Update::Unchanged(None),
                })
            })
            .await?;
        if decided.is_some() {
            self.index(&Self::decided_index(), id, true).await?;
            self.index(&Self::pending_index(), id, false).await?;
        }
        Ok(decided)
    }

    /// Withdraws a publication: a pending one moves to `Withdrawn` by
    /// compare-and-swap first, so a decision and a withdrawal cannot both
    /// win; then the record and its index entries go. Returns the status it
    /// had, `None` when it was already gone.
    pub async fn withdraw(&self, id: &str, author: &BucketLocation) -> Result<Option<Status>, DocumentError> {
        let before = self
            .documents
            .update(&Self::item(id), |publication: &mut Option<Publication>| {
                Ok::<_, DocumentError>(match publication {
                    Some(p) if p.status == Status::Pending => {
                        p.status = Status::Withdrawn;
                        Update::Changed(Some(Status::Pending))
                    }
                    Some(p) => Update::Unchanged(Some(p.status)),
                    None => Update::Unchanged(None),
                })
            })
            .await?;
        if before.is_some() {
            self.delete(id, author).await?;
        }
        Ok(before)
    }

    /// Forgets a publication entirely.
    async fn delete(&self, id: &str, author: &BucketLocation) -> Result<(), DocumentError> {
        self.index(&Self::pending_index(), id, false).await?;
        self.index(&Self::decided_index(), id, false).await?;
        self.index(&Self::author_index(author), id, false).await?;
        self.documents.delete(&Self::item(id)).await
    }

    pub async fn by_author(&self, author: &BucketLocation) -> Result<Vec<Publication>, DocumentError> {
        self.load_all(self.documents.read::<Index>(&Self::author_index(author)).await?).await
    }

    pub async fn pending(&self) -> Result<Vec<Publication>, DocumentError> {
        self.load_all(self.documents.read::<Index>(&Self::pending_index()).await?).await
    }

    pub async fn decided(&self) -> Result<Vec<Publication>, DocumentError> {
        self.load_all(self.documents.read::<Index>(&Self::decided_index()).await?).await
    }

    async fn load_all(&self, ids: Index) -> Result<Vec<Publication>, DocumentError> {
        let mut all = Vec::new();
        for id in ids {
            if let Some(publication) = self.get(&id).await? {
                all.push(publication);
            }
        }
        Ok(all)
    }

    async fn index(&self, path: &object_store::path::Path, id: &str, present: bool) -> Result<(), DocumentError> {
        self.documents
            .update(path, |ids: &mut Index| {
                let changed = if present { ids.insert(id.to_string()) } else { ids.remove(id) };
                Ok::<_, DocumentError>(if changed { Update::Changed(()) } else { Update::Unchanged(()) })
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publication_urls() {
        assert_eq!(parse_publication_url("publications/abc/123"), Some(("abc".into(), "123".into())));
        assert_eq!(parse_publication_url("/publications/abc/123"), Some(("abc".into(), "123".into())));
        assert_eq!(parse_publication_url("publications/abc/"), None);
        assert_eq!(parse_publication_url("publications/a/b/c"), None);
        assert_eq!(parse_publication_url("prompts/abc/123"), None);
    }
}
