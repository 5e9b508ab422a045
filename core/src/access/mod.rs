//! The one access check: may this caller read or write this resource?
//!
//! Every route (v1, v2, sharing, publication) asks [`AccessService::check`]
//! with the parsed URL and its decoded bucket location; the rule chain lives
//! here and nowhere else. Permissions are the union of (SPEC §6):
//! - own bucket → read + write;
//! - admin → read + write on `public` and on every review bucket;
//! - own review copies → read;
//! - shared with the caller (a grant on the URL or a folder above it) → as granted;
//! - `public` → read when the rules of every ancestor folder admit the caller.
//!
//! Per-request keys add their rules in [`AccessService::permissions`] (their
//! application's appdata folder, their grants, and a stored application's
//! own definition, READ — the last two only as far as the originating user
//! could go); routes never change.

pub mod public_rules;

use std::collections::HashMap;

use crate::access::public_rules::{PublicRules, RulesDocument, admits_with};
use crate::auth::Caller;
use crate::buckets::BucketLocation;
use crate::documents::DocumentError;
use crate::keys::KeyData;
pub use crate::permissions::{Permission, Permissions};
use crate::resource_url::ResourceUrl;
use crate::sharing::{OwnerShares, SharingError, SharingService, covers};

/// A resource (or folder) an access decision is about.
#[derive(Debug, Clone, Copy)]
pub struct Resource<'a> {
    /// The URL as parsed by the one URL parser (folder URLs end in `/`).
    pub url: &'a ResourceUrl,
    /// The decoded bucket of `url`.
    pub location: &'a BucketLocation,
}

/// The caller lacks the permission; rendered as DIAL's 403
/// "You don't have an access to: <url>".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("You don't have an access to: {url}")]
pub struct AccessDenied {
    pub url: String,
}

/// Why an access decision could not be made (the state it reads failed).
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(transparent)]
    Denied(#[from] AccessDenied),
    #[error("access state unavailable: {0}")]
    Unavailable(String),
}

impl From<DocumentError> for AccessError {
    fn from(error: DocumentError) -> Self {
        Self::Unavailable(error.to_string())
    }
}

impl From<SharingError> for AccessError {
    fn from(error: SharingError) -> Self {
        Self::Unavailable(error.to_string())
    }
}

/// A decision only an admin takes: the one list of them, so no route
/// decides "admin" on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminDecision {
    /// Approve or reject a publication, read any publication, list the
    /// pending queue.
    Publications,
    /// Grant or withdraw an application's admin consent.
    AdminConsent,
    /// Operate the host: reload handlers, read the handler inventory.
    HostOperations,
    /// Restore the latest version of a deleted resource in a bucket the
    /// caller cannot write (SPEC §4: the owner or an admin).
    RestoreDeleted,
    /// Declare `resource_dependencies` in an application definition (others
    /// only where `access.allow_user_resource_dependencies` says so).
    DeclareDependencies,
}

/// The access-control component shared by every route.
#[derive(Debug, Clone)]
pub struct AccessService {
    sharing: SharingService,
    rules: PublicRules,
}

impl AccessService {
    pub fn new(sharing: SharingService, rules: PublicRules) -> Self {
        Self { sharing, rules }
    }

    pub fn sharing(&self) -> &SharingService {
        &self.sharing
    }

    pub fn rules(&self) -> &PublicRules {
        &self.rules
    }

    /// Ok when `caller` holds `permission` on `resource`.
    pub async fn check(
        &self,
        caller: &Caller,
        resource: Resource<'_>,
        permission: Permission,
    ) -> Result<(), AccessError> {
        if self.permissions(caller, resource).await?.allows(permission) {
            Ok(())
        } else {
            Err(AccessDenied { url: resource.url.to_string() }.into())
        }
    }

    /// The caller's permissions on `resource` as DIAL's `permissions`
    /// field shows them (`?permissions=true` on metadata requests), as one
    /// of the checks of one answer (see [`AccessService::permissions_within`]).
    pub async fn permission_names(
        &self,
        caller: &Caller,
        resource: Resource<'_>,
        state: &mut StateRead,
    ) -> Result<Vec<String>, AccessError> {
        let permissions = self.permissions_within(caller, resource, state).await?;
        Ok(permissions.names().into_iter().map(str::to_string).collect())
    }

