//! Compiled components on disk, so a restart does not recompile.
//!
//! A compiled artifact is native code that wasmtime maps and runs without
//! checking it, so the cache must never load a file the host did not write.
//! Every entry is authenticated: `<dir>/<engine>/<sha256>.cwasm` holds an
//! HMAC-SHA256 tag, then the artifact. The key is derived from the host's
//! secret (`encryption.secret`), which never lives in the cache directory;
//! the tag covers the engine fingerprint, the source's SHA-256 and the
//! artifact, so an entry can neither be forged nor moved to another name.
//! The tag is checked before anything is deserialized; a damaged, foreign or
//! unauthenticated entry is a miss: recompiled, rewritten, and warned about.
//!
//! `<engine>` fingerprints the wasmtime version and engine settings
//! (`Engine::precompile_compatibility_hash`): an artifact is only ever loaded
//! by an engine that could have produced it. Writes go to a temporary file
//! and are renamed into place, so a reader never sees a half-written file.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use hkdf::Hkdf;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use wasmtime::Engine;
use wasmtime::component::Component;

/// Bytes of the tag in front of each artifact.
const TAG_BYTES: usize = 32;
/// HKDF label of the cache key (distinct from every other use of the secret).
const KEY_CONTEXT: &[u8] = b"dial-host handler cache v1";

/// Where compiled components are kept, and the key that authenticates them.
#[derive(Clone)]
pub struct CacheConfig {
    pub dir: PathBuf,
    key: [u8; 32],
}

impl CacheConfig {
    /// The cache in `dir`, keyed by the host's secret.
    pub fn new(dir: PathBuf, secret: &str) -> Self {
        let mut key = [0u8; 32];
        Hkdf::<Sha256>::new(Some(KEY_CONTEXT), secret.as_bytes())
            .expand(b"hmac-sha256", &mut key)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Self { dir, key }
    }
}

impl std::fmt::Debug for CacheConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheConfig").field("dir", &self.dir).field("key", &"<redacted>").finish()
    }
}

#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    engine_id: String,
    key: [u8; 32],
}

impl ComponentCache {
    pub fn new(config: CacheConfig, engine: &Engine) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_id = format!("{:016x}", hasher.finish());
        Self { dir: config.dir.join(&engine_id), engine_id, key: config.key }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiled component for `wasm` (whose SHA-256 is `sha256`),
    /// loaded from the cache if its entry is authentic (`true`: a cache
    /// hit), else compiled and stored (`false`). Blocking: call from a
    /// blocking thread.
    pub fn load_or_compile(&self, engine: &Engine, wasm: &[u8], sha256: &str) -> wasmtime::Result<(Component, bool)> {
        let path = self.dir.join(format!("{sha256}.cwasm"));
        match self.load(engine, &path, sha256) {
            Ok(Some(component)) => return Ok((component, true)),
            Ok(None) => {}
            Err(reason) => tracing::warn!(path = %path.display(), %reason, "ignoring a cached component; recompiling"),
        }
        let component = Component::new(engine, wasm)?;
        if let Err(error) = self.store(&path, sha256, &component) {
            tracing::warn!(path = %path.display(), %error, "could not cache compiled component");
        }
        Ok((component, false))
    }

    /// `Ok(None)` when there is no entry; `Err` with the reason when there is
    /// one that cannot be used.
    fn load(&self, engine: &Engine, path: &Path, sha256: &str) -> Result<Option<Component>, String> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("unreadable: {error}")),
        };
        if bytes.len() < TAG_BYTES {
            return Err("too short to hold a tag".into());
        }
        let (tag, artifact) = bytes.split_at(TAG_BYTES);
        self.mac(sha256, artifact)
            .verify_slice(tag)
            .map_err(|_| "its tag does not match (not written by this host)")?;
        // SAFETY: the bytes carry a valid tag under a key only this host
        // holds, over this engine's fingerprint and this source's hash: this
        // host serialized them with this engine.
        unsafe { Component::deserialize(engine, artifact) }.map(Some).map_err(|error| error.to_string())
    }

    fn store(&self, path: &Path, sha256: &str, component: &Component) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let artifact = component.serialize().map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut bytes = self.mac(sha256, &artifact).finalize().into_bytes().to_vec();
        bytes.extend_from_slice(&artifact);
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&temporary, bytes)?;
        std::fs::rename(&temporary, path)?;
        Ok(())
    }

    fn mac(&self, sha256: &str, artifact: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key length");
        for part in [self.engine_id.as_bytes(), sha256.as_bytes()] {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac.update(artifact);
        mac
    }
}
