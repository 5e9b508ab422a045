//! Sharing: invitations, grants, and the per-type limits on both.
//!
//! State lives in two documents per bucket (see [`crate::documents`]):
//! - the owner's `shares` document: invitations by id and the grants on each
//!   resource URL (grantee location → permissions). The access check reads
//!   only this document, so accepting, revoking and deleting take effect on
//!   the next request, and every change to it is one compare-and-swap:
//!   concurrent accepts and revokes serialize there, on any instance.
//! - the grantee's `shared-with-me` document: an index for "shared with me"
//!   listings; entries whose grant is gone are dropped when read.
//!
//! Invitation ids are 24 random bytes in Base58 (unguessable); a small index
//! document per id names the owner's bucket.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::auth::Caller;
use crate::buckets::{BucketCodec, BucketLocation};
use crate::clock::now_ms;
use crate::config::{ShareLimit, SharingConfig};
use crate::documents::{DocumentError, Documents, Update, global_path, path_for};
use crate::permissions::Permissions;

const DEFAULT_TTL_HOURS: u64 = 72;
const DEFAULT_MAX_USERS: i64 = 10;

#[derive(Debug, thiserror::Error)]
pub enum SharingError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Document(#[from] DocumentError),
}

/// One resource of an invitation, or one grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedResource {
    /// Canonical resource URL, `<group>/<bucket>/<path>` (`/` at the end for a folder).
    pub url: String,
    pub permissions: BTreeSet<Access>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Access {
    Read,
    Write,
}

pub fn to_permissions(set: &BTreeSet<Access>) -> Permissions {
    Permissions { read: set.contains(&Access::Read), write: set.contains(&Access::Write) }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Invitation {
    pub id: String,
    pub resources: Vec<SharedResource>,
    pub created_at: i64,
    pub expire_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_accepted_users: Option<i64>,
    /// Bucket ids of the users who accepted.
    #[serde(default)]
    pub accepted_by: Vec<String>,
}

/// The owner's document.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct OwnerShares {
    #[serde(default)]
    invitations: BTreeMap<String, Invitation>,
    /// Resource URL → grantee bucket id → permissions.
    #[serde(default)]
    grants: BTreeMap<String, BTreeMap<String, BTreeSet<Access>>>,
}

impl OwnerShares {
    /// About what the document holds in memory, in bytes.
    pub fn estimated_bytes(&self) -> usize {
        let grants: usize = self
            .grants
            .iter()
            .map(|(url, users)| url.len() + 64 + users.keys().map(|id| id.len() + 64).sum::<usize>())
            .sum();
        grants + self.invitations.len() * 512
    }

    /// What the grantee (by bucket id) holds on `url`: the union of the
    /// grants on it and on the folders above it.
    fn granted_to(&self, grantee_id: &str, url: &str) -> Permissions {
        self.grants
            .iter()
            .filter(|(granted, _)| covers(granted, url))
            .filter_map(|(_, users)| users.get(grantee_id))
            .fold(Permissions::default(), |all, set| all.union(to_permissions(set)))
    }
}

/// The grantee's index.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SharedWithMe {
    /// Resource URL → owner bucket id.
    #[serde(default)]
    resources: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct InvitationIndex {
    owner: String,
}

/// A grant as listings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub url: String,
    pub permissions: BTreeSet<Access>,
    /// Bucket ids of the grantees (for "shared by me"); empty otherwise.
    pub users: Vec<String>,
}

/// Whether grant `granted` covers `url` (both canonical): a folder grant
/// (`…/reports/`) covers the folder and everything below it; an item grant
/// covers exactly that item. An item and a folder of the same name are
/// different resources (`reports` is not under `reports/`). A v2 resource
/// is always granted and checked by its item URL (the HTTP layer resolves
/// the listing form `…/x/` of a resource to `…/x`), and its files are
/// checked as the resource.
pub fn covers(granted: &str, url: &str) -> bool {
    if granted.ends_with('/') { url.starts_with(granted) } else { url == granted }
}

#[derive(Debug, Clone)]
pub struct SharingService {
    documents: Documents,
    buckets: BucketCodec,
    config: SharingConfig,
}

impl SharingService {
    pub fn new(documents: Documents, buckets: BucketCodec, config: SharingConfig) -> Self {
        Self { documents, buckets, config }
    }

    fn shares_path(&self, owner: &BucketLocation) -> object_store::path::Path {
        path_for("sharing", owner, "shares")
    }

    fn with_me_path(&self, grantee: &BucketLocation) -> object_store::path::Path {
        path_for("sharing", grantee, "shared-with-me")
    }

