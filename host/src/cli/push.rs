//! `dial-host handler push FILE.wasm oci://<registry>/<repository>:<tag>`:
//! checks that the file is a handler this host loads, publishes it in the
//! Wasm OCI layout (`wkg oci push`'s), and gives the pinned reference to put
//! in `handlers.types.<group>.source`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::handlers::oci::{self, OciReference, OciTarget, PushInput};
use crate::handlers::{HandlerSource, Runtime, RuntimeLimits};

/// Longest a push may take.
const PUSH_TIMEOUT: Duration = Duration::from_secs(300);

/// What was published.
#[derive(Debug)]
pub struct Pushed {
    pub reference: OciReference,
    /// The group the component describes (the `<group>` of its config key).
    pub group: String,
    /// `<type>@<version>`.
    pub label: String,
}

/// Loads `file` (refusing what is no handler), then pushes it to `target`;
/// `insecure` lists registries reached over plain HTTP besides loopback ones.
pub async fn push_handler(file: &Path, target: &str, insecure: &[String]) -> anyhow::Result<Pushed> {
    let target = OciTarget::parse(target)?;
    let wasm = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let runtime: Arc<Runtime> = Runtime::new(RuntimeLimits::default(), None, false)
        .map_err(|e| anyhow::anyhow!("starting the handler runtime: {e}"))?;
    let loaded = runtime
        .load(wasm.clone(), HandlerSource::File(file.to_path_buf()))
        .await
        .with_context(|| format!("{} is not a handler this host loads", file.display()))?;
    let (imports, exports) = runtime.world(&loaded);
    let created = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let input = PushInput {
        wasm: &wasm,
        created: &created,
        imports: &imports,
        exports: &exports,
        insecure_registries: insecure,
        timeout: PUSH_TIMEOUT,
    };
    let reference = tokio::time::timeout(PUSH_TIMEOUT, oci::push(&target, input))
        .await
        .map_err(|_| anyhow::anyhow!("pushing to {target} did not finish within {PUSH_TIMEOUT:?}"))?
        .with_context(|| format!("pushing to {target}"))?;
    Ok(Pushed { reference, group: loaded.description().group.clone(), label: loaded.label().to_string() })
}
