//! The one access check: may this caller read or write this resource?
//!
//! Every route (v1, v2, sharing, publication) asks [`AccessService::check`]
//! with the parsed URL and its decoded bucket location; the rule chain lives
//! here and nowhere else. Today: own bucket → read + write; admin → read +
//! write on `public`. Sharing grants, public-folder rules, review copies and
//! per-request keys extend [`AccessService::permissions`], never the routes.

use crate::auth::Caller;
use crate::buckets::BucketLocation;
use crate::resource_url::ResourceUrl;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Read,
    Write,
}

/// What the caller may do with one resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Permissions {
    pub read: bool,
    pub write: bool,
}

impl Permissions {
    pub const ALL: Self = Self { read: true, write: true };
    pub const READ: Self = Self { read: true, write: false };

    pub fn allows(self, permission: Permission) -> bool {
        match permission {
            Permission::Read => self.read,
            Permission::Write => self.write,
        }
    }

    pub fn union(self, other: Self) -> Self {
        Self { read: self.read || other.read, write: self.write || other.write }
    }
}

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

/// The access-control component shared by every route.
#[derive(Debug, Default)]
pub struct AccessService {}

impl AccessService {
    pub fn new() -> Self {
        Self {}
    }

    /// Ok when `caller` holds `permission` on `resource`.
    pub async fn check(
        &self,
        caller: &Caller,
        resource: Resource<'_>,
        permission: Permission,
    ) -> Result<(), AccessDenied> {
        if self.permissions(caller, resource).await.allows(permission) {
            Ok(())
        } else {
            Err(AccessDenied { url: resource.url.to_string() })
        }
    }

    /// The union of every rule that grants `caller` something on `resource`.
    pub async fn permissions(&self, caller: &Caller, resource: Resource<'_>) -> Permissions {
        owner_or_admin(caller, resource.location)
    }
}

/// Own bucket → everything; admin → everything on `public`.
fn owner_or_admin(caller: &Caller, location: &BucketLocation) -> Permissions {
    if caller.bucket_location() == *location || (caller.is_admin && *location == BucketLocation::Public) {
        Permissions::ALL
    } else {
        Permissions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Identity;

    fn caller(id: &str, admin: bool) -> Caller {
        Caller { identity: Identity::User { id: id.into() }, roles: vec![], is_admin: admin }
    }

    #[test]
    fn owners_and_admins() {
        let alice = BucketLocation::User("alice".into());
        assert!(owner_or_admin(&caller("alice", false), &alice).allows(Permission::Write));
        assert!(!owner_or_admin(&caller("bob", false), &alice).allows(Permission::Read));
        assert!(!owner_or_admin(&caller("bob", true), &alice).read, "admins do not own private buckets");
        assert!(owner_or_admin(&caller("bob", true), &BucketLocation::Public).write);
        assert!(!owner_or_admin(&caller("bob", false), &BucketLocation::Public).write);
    }
}