    /// The limit for resources of `resource_type` shared by `caller`.
    pub fn limit_for(&self, caller: &Caller, resource_type: &str) -> (u64, Option<i64>) {
        let builtin_users = match resource_type {
            "FILE" | "PROMPT" | "CONVERSATION" => -1,
            _ => DEFAULT_MAX_USERS,
        };
        let configured = self.config.limits.get(resource_type).copied().unwrap_or_default();
        let mut ttl = configured.invitation_ttl_hours.unwrap_or(DEFAULT_TTL_HOURS);
        let mut users = configured.max_accepted_users.unwrap_or(builtin_users);
        let by_role: Vec<ShareLimit> =
            caller.roles.iter().filter_map(|role| self.config.roles.get(role)?.get(resource_type).copied()).collect();
        if !by_role.is_empty() {
            if let Some(max_ttl) = by_role.iter().filter_map(|l| l.invitation_ttl_hours).max() {
                ttl = max_ttl;
            }
            let role_users: Vec<i64> = by_role.iter().filter_map(|l| l.max_accepted_users).collect();
            if role_users.contains(&-1) {
                users = -1;
            } else if let Some(max_users) = role_users.into_iter().max() {
                users = max_users;
            }
        }
        (ttl, (users >= 0).then_some(users))
    }

    /// Creates an invitation for resources the caller owns. `limits` holds,
    /// per resource, its (TTL hours, max accepted users); the invitation
    /// lives for the shortest TTL.
    pub async fn create_invitation(
        &self,
        owner: &BucketLocation,
        resources: Vec<(SharedResource, (u64, Option<i64>))>,
    ) -> Result<Invitation, SharingError> {
        let now = now_ms();
        let ttl_hours = resources.iter().map(|(_, (ttl, _))| *ttl).min().unwrap_or(DEFAULT_TTL_HOURS);
        let max_users = resources.iter().filter_map(|(_, (_, users))| *users).min();
        let mut random = [0u8; 24];
        rand::fill(&mut random);
        let id = bs58::encode(random).into_string();
        let invitation = Invitation {
            id: id.clone(),
            resources: resources.into_iter().map(|(resource, _)| resource).collect(),
            created_at: now,
            expire_at: now + i64::try_from(ttl_hours).unwrap_or(i64::MAX / 4_000_000) * 3_600_000,
            max_accepted_users: max_users,
            accepted_by: Vec::new(),
        };
        let index = InvitationIndex { owner: self.buckets.encode(owner) };
        self.documents.create(&global_path("invitations", &id), &index).await?;
        let stored = invitation.clone();
        self.documents
            .update(&self.shares_path(owner), |shares: &mut OwnerShares| {
                prune_expired(shares, now);
                shares.invitations.insert(id.clone(), stored.clone());
                Ok::<_, SharingError>(Update::Changed(()))
            })
            .await?;
        Ok(invitation)
    }

