//! Compiled components on disk, so a restart does not recompile.
//!
//! Entries live under `<dir>/<engine>/<sha256>.cwasm`, where `<engine>`
//! fingerprints the wasmtime version and engine settings
//! (`Engine::precompile_compatibility_hash`): an artifact is only ever loaded
//! by an engine that could have produced it. Writes go to a temporary file
//! and are renamed into place, so a reader never maps a half-written file,
//! and an entry that fails to load is treated as a miss and rewritten.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    pub fn new(root: PathBuf, engine: &Engine) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self { dir: root.join(format!("{:016x}", hasher.finish())) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiled component for `wasm` (whose SHA-256 is `sha256`),
    /// loaded from the cache or compiled and stored. Blocking: call from a
    /// blocking thread.
    pub fn load_or_compile(&self, engine: &Engine, wasm: &[u8], sha256: &str) -> wasmtime::Result<Component> {
        let path = self.dir.join(format!("{sha256}.cwasm"));
        if path.exists() {
            // SAFETY: the file is one this host wrote (see `store`), keyed by
            // the engine fingerprint, and never rewritten in place.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok(component),
                Err(error) => tracing::warn!(path = %path.display(), %error, "ignoring unusable cached component"),
            }
        }
        let component = Component::new(engine, wasm)?;
        if let Err(error) = self.store(&path, &component) {
            tracing::warn!(path = %path.display(), %error, "could not cache compiled component");
        }
        Ok(component)
    }

    fn store(&self, path: &Path, component: &Component) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let bytes = component.serialize().map_err(|e| anyhow::anyhow!("{e}"))?;
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&temporary, bytes)?;
        std::fs::rename(&temporary, path)?;
        Ok(())
    }
}