    /// Whether `caller` may take `decision`: admins only, never a
    /// per-request key (a key's caller is never an admin).
    pub fn may_decide(&self, caller: &Caller, _decision: AdminDecision) -> bool {
        caller.is_admin
    }

    /// Whether `caller` sees `url` in `public` (admins see all of it,
    /// others what the rules of every ancestor folder admit): what a
    /// publication may target, and whose rules a caller may read.
    pub async fn sees_public(&self, caller: &Caller, url: &ResourceUrl) -> Result<bool, AccessError> {
        Ok(caller.is_admin || self.rules.admits(caller, url).await?)
    }

    /// What a listing of `location` may show `caller`: in `public`, a
    /// non-admin sees only what the folder rules admit.
    pub async fn listing_filter(
        &self,
        caller: &Caller,
        location: &BucketLocation,
    ) -> Result<ListingFilter, AccessError> {
        let rules = match location {
            BucketLocation::Public if !caller.is_admin => Some(self.rules.all().await?),
            _ => None,
        };
        Ok(ListingFilter { rules })
    }

    /// The union of every rule that grants `caller` something on `resource`.
    /// Cheap rules first; state is read only when they do not already grant
    /// everything.
    pub async fn permissions(&self, caller: &Caller, resource: Resource<'_>) -> Result<Permissions, AccessError> {
        self.permissions_within(caller, resource, &mut StateRead::default()).await
    }

    /// [`AccessService::permissions`] for one of several checks that make up
    /// one decision (a dependency resolution checks up to 100 targets): the
    /// state they read — the public rules, each owner's shares — is read at
    /// most once per `state`.
    pub async fn permissions_within(
        &self,
        caller: &Caller,
        resource: Resource<'_>,
        state: &mut StateRead,
    ) -> Result<Permissions, AccessError> {
        let mut granted = owner_or_admin(caller, resource.location);
        if let Some(key) = &caller.per_request {
            granted = granted.union(appdata_permissions(key, resource));
        }
        if granted == Permissions::ALL {
            return Ok(granted);
        }
        // What the user behind the call holds here through others: shares
        // and the public rules as they see them (a key carries their roles).
        let mut reached = Permissions::default();
        match resource.location {
            // Every ancestor folder's rules must admit the caller: access
            // under `public/` is not monotonic, a folder readable does not
            // make what is below it readable.
            BucketLocation::Public => {
                let rules = match state.rules.take() {
                    Some(rules) => rules,
                    None => self.rules.all().await?,
                };
                if admits_with(&rules, caller, resource.url) {
                    reached = Permissions::READ;
                }
                state.rules = Some(rules);
            }
            // Shared with the user behind the call — for a key, the
            // originating user, whose own bucket it never reaches this way
            // (nobody shares with themselves).
            BucketLocation::User(_) | BucketLocation::Key(_) => {
                let shares = match state.shares.remove(resource.location) {
                    Some(shares) => {
                        state.shares_bytes -= shares.estimated_bytes();
                        shares
                    }
                    None => self.sharing.owner_shares(resource.location).await?,
                };
                let url = resource.url.to_string();
                reached = self.sharing.granted_in(&shares, &caller.user_location(), &url);
                // The documents a decision keeps are bounded in bytes: past
                // the bound, another owner's is read each time it is needed.
                let bytes = shares.estimated_bytes();
                if state.shares_bytes + bytes <= KEPT_SHARES_BYTES {
                    state.shares_bytes += bytes;
                    state.shares.insert(resource.location.clone(), shares);
                }
            }
            BucketLocation::Review { .. } => {}
        }
        granted = granted.union(reached);
        // A key's grants (attachments, dependencies) never reach more than
        // its originating user may do here at this moment: a grant on a
        // folder covers what is below it only where the user's own bucket,
        // their shares or the public rules for every ancestor admit them.
        if let Some(key) = &caller.per_request {
            let user = owner_or_admin(&Caller::originating_user(key), resource.location).union(reached);
            granted = granted.union(grant_permissions(key, resource).intersection(user));
        }
        Ok(granted)
    }
}

/// What the owners' sharing documents one [`StateRead`] keeps may hold.
const KEPT_SHARES_BYTES: usize = 16 << 20;