    /// An invitation and its owner; expired ones are not found.
    pub async fn invitation(&self, id: &str) -> Result<(BucketLocation, Invitation), SharingError> {
        let not_found = || SharingError::NotFound(format!("No invitation found for ID {id}"));
        let valid_id = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric());
        if !valid_id {
            return Err(not_found());
        }
        let index: InvitationIndex =
            self.documents.get(&global_path("invitations", id)).await?.ok_or_else(not_found)?;
        let owner = self.buckets.decode(&index.owner).map_err(|_| not_found())?;
        let shares: OwnerShares = self.documents.read(&self.shares_path(&owner)).await?;
        let invitation =
            shares.invitations.get(id).filter(|i| i.expire_at > now_ms()).cloned().ok_or_else(not_found)?;
        Ok((owner, invitation))
    }

    /// The caller's own live invitations.
    pub async fn invitations_of(&self, owner: &BucketLocation) -> Result<Vec<Invitation>, SharingError> {
        let shares: OwnerShares = self.documents.read(&self.shares_path(owner)).await?;
        let now = now_ms();
        Ok(shares.invitations.into_values().filter(|i| i.expire_at > now).collect())
    }

    pub async fn delete_invitation(&self, caller: &BucketLocation, id: &str) -> Result<(), SharingError> {
        let (owner, _) = self.invitation(id).await?;
        if owner != *caller {
            return Err(SharingError::Forbidden("You are not invitation owner".into()));
        }
        self.documents
            .update(&self.shares_path(&owner), |shares: &mut OwnerShares| {
                Ok::<_, SharingError>(match shares.invitations.remove(id) {
                    Some(_) => Update::Changed(()),
                    None => Update::Unchanged(()),
                })
            })
            .await?;
        Ok(self.documents.delete(&global_path("invitations", id)).await?)
    }

    /// Accepts an invitation: the caller gets its grants.
    pub async fn accept(&self, grantee: &BucketLocation, id: &str) -> Result<(), SharingError> {
        let (owner, invitation) = self.invitation(id).await?;
        if owner == *grantee {
            let url = invitation.resources.first().map(|r| r.url.clone()).unwrap_or_default();
            return Err(SharingError::BadRequest(format!("Resource {url} already belong to you")));
        }
        let grantee_id = self.buckets.encode(grantee);
        let now = now_ms();
        self.documents
            .update(&self.shares_path(&owner), |shares: &mut OwnerShares| {
                let Some(invitation) = shares.invitations.get(id).filter(|i| i.expire_at > now).cloned() else {
                    return Err(SharingError::NotFound(format!("No invitation found for ID {id}")));
                };
                for resource in &invitation.resources {
                    let users = shares.grants.get(&resource.url);
                    let already = users.is_some_and(|u| u.contains_key(&grantee_id));
                    let count = users.map_or(0, BTreeMap::len) as i64;
                    if let Some(max) = invitation.max_accepted_users
                        && !already
                        && count >= max
                    {
                        return Err(SharingError::BadRequest(format!(
                            "Limit is exceeded on the number of accepted users for the resource: {}",
                            resource.url
                        )));
                    }
                }
                for resource in &invitation.resources {
                    let granted = shares.grants.entry(resource.url.clone()).or_default();
                    granted.entry(grantee_id.clone()).or_default().extend(resource.permissions.iter().copied());
                }
                let stored = shares.invitations.get_mut(id).expect("checked above");
                if !stored.accepted_by.contains(&grantee_id) {
                    stored.accepted_by.push(grantee_id.clone());
                }
                Ok(Update::Changed(()))
            })
            .await?;
        let owner_id = self.buckets.encode(&owner);
        self.documents
            .update(&self.with_me_path(grantee), |index: &mut SharedWithMe| {
                for resource in &invitation.resources {
                    index.resources.insert(resource.url.clone(), owner_id.clone());
                }
                Ok::<_, SharingError>(Update::Changed(()))
            })
            .await
    }

    /// What `grantee` was granted on `url` (or a folder above it) by the
    /// owner of `owner`'s bucket.
    pub async fn granted(
        &self,
        owner: &BucketLocation,
        grantee: &BucketLocation,
        url: &str,
    ) -> Result<Permissions, SharingError> {
        Ok(self.granted_in(&self.owner_shares(owner).await?, grantee, url))
    }

    /// [`SharingService::granted`] on shares already read.
    pub fn granted_in(&self, shares: &OwnerShares, grantee: &BucketLocation, url: &str) -> Permissions {
        shares.granted_to(&self.buckets.encode(grantee), url)
    }

    /// The owner's shares as they are now (for several checks on one read).
    pub async fn owner_shares(&self, owner: &BucketLocation) -> Result<OwnerShares, SharingError> {
        Ok(self.documents.read(&self.shares_path(owner)).await?)
    }

    /// Resources shared with `grantee` that are still shared.
    pub async fn shared_with(&self, grantee: &BucketLocation) -> Result<Vec<Grant>, SharingError> {
        let index: SharedWithMe = self.documents.read(&self.with_me_path(grantee)).await?;
        let grantee_id = self.buckets.encode(grantee);
        let mut by_owner: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (url, owner) in index.resources {
            by_owner.entry(owner).or_default().push(url);
        }
        let mut grants = Vec::new();
        for (owner_id, urls) in by_owner {
            let Ok(owner) = self.buckets.decode(&owner_id) else { continue };
            let shares: OwnerShares = self.documents.read(&self.shares_path(&owner)).await?;
            for url in urls {
                if let Some(permissions) = shares.grants.get(&url).and_then(|users| users.get(&grantee_id)) {
                    grants.push(Grant { url, permissions: permissions.clone(), users: Vec::new() });
                }
            }
        }
        Ok(grants)
    }

    /// Resources `owner` shares, with their grantees.
    pub async fn shared_by(&self, owner: &BucketLocation) -> Result<Vec<Grant>, SharingError> {
        let shares: OwnerShares = self.documents.read(&self.shares_path(owner)).await?;
        Ok(shares
            .grants
            .into_iter()
            .filter(|(_, users)| !users.is_empty())
            .map(|(url, users)| Grant {
                url,
                permissions: users.values().flatten().copied().collect(),
                users: users.into_keys().collect(),
            })
            .collect())
    }

    /// The grantee gives up shared resources.
    pub async fn discard(
        &self,
        grantee: &BucketLocation,
        resources: &[(BucketLocation, String)],
    ) -> Result<(), SharingError> {
        let grantee_id = self.buckets.encode(grantee);
        for (owner, url) in resources {
            self.documents
                .update(&self.shares_path(owner), |shares: &mut OwnerShares| {
                    let removed = shares.grants.get_mut(url).and_then(|users| users.remove(&grantee_id)).is_some();
                    shares.grants.retain(|_, users| !users.is_empty());
                    Ok::<_, SharingError>(if removed { Update::Changed(()) } else { Update::Unchanged(()) })
                })
                .await?;
        }
        self.documents
            .update(&self.with_me_path(grantee), |index: &mut SharedWithMe| {
                for (_, url) in resources {
                    index.resources.remove(url);
                }
                Ok::<_, SharingError>(Update::Changed(()))
            })
            .await
    }

    /// The owner takes back grants — the given permissions, or all of them —
    /// and invitations stop offering what was taken back (as DIAL does), so
    /// accepting a link again cannot restore it: an invitation keeps only
    /// the permissions and resources left, and one left with nothing is
    /// removed.
    pub async fn revoke(
        &self,
        owner: &BucketLocation,
        resources: &[(String, Option<BTreeSet<Access>>)],
    ) -> Result<(), SharingError> {
        let emptied = self
            .documents
            .update(&self.shares_path(owner), |shares: &mut OwnerShares| {
                for (url, permissions) in resources {
                    let keep = |set: &mut BTreeSet<Access>| match permissions {
                        None => set.clear(),
                        Some(taken) => set.retain(|p| !taken.contains(p)),
                    };
                    if let Some(users) = shares.grants.get_mut(url) {
                        users.values_mut().for_each(keep);
                        users.retain(|_, set| !set.is_empty());
                    }
                    for invitation in shares.invitations.values_mut() {
                        for resource in invitation.resources.iter_mut().filter(|r| &r.url == url) {
                            keep(&mut resource.permissions);
                        }
                        invitation.resources.retain(|r| !r.permissions.is_empty());
                    }
                }
                shares.grants.retain(|_, users| !users.is_empty());
                Ok::<_, SharingError>(Update::Changed(take_emptied(shares)))
            })
            .await?;
        self.delete_indexes(emptied).await
    }

    async fn delete_indexes(&self, invitations: Vec<String>) -> Result<(), SharingError> {
        for id in invitations {
            self.documents.delete(&global_path("invitations", &id)).await?;
        }
        Ok(())
    }

    /// Gives everyone who holds a grant on `source` the same on `destination`.
    pub async fn copy(&self, owner: &BucketLocation, source: &str, destination: &str) -> Result<(), SharingError> {
        let owner_id = self.buckets.encode(owner);
        let copied = self
            .documents
            .update(&self.shares_path(owner), |shares: &mut OwnerShares| {
                let Some(users) = shares.grants.get(source).cloned() else {
                    return Ok::<_, SharingError>(Update::Unchanged(Vec::new()));
                };
                let target = shares.grants.entry(destination.to_string()).or_default();
                for (user, set) in &users {
                    target.entry(user.clone()).or_default().extend(set.iter().copied());
                }
                Ok(Update::Changed(users.into_keys().collect::<Vec<_>>()))
            })
            .await?;
        for user in copied {
            let Ok(grantee) = self.buckets.decode(&user) else { continue };
            self.documents
                .update(&self.with_me_path(&grantee), |index: &mut SharedWithMe| {
                    index.resources.insert(destination.to_string(), owner_id.clone());
                    Ok::<_, SharingError>(Update::Changed(()))
                })
                .await?;
        }
        Ok(())
    }

    /// A resource was deleted: its grants go, and invitations stop offering
    /// it (an invitation left with nothing is removed). Re-creating the
    /// resource does not bring any of this back.
    pub async fn forget(&self, owner: &BucketLocation, url: &str) -> Result<(), SharingError> {
        // Exactly this resource: deleting item `reports` leaves grants on
        // folder `reports/` alone, and the other way round.
        let same = |granted: &str| granted == url;
        let emptied = self
            .documents
            .update(&self.shares_path(owner), |shares: &mut OwnerShares| {
                let before = (shares.grants.len(), shares_size(shares));
                shares.grants.retain(|granted, _| !same(granted));
                for invitation in shares.invitations.values_mut() {
                    invitation.resources.retain(|r| !same(&r.url));
                }
                let emptied = take_emptied(shares);
                let after = (shares.grants.len(), shares_size(shares));
                Ok::<_, SharingError>(if before == after && emptied.is_empty() {
                    Update::Unchanged(emptied)
                } else {
                    Update::Changed(emptied)
                })
            })
            .await?;
        self.delete_indexes(emptied).await
    }
}

