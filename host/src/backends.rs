//! The stores a storage URL can name, opened with their clients: the local ones through
//! [`storage::open_local`], and the cloud ones the binary links.
//!
//! - `file:///abs/path`: local disk (the embedded default: `<data_dir>/store`).
//! - `memory://`: in-process, lost on exit (tests, demos).
//! - `s3://bucket[/prefix]`, `gs://bucket[/prefix]`, `az://container[/prefix]`: the cloud stores, configured
//!   by `storage.options` (keys as `object_store` names them) plus the usual `AWS_*` / `GOOGLE_*` /
//!   `AZURE_*` environment variables; the options win over the environment.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path;
use object_store::prefix::PrefixStore;

use crate::folders::Pager;
use crate::storage::{self, StorageError};

/// How long a cloud client keeps retrying one failed call when `storage.retry_timeout_ms` is not set.
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens the store a URL names, with the backend options of `storage.options` and the default retry budget.
pub fn open(url: &str, options: &BTreeMap<String, String>) -> Result<Arc<dyn ObjectStore>, StorageError> {
    open_with_retry(url, options, DEFAULT_RETRY_TIMEOUT)
}

/// Opens the store a URL names. A cloud client retries a failed call (5xx, 429, connection errors, and
/// timeouts of idempotent calls) with backoff for at most `retry_timeout`, so a store that is unreachable
/// fails requests after about that long instead of object_store's 3 minutes.
///
/// A path after the bucket (`s3://bucket/some/prefix`) confines the store to that prefix: the builders
/// ignore it, so the store is wrapped in a [`PrefixStore`].
pub fn open_with_retry(
    url: &str,
    options: &BTreeMap<String, String>,
    retry_timeout: Duration,
) -> Result<Arc<dyn ObjectStore>, StorageError> {
    open_with_pager(url, options, retry_timeout).map(|(store, _)| store)
}

/// [`open_with_retry`], and for S3 the store's paged listing, which asks for no more keys than a page
/// needs (`max-keys`; the folder engine lists through it).
pub fn open_with_pager(
    url: &str,
    options: &BTreeMap<String, String>,
    retry_timeout: Duration,
) -> Result<(Arc<dyn ObjectStore>, Option<Pager>), StorageError> {
    if let Some(store) = storage::open_local(url)? {
        // A typo'd option for a cloud store would otherwise be silently ignored on the local default.
        return if options.is_empty() {
            Ok((store, None))
        } else {
            Err(StorageError::OptionsNotApplicable { url: url.into() })
        };
    }
    let parsed = url::Url::parse(url).map_err(|_| StorageError::UnsupportedUrl(url.into()))?;
    let cloud = Cloud::of(parsed.scheme()).ok_or_else(|| StorageError::UnsupportedUrl(url.into()))?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(StorageError::UnsupportedUrl(url.into()));
    }
    for key in options.keys() {
        if !cloud.knows(&key.to_ascii_lowercase()) {
            return Err(StorageError::UnknownOption { key: key.clone(), url: url.into() });
        }
    }
    // Start from an empty builder, not `from_env()` (which would read variables of every shape); feed the
    // backend's own environment variables first so the configured options override them (later keys win).
    let from_env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(key, value)| Some((key.into_string().ok()?.to_ascii_lowercase(), value.into_string().ok()?)))
        .filter(|(key, _)| key.starts_with(cloud.env_prefix()) && cloud.knows(key))
        .collect();
    let all: Vec<(String, String)> =
        from_env.into_iter().chain(options.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))).collect();
    let unsupported = |_| StorageError::UnsupportedUrl(url.into());
    let (_, prefix) = object_store::ObjectStoreScheme::parse(&parsed).map_err(unsupported)?;
    let prefix = Path::parse(prefix).map_err(|_| StorageError::UnsupportedUrl(url.into()))?;
    let retry = object_store::RetryConfig { retry_timeout, ..Default::default() };
    let mut pager = None;
    let store: Arc<dyn ObjectStore> = match cloud {
        Cloud::S3 => {
            let builder = all.into_iter().fold(object_store::aws::AmazonS3Builder::new().with_url(url), |b, (k, v)| {
                match k.parse() {
                    Ok(key) => b.with_config(key, v),
                    Err(_) => b,
                }
            });
            let s3 = Arc::new(builder.with_retry(retry).build()?);
            pager = Some(Pager::new(s3.clone(), prefix.clone()));
            s3
        }
        Cloud::Gcs => {
            let builder =
                all.into_iter().fold(object_store::gcp::GoogleCloudStorageBuilder::new().with_url(url), |b, (k, v)| {
                    match k.parse() {
                        Ok(key) => b.with_config(key, v),
                        Err(_) => b,
                    }
                });
            Arc::new(builder.with_retry(retry).build()?)
        }
        Cloud::Azure => {
            let builder =
                all.into_iter().fold(object_store::azure::MicrosoftAzureBuilder::new().with_url(url), |b, (k, v)| {
                    match k.parse() {
                        Ok(key) => b.with_config(key, v),
                        Err(_) => b,
                    }
                });
            Arc::new(builder.with_retry(retry).build()?)
        }
    };
    let store: Arc<dyn ObjectStore> =
        if prefix.as_ref().is_empty() { store } else { Arc::new(PrefixStore::new(store, prefix)) };
    Ok((store, pager))
}

