//! What a caller may do with one resource: read, write, or both. The value
//! every access decision, grant and share is expressed in.

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

    pub fn intersection(self, other: Self) -> Self {
        Self { read: self.read && other.read, write: self.write && other.write }
    }

    /// DIAL's `permissions` array: `["READ", "WRITE"]`, `["READ"]`, ….
    pub fn names(self) -> Vec<&'static str> {
        [(self.read, "READ"), (self.write, "WRITE")].into_iter().filter(|(held, _)| *held).map(|(_, n)| n).collect()
    }
}