/// The access state one decision has read so far (see
/// [`AccessService::permissions_within`]). Short-lived by design: a new
/// decision starts from a fresh one, so a revoke counts on the next request.
#[derive(Debug, Default)]
pub struct StateRead {
    rules: Option<RulesDocument>,
    shares: HashMap<BucketLocation, OwnerShares>,
    /// Their estimated bytes, within [`KEPT_SHARES_BYTES`].
    shares_bytes: usize,
}

/// Hides the items of a public listing the caller may not read (one rules
/// read per listing).
#[derive(Debug)]
pub struct ListingFilter {
    rules: Option<RulesDocument>,
}

impl ListingFilter {
    pub fn shows(&self, caller: &Caller, url: &ResourceUrl) -> bool {
        self.rules.as_ref().is_none_or(|rules| admits_with(rules, caller, url))
    }
}

/// What a per-request key holds in its own right (SPEC §6): its
/// application's appdata folder in the originating user's bucket (any group)
/// → read + write. Its own bucket is the caller's bucket, handled as any
/// owner's.
fn appdata_permissions(key: &KeyData, resource: Resource<'_>) -> Permissions {
    let in_appdata =
        matches!(resource.url.segments(), [first, second, ..] if first == APPDATA_FOLDER && *second == key.app_id);
    if in_appdata && *resource.location == key.user_bucket() { Permissions::ALL } else { Permissions::default() }
}

/// The grants of a key (request attachments, dependencies, an answer's
/// attachments, what its caller passed on) that cover `resource`, before
/// they are bounded by the originating user's reach.
fn grant_permissions(key: &KeyData, resource: Resource<'_>) -> Permissions {
    let url = resource.url.to_string();
    let granted = key
        .grants
        .iter()
        .chain(&key.received)
        .filter(|grant| covers(&grant.url, &url))
        .fold(Permissions::default(), |held, grant| held.union(Permissions { read: grant.read, write: grant.write }));
    granted.union(own_definition(key, resource))
}

/// DIAL Core's "app self" rule: a stored application reads its own
/// definition with its key (aidial-sdk asks the host for its
/// `application_properties` that way), as far as its user could.
fn own_definition(key: &KeyData, resource: Resource<'_>) -> Permissions {
    let url = resource.url;
    let is_own = !url.is_folder()
        && url.group() == "applications"
        && key.app.strip_prefix("applications/").and_then(|rest| rest.strip_prefix(url.bucket())).is_some_and(|path| {
            path.strip_prefix('/').is_some_and(|path| path.split('/').eq(url.segments().iter().map(String::as_str)))
        });
    if is_own { Permissions::READ } else { Permissions::default() }
}

/// The folder holding each application's data in a user's bucket.
pub const APPDATA_FOLDER: &str = "appdata";

