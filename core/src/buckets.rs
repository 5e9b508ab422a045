//! Bucket locations and the opaque bucket ids clients see.
//!
//! A bucket id is the Base58 text of the location encrypted with AES-SIV
//! (deterministic authenticated encryption): the same location always gives
//! the same id, on every instance and across restarts, ids are alphanumeric
//! (so they match DIAL's `[a-zA-Z0-9]+` route grammar), and a forged or
//! altered id fails authentication instead of decrypting to another bucket.

use std::fmt;

use aes_siv::KeyInit;
use aes_siv::siv::Aes128Siv;
use hkdf::Hkdf;
use sha2::Sha256;

use crate::resource_url::PUBLIC_BUCKET;

/// Associated data bound into every id, so ids of this scheme can never be
/// confused with another use of the same key.
const ID_CONTEXT: &[u8] = b"dial-host bucket id v1";

/// Where a bucket lives in the object store. `Display` gives the storage
/// prefix, always ending in `/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BucketLocation {
    /// A JWT user: `Users/<sub>/`.
    User(String),
    /// A project API key, or an application's own bucket: `Keys/<name>/`.
    Key(String),
    /// The shared `public/` bucket.
    Public,
    /// A review bucket: copies awaiting a publication decision,
    /// `<owner location>publications/<publication id>/`.
    Review { owner: Box<BucketLocation>, publication: String },
}

impl fmt::Display for BucketLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::User(sub) => write!(f, "Users/{sub}/"),
            Self::Key(name) => write!(f, "Keys/{name}/"),
            Self::Public => write!(f, "{PUBLIC_BUCKET}/"),
            Self::Review { owner, publication } => write!(f, "{owner}{REVIEW_DIR}/{publication}/"),
        }
    }
}

impl BucketLocation {
    /// The review bucket of `publication`, owned by this location.
    pub fn review(&self, publication: &str) -> Self {
        Self::Review { owner: Box::new(self.clone()), publication: publication.into() }
    }

    fn parse(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.strip_suffix('/')?.split('/').collect();
        if let [kind @ ("Users" | "Keys"), name, REVIEW_DIR, publication] = parts.as_slice() {
            let owner = Self::parse(&format!("{kind}/{name}/"))?;
            return (!publication.is_empty()).then(|| owner.review(publication));
        }
        let inner = |prefix: &str| {
            let rest = text.strip_prefix(prefix)?.strip_suffix('/')?;
            (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_string())
        };
        if text == "public/" {
            return Some(Self::Public);
        }
        inner("Users/").map(Self::User).or_else(|| inner("Keys/").map(Self::Key))
    }
}

/// The directory of a user's bucket holding its review buckets (DIAL's name).
const REVIEW_DIR: &str = "publications";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid bucket: {0}")]
pub struct InvalidBucket(pub String);

/// Turns locations into bucket ids and back.
#[derive(Clone)]
pub struct BucketCodec {
    key: [u8; 32],
}

impl fmt::Debug for BucketCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BucketCodec { key: <redacted> }")
    }
}

impl BucketCodec {
    /// Derives the AES-SIV key from the configured secret (HKDF-SHA256).
    pub fn new(secret: &str) -> Self {
        let mut key = [0u8; 32];
        Hkdf::<Sha256>::new(Some(ID_CONTEXT), secret.as_bytes())
            .expand(b"aes-siv-cmac-128", &mut key)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Self { key }
    }

    fn cipher(&self) -> Aes128Siv {
        Aes128Siv::new_from_slice(&self.key).expect("AES-128-SIV takes a 32-byte key")
    }

    /// The id of a location; `public` for the public bucket.
    pub fn encode(&self, location: &BucketLocation) -> String {
        if *location == BucketLocation::Public {
            return PUBLIC_BUCKET.into();
        }
        let sealed = self
            .cipher()
            .encrypt([ID_CONTEXT], location.to_string().as_bytes())
            .expect("SIV encryption of a short plaintext cannot fail");
        bs58::encode(sealed).into_string()
    }

    /// The location of an id, or [`InvalidBucket`] for anything this codec
    /// did not produce.
    pub fn decode(&self, id: &str) -> Result<BucketLocation, InvalidBucket> {
        if id == PUBLIC_BUCKET {
            return Ok(BucketLocation::Public);
        }
        let invalid = || InvalidBucket(id.into());
        let sealed = bs58::decode(id).into_vec().map_err(|_| invalid())?;
        let plain = self.cipher().decrypt([ID_CONTEXT], &sealed).map_err(|_| invalid())?;
        let text = String::from_utf8(plain).map_err(|_| invalid())?;
        BucketLocation::parse(&text).ok_or_else(invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_deterministic() {
        let codec = BucketCodec::new("secret");
        for location in [
            BucketLocation::User("alice".into()),
            BucketLocation::User("user@example.com".into()),
            BucketLocation::Key("project-x".into()),
            BucketLocation::Public,
            BucketLocation::User("alice".into()).review("0a1b2c"),
        ] {
            let id = codec.encode(&location);
            assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
            assert_eq!(id, BucketCodec::new("secret").encode(&location), "stable across instances");
            assert_eq!(codec.decode(&id).unwrap(), location);
        }
        assert_eq!(codec.encode(&BucketLocation::Public), "public");
    }

    #[test]
    fn distinct_locations_get_distinct_ids() {
        let codec = BucketCodec::new("secret");
        let a = codec.encode(&BucketLocation::User("a".into()));
        let b = codec.encode(&BucketLocation::Key("a".into()));
        assert_ne!(a, b);
    }

    #[test]
    fn forged_and_tampered_ids_are_rejected() {
        let codec = BucketCodec::new("secret");
        let id = codec.encode(&BucketLocation::User("alice".into()));
        let other = BucketCodec::new("another secret");
        assert_eq!(other.decode(&id), Err(InvalidBucket(id.clone())));

        let mut chars: Vec<char> = id.chars().collect();
        let last = chars.len() - 1;
        chars[last] = if chars[last] == '2' { '3' } else { '2' };
        let tampered: String = chars.into_iter().collect();
        assert!(codec.decode(&tampered).is_err());

        for junk in ["", "0OIl", "abc", "1111111111111111111111111111111111"] {
            assert!(codec.decode(junk).is_err(), "{junk}");
        }
    }
}
