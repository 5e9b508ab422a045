//! What every route handler reaches: the host's services, shared by every
//! request.

use std::sync::Arc;

use object_store::ObjectStore;

use super::subscriptions::Subscriptions;
use crate::access::AccessService;
use crate::agent_skills::AgentSkills;
use crate::apps::{ConfigApps, StoredDefinitions};
use crate::audit::Audit;
use crate::auth::Authenticator;
use crate::auth::Caller;
use crate::blob_resources::BlobResources;
use crate::blobs::BlobService;
use crate::buckets::BucketCodec;
use crate::catalog::Catalog;
use crate::consent::ConsentStore;
use crate::dependencies::DeclarationPolicy;
use crate::documents::Documents;
use crate::folder_resources::FolderResources;
use crate::folders::FolderEngine;
use crate::handlers::HandlerRegistry;
use crate::hosted_skills::HostedSkills;
use crate::keys::{Keys, WritingKey};
use crate::proxy::Proxy;
use crate::publication::workflow::Publications;
use crate::skills_index::SkillsIndex;

/// Shared by every request: cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Services>,
}

/// The services routes use.
pub struct Services {
    pub auth: Authenticator,
    pub apps: ConfigApps,
    /// Stored application definitions parsed once per etag.
    pub definitions: StoredDefinitions,
    pub keys: Keys,
    pub proxy: Proxy,
    pub consent: ConsentStore,
    pub audit: Audit,
    /// `access.allow_user_resource_dependencies`.
    pub allow_user_dependencies: bool,
    pub access: AccessService,
    pub documents: Documents,
    pub buckets: BucketCodec,
    pub handlers: HandlerRegistry,
    pub store: Arc<dyn ObjectStore>,
    pub folders: Arc<FolderEngine>,
    pub blobs: Arc<BlobService>,
    /// The shared Redis connection (locks, key store, events), for `/ready`.
    pub redis: Option<crate::redis_conn::RedisConnection>,
    /// Committed changes, from every instance: the change feed's source.
    pub events: Arc<dyn crate::events::EventBus>,
    pub feed_heartbeat: std::time::Duration,
    /// Open change-feed subscriptions per caller, bounded by
    /// `feed.max_subscriptions_per_caller`.
    pub feed_subscriptions: Subscriptions,
    /// Set when the server begins to stop: endless responses (the change
    /// feed) end instead of holding the graceful stop for its whole bound.
    pub stopping: tokio::sync::watch::Sender<bool>,
    /// `skills_api.vendor_names`.
    pub vendor_names: crate::hosted_skills::VendorNames,
}

impl AppState {
    pub fn new(services: Services) -> Self {
        Self { inner: Arc::new(services) }
    }

    pub fn auth(&self) -> &Authenticator {
        &self.inner.auth
    }

    pub fn apps(&self) -> &ConfigApps {
        &self.inner.apps
    }

    pub fn definitions(&self) -> &StoredDefinitions {
        &self.inner.definitions
    }

    pub fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    /// The per-request key `caller`'s write came with: an upload by an
    /// application commits only while it lives ([`WritingKey`]).
    pub fn writing_key(&self, caller: &Caller) -> Option<WritingKey> {
        caller.per_request.as_deref().map(|key| WritingKey::new(&self.inner.keys, key))
    }

    pub fn proxy(&self) -> &Proxy {
        &self.inner.proxy
    }

    pub fn consent(&self) -> &ConsentStore {
        &self.inner.consent
    }

    pub fn audit(&self) -> &Audit {
        &self.inner.audit
    }

    /// What `writer` may declare in an application's
    /// `resource_dependencies` ([`Catalog::declaration_policy`]).
    pub fn declaration_policy(&self, writer: &Caller) -> DeclarationPolicy {
        self.catalog().declaration_policy(writer)
    }

    /// Every group's store, for what names any resource.
    pub fn catalog(&self) -> Catalog<'_> {
        Catalog {
            handlers: &self.inner.handlers,
            buckets: &self.inner.buckets,
            folders: &self.inner.folders,
            blobs: &self.inner.blobs,
            access: &self.inner.access,
            allow_user_dependencies: self.inner.allow_user_dependencies,
        }
    }

    /// The v1 resource API.
    pub fn blob_resources(&self) -> BlobResources<'_> {
        BlobResources::new(self.catalog())
    }

    /// The hosted skills APIs' view of the skill resources.
    pub fn hosted_skills(&self) -> HostedSkills<'_> {
        HostedSkills::new(self.catalog(), self.inner.vendor_names)
    }

    /// The public skills as agents discover them (the well-known index).
    pub fn skills_index(&self) -> SkillsIndex<'_> {
        SkillsIndex::new(self.catalog())
    }

    /// The skills a caller can read, as agents load them over MCP.
    pub fn agent_skills(&self) -> AgentSkills<'_> {
        AgentSkills::new(self.catalog())
    }

    /// The v2 resource API.
    pub fn folder_resources(&self) -> FolderResources<'_> {
        FolderResources::new(self.catalog())
    }

    /// The publication workflow.
    pub fn publications(&self) -> Publications<'_> {
        Publications::new(self.catalog(), &self.inner.documents)
    }

    pub fn events(&self) -> &Arc<dyn crate::events::EventBus> {
        &self.inner.events
    }

    pub fn feed_heartbeat(&self) -> std::time::Duration {
        self.inner.feed_heartbeat
    }

    pub fn feed_subscriptions(&self) -> &Subscriptions {
        &self.inner.feed_subscriptions
    }

    /// Ends every change-feed stream; called when the server begins to stop.
    pub fn begin_stop(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Becomes `true` when the server begins to stop.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.stopping.subscribe()
    }

    pub fn access(&self) -> &AccessService {
        &self.inner.access
    }

    pub fn documents(&self) -> &Documents {
        &self.inner.documents
    }

    pub fn buckets(&self) -> &BucketCodec {
        &self.inner.buckets
    }

    pub fn handlers(&self) -> &HandlerRegistry {
        &self.inner.handlers
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.store
    }

    pub fn folders(&self) -> &FolderEngine {
        &self.inner.folders
    }

    pub fn blobs(&self) -> &BlobService {
        &self.inner.blobs
    }

    pub fn redis(&self) -> Option<&crate::redis_conn::RedisConnection> {
        self.inner.redis.as_ref()
    }
}