/// Backends the project's own tests run against an emulator of (local disk, memory, S3 on moto, Azure on
/// Azurite). GCS has none that speaks the API object_store uses (see docs/operations.md): it is built and
/// checked at start like the others, but no test of this project has run it.
pub fn tested_backend(url: &str) -> bool {
    !url::Url::parse(url).is_ok_and(|parsed| matches!(Cloud::of(parsed.scheme()), Some(Cloud::Gcs)))
}

/// Whether the store a URL names does `PutMode::Update` itself, so that several processes (instances) may
/// share it. `file://` does not: its compare-and-swap is [`storage::SerializedUpdates`], good for one process only.
pub fn supports_cas_natively(url: &str) -> bool {
    url.starts_with("memory://") || url::Url::parse(url).is_ok_and(|parsed| Cloud::of(parsed.scheme()).is_some())
}

/// Whether the store lists the keys of a flat prefix in lexicographic order,
/// so a listing can stop after its page: S3, GCS and Azure do, and so does
/// memory; the local disk does for a directory without subdirectories
/// (`storage::DirectoryMemo` sorts it once and keeps it while it is
/// unchanged) — which the folder indexes listings page over always are.
pub fn lists_in_key_order(url: &str) -> bool {
    url.starts_with("file://") || supports_cas_natively(url)
}

/// The cloud backends, by URL scheme (the schemes `object_store::ObjectStoreScheme` maps to each).
#[derive(Debug, Clone, Copy)]
enum Cloud {
    S3,
    Gcs,
    Azure,
}

impl Cloud {
    fn of(scheme: &str) -> Option<Self> {
        match scheme {
            "s3" | "s3a" => Some(Self::S3),
            "gs" => Some(Self::Gcs),
            "az" | "adl" | "azure" | "abfs" | "abfss" => Some(Self::Azure),
            _ => None,
        }
    }

    /// Whether `key` (lower-case) is one of the backend's configuration keys.
    fn knows(self, key: &str) -> bool {
        match self {
            Self::S3 => key.parse::<object_store::aws::AmazonS3ConfigKey>().is_ok(),
            Self::Gcs => key.parse::<object_store::gcp::GoogleConfigKey>().is_ok(),
            Self::Azure => key.parse::<object_store::azure::AzureConfigKey>().is_ok(),
        }
    }

    /// Prefix (lower-cased) of the environment variables the backend's own `from_env()` reads.
    fn env_prefix(self) -> &'static str {
        match self {
            Self::S3 => "aws_",
            Self::Gcs => "google_",
            Self::Azure => "azure_",
        }
    }
}

/// Whether a store error means the store could not be reached or did not answer in time (the request may
/// be retried: 503), rather than that it answered with a failure.
pub fn is_unavailable(error: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(http) = current.downcast_ref::<object_store::client::HttpError>() {
            return matches!(
                http.kind(),
                object_store::client::HttpErrorKind::Connect
                    | object_store::client::HttpErrorKind::Timeout
                    | object_store::client::HttpErrorKind::Request
                    | object_store::client::HttpErrorKind::Interrupted
            );
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
            );
        }
        source = current.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_options() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    #[tokio::test]
    async fn opens_supported_urls() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&format!("file://{}/nested", dir.path().display()), &no_options()).unwrap();
        storage::check_ready(store.as_ref()).await.unwrap();
        assert!(dir.path().join("nested").is_dir());
        storage::check_ready(open("memory://", &no_options()).unwrap().as_ref()).await.unwrap();
    }

    #[test]
    fn rejects_other_urls() {
        for url in ["file://relative", "ftp://x", "s4://bucket", "", "http://example.com/x", "s3://", "s3:///x"] {
            assert!(matches!(open(url, &no_options()), Err(StorageError::UnsupportedUrl(_))), "{url}");
        }
    }

    #[test]
    fn checks_options() {
        let options = |key: &str| BTreeMap::from([(key.to_string(), "x".to_string())]);
        assert!(matches!(open("memory://", &options("endpoint")), Err(StorageError::OptionsNotApplicable { .. })));
        assert!(matches!(
            open("s3://bucket", &options("endpiont")),
            Err(StorageError::UnknownOption { key, .. }) if key == "endpiont"
        ));
        // Building a cloud store does no I/O, so this only checks that the options are accepted.
        let s3 = BTreeMap::from([
            ("endpoint".to_string(), "http://127.0.0.1:1".to_string()),
            ("AWS_REGION".to_string(), "us-east-1".to_string()),
            ("allow_http".to_string(), "true".to_string()),
        ]);
        open("s3://bucket/some/prefix", &s3).unwrap();
        assert!(supports_cas_natively("s3://bucket") && supports_cas_natively("memory://"));
        assert!(!supports_cas_natively("file:///tmp/x"));
    }
}