/// Own bucket → everything; admin → everything on `public` and review
/// buckets; the owner of a review bucket → read.
fn owner_or_admin(caller: &Caller, location: &BucketLocation) -> Permissions {
    let own = caller.bucket_location();
    match location {
        _ if *location == own => Permissions::ALL,
        BucketLocation::Public | BucketLocation::Review { .. } if caller.is_admin => Permissions::ALL,
        BucketLocation::Review { owner, .. } if **owner == own => Permissions::READ,
        _ => Permissions::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Identity;

    fn caller(id: &str, admin: bool) -> Caller {
        Caller {
            identity: Identity::User { id: id.into() },
            roles: vec![],
            is_admin: admin,
            claims: None,
            per_request: None,
        }
    }

    #[test]
    fn a_per_request_key_reaches_its_app_bucket_appdata_and_grants_only() {
        use crate::keys::{KeyData, KeyGrant, Originator};
        use crate::resource_url::{Intent, ResourceUrl};
        let key = KeyData {
            id: Default::default(),
            user: Originator { identity: Identity::User { id: "alice".into() }, roles: vec![], claims: None },
            app: "echo".into(),
            app_id: "echo".into(),
            execution_path: vec![],
            trace_id: String::new(),
            grants: vec![
                KeyGrant { url: "files/ALICE/doc.txt".into(), read: true, write: false },
                KeyGrant { url: "files/ALICE/shared/".into(), read: true, write: false },
                KeyGrant { url: "files/BOB/".into(), read: true, write: true },
            ],
            received: vec![KeyGrant { url: "files/ALICE/passed.txt".into(), read: true, write: false }],
            passed_on: vec![],
            expires_at: i64::MAX,
            changes_taken: 0,
        };
        let alice = BucketLocation::User("alice".into());
        let caller = Caller::for_key(std::sync::Arc::new(key));
        assert!(!caller.is_admin);
        assert_eq!(caller.bucket_location(), BucketLocation::Key("echo".into()));
        assert_eq!(caller.user_location(), alice);
        let on = |raw: &str, location: &BucketLocation| {
            let url = ResourceUrl::parse(raw, Intent::Read).unwrap();
            let key = caller.per_request.as_ref().unwrap();
            let resource = Resource { url: &url, location };
            let user = owner_or_admin(&Caller::originating_user(key), location);
            owner_or_admin(&caller, location)
                .union(appdata_permissions(key, resource))
                .union(grant_permissions(key, resource).intersection(user))
        };
        assert_eq!(on("files/ALICE/appdata/echo/note.txt", &alice), Permissions::ALL);
        assert_eq!(on("prompts/ALICE/appdata/echo/", &alice), Permissions::ALL, "any group");
        assert_eq!(on("files/ALICE/appdata/other/note.txt", &alice), Permissions::default(), "another app's");
        assert_eq!(on("files/ALICE/private.txt", &alice), Permissions::default(), "never the user's own bucket");
        assert_eq!(on("files/ALICE/doc.txt", &alice), Permissions::READ);
        assert_eq!(on("files/ALICE/passed.txt", &alice), Permissions::READ, "passed on by the caller");
        assert_eq!(on("files/ALICE/shared/deep/x.txt", &alice), Permissions::READ);
        assert_eq!(on("files/ECHO/anything", &BucketLocation::Key("echo".into())), Permissions::ALL);
        let bob = BucketLocation::User("bob".into());
        assert_eq!(on("files/BOB/appdata/echo/x", &bob), Permissions::default(), "appdata is the user's only");
        assert_eq!(
            on("files/BOB/report.txt", &bob),
            Permissions::default(),
            "a grant never reaches more than the user does (bob shared nothing with alice)"
        );
        assert_eq!(on("files/public/x", &BucketLocation::Public), Permissions::default(), "no admin rights");
    }

    #[test]
    fn a_stored_application_reads_its_own_definition_as_far_as_its_user_could() {
        use crate::keys::{KeyData, Originator};
        use crate::resource_url::{Intent, ResourceUrl};
        let key = KeyData {
            id: Default::default(),
            user: Originator { identity: Identity::User { id: "alice".into() }, roles: vec![], claims: None },
            app: "applications/ALICE/team/my app".into(),
            app_id: "my app-0123456789ab".into(),
            execution_path: vec![],
            trace_id: String::new(),
            grants: vec![],
            received: vec![],
            passed_on: vec![],
            expires_at: i64::MAX,
            changes_taken: 0,
        };
        let alice = BucketLocation::User("alice".into());
        let on = |raw: &str| {
            let url = ResourceUrl::parse(raw, Intent::Read).unwrap();
            grant_permissions(&key, Resource { url: &url, location: &alice })
        };
        assert_eq!(on("applications/ALICE/team/my%20app"), Permissions::READ);
        assert_eq!(on("applications/ALICE/team/other"), Permissions::default());
        assert_eq!(on("applications/ALICE/team/"), Permissions::default());
        assert_eq!(on("files/ALICE/team/my%20app"), Permissions::default());
    }

    #[test]
    fn owners_and_admins() {
        let alice = BucketLocation::User("alice".into());
        assert!(owner_or_admin(&caller("alice", false), &alice).allows(Permission::Write));
        assert!(!owner_or_admin(&caller("bob", false), &alice).allows(Permission::Read));
        assert!(!owner_or_admin(&caller("bob", true), &alice).read, "admins do not own private buckets");
        assert!(owner_or_admin(&caller("bob", true), &BucketLocation::Public).write);
        assert!(!owner_or_admin(&caller("bob", false), &BucketLocation::Public).write);

        let review = alice.review("p1");
        assert_eq!(
            owner_or_admin(&caller("alice", false), &review),
            Permissions::READ,
            "authors read their review copies"
        );
        assert_eq!(owner_or_admin(&caller("bob", true), &review), Permissions::ALL);
        assert_eq!(owner_or_admin(&caller("bob", false), &review), Permissions::default());
    }
}