/// Removes the invitations left without resources; their ids, whose index
/// documents go next.
fn take_emptied(shares: &mut OwnerShares) -> Vec<String> {
    let emptied: Vec<String> =
        shares.invitations.iter().filter(|(_, i)| i.resources.is_empty()).map(|(id, _)| id.clone()).collect();
    shares.invitations.retain(|_, i| !i.resources.is_empty());
    emptied
}

fn shares_size(shares: &OwnerShares) -> usize {
    shares.invitations.values().map(|i| i.resources.len()).sum()
}

fn prune_expired(shares: &mut OwnerShares, now: i64) {
    shares.invitations.retain(|_, invitation| invitation.expire_at > now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Identity;
    use std::sync::Arc;

    fn service(config: SharingConfig) -> SharingService {
        let store = Arc::new(object_store::memory::InMemory::new());
        SharingService::new(Documents::new(store), BucketCodec::new("s"), config)
    }

    fn read() -> BTreeSet<Access> {
        BTreeSet::from([Access::Read])
    }

    #[test]
    fn grants_cover_the_url_and_what_is_below_folders() {
        assert!(covers("skills/b/x", "skills/b/x"));
        assert!(covers("skills/b/team/", "skills/b/team/x"));
        assert!(covers("skills/b/team/", "skills/b/team/"), "a folder grant lets the folder be listed");
        assert!(covers("skills/b/team/", "skills/b/team/sub/"));
        assert!(!covers("skills/b/team", "skills/b/team/x"), "an item does not cover what is below");
        assert!(!covers("skills/b/te/", "skills/b/team/x"));
        assert!(!covers("files/b/reports/", "files/b/reports"), "a folder grant does not cover the item beside it");
        assert!(!covers("files/b/doc", "files/b/doc/"), "an item grant does not cover the folder beside it");
    }

    #[test]
    fn limits_by_type_and_role() {
        let mut config = SharingConfig::default();
        config.roles.insert(
            "power".into(),
            BTreeMap::from([(
                "SKILL".into(),
                ShareLimit { invitation_ttl_hours: Some(240), max_accepted_users: Some(50) },
            )]),
        );
        let sharing = service(config);
        let plain = Caller {
            identity: Identity::User { id: "a".into() },
            roles: vec![],
            is_admin: false,
            claims: None,
            per_request: None,
        };
        assert_eq!(sharing.limit_for(&plain, "SKILL"), (72, Some(10)));
        assert_eq!(sharing.limit_for(&plain, "FILE"), (72, None));
        let power = Caller { roles: vec!["power".into()], ..plain };
        assert_eq!(sharing.limit_for(&power, "SKILL"), (240, Some(50)));
    }

    #[tokio::test]
    async fn accept_revoke_and_the_user_limit() {
        let sharing = service(SharingConfig::default());
        let alice = BucketLocation::User("alice".into());
        let url = "skills/B/team/".to_string();
        let invitation = sharing
            .create_invitation(&alice, vec![(SharedResource { url: url.clone(), permissions: read() }, (72, Some(1)))])
            .await
            .unwrap();
        let bob = BucketLocation::User("bob".into());
        let carol = BucketLocation::User("carol".into());
        assert!(matches!(sharing.accept(&alice, &invitation.id).await, Err(SharingError::BadRequest(_))));
        sharing.accept(&bob, &invitation.id).await.unwrap();
        sharing.accept(&bob, &invitation.id).await.unwrap();
        assert!(
            matches!(sharing.accept(&carol, &invitation.id).await, Err(SharingError::BadRequest(m)) if m.contains("Limit"))
        );

        assert!(sharing.granted(&alice, &bob, "skills/B/team/pdf").await.unwrap().read);
        assert!(!sharing.granted(&alice, &carol, "skills/B/team/pdf").await.unwrap().read);
        assert_eq!(sharing.shared_with(&bob).await.unwrap().len(), 1);

        sharing.revoke(&alice, &[(url.clone(), None)]).await.unwrap();
        assert!(!sharing.granted(&alice, &bob, "skills/B/team/pdf").await.unwrap().read);
        assert!(sharing.shared_with(&bob).await.unwrap().is_empty());

        sharing.forget(&alice, &url).await.unwrap();
        assert!(matches!(sharing.invitation(&invitation.id).await, Err(SharingError::NotFound(_))));
    }
}
