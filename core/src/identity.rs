//! Who a call is for: a JWT user or a project key. A value type shared by
//! authentication (`auth`), per-request keys (`keys`) and the documents that
//! record people (consent, sharing).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Identity {
    /// A JWT user, by the configured user-id claim.
    User { id: String },
    /// A project API key.
    Project { name: String },
}
