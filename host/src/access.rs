//! The one access check: may this caller read or write in this bucket?
//!
//! For now: a caller owns its own bucket (read + write), and an admin may
//! read and write the `public` bucket. Sharing, publication rules and
//! per-request keys extend this function, never the routes.

use crate::auth::Caller;
use crate::buckets::BucketLocation;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Read,
    Write,
}

/// Whether `caller` holds `permission` on resources in `location`.
pub fn allows(caller: &Caller, location: &BucketLocation, _permission: Permission) -> bool {
    if caller.bucket_location() == *location {
        return true;
    }
    caller.is_admin && *location == BucketLocation::Public
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
        assert!(allows(&caller("alice", false), &alice, Permission::Write));
        assert!(!allows(&caller("bob", false), &alice, Permission::Read));
        assert!(!allows(&caller("bob", true), &alice, Permission::Read), "admins do not own private buckets");
        assert!(allows(&caller("bob", true), &BucketLocation::Public, Permission::Write));
        assert!(!allows(&caller("bob", false), &BucketLocation::Public, Permission::Write));
    }
}
