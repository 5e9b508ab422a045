//! Change events: `CREATE`/`UPDATE`/`DELETE` of a resource, sent to
//! subscribers in this instance and, with Redis, in every instance.
//!
//! Events are at-most-once hints (pub/sub drops what a disconnected
//! subscriber misses, and a slow local subscriber can lag behind the buffer);
//! the resource's marker stays the source of truth, so a consumer that may
//! have missed an event re-reads the marker.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::redis_conn::{Redis, RedisConnection, Subscription};

/// Events a local subscriber may fall behind by before it misses some
/// (`RecvError::Lagged`).
pub const SUBSCRIBER_BUFFER: usize = 1024;

/// First pause before re-subscribing after the pub/sub connection dropped; it
/// doubles up to [`MAX_RECONNECT_BACKOFF`].
const MIN_RECONNECT_BACKOFF: Duration = Duration::from_millis(100);
const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(10);
/// How often an idle pub/sub connection is pinged: a peer that vanished
/// without closing the TCP connection would otherwise go unnoticed forever.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventAction {
    Create,
    Update,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceEvent {
    pub action: EventAction,
    pub url: String,
    /// The etag after the change (none for a deletion), so consumers can
    /// order and deduplicate events.
    pub etag: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
}

impl ResourceEvent {
    /// An event stamped with the current time.
    pub fn now(action: EventAction, url: impl Into<String>, etag: Option<String>) -> Self {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since_epoch| i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX));
        Self { action, url: url.into(), etag, timestamp }
    }
}

/// Where committed changes are announced.
pub trait EventBus: Send + Sync {
    /// Never fails the caller: an event that cannot be sent is logged and
    /// dropped, since the change itself has already been committed.
    fn publish(&self, event: ResourceEvent) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
    /// Events published from now on, by this instance or (with Redis) any other.
    fn subscribe(&self) -> broadcast::Receiver<ResourceEvent>;
}

/// Picks Redis pub/sub when Redis is given, in-process delivery otherwise.
/// With Redis it subscribes before returning, so an unreachable Redis fails
/// startup rather than silently dropping events.
pub async fn from_config(redis: Option<&Redis>, key_prefix: &str) -> Result<Arc<dyn EventBus>, redis::RedisError> {
    Ok(match redis {
        Some(redis) => Arc::new(RedisEvents::connect(redis.clone(), key_prefix).await?),
        None => Arc::new(InProcessEvents::new()),
    })
}

/// Delivery within one instance.
pub struct InProcessEvents {
    sender: broadcast::Sender<ResourceEvent>,
}

impl InProcessEvents {
    pub fn new() -> Self {
        Self { sender: broadcast::channel(SUBSCRIBER_BUFFER).0 }
    }
}

impl Default for InProcessEvents {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus for InProcessEvents {
    fn publish(&self, event: ResourceEvent) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        // An error only means nobody is subscribed.
        let _ = self.sender.send(event);
        Box::pin(std::future::ready(()))
    }

    fn subscribe(&self) -> broadcast::Receiver<ResourceEvent> {
        self.sender.subscribe()
    }
}

/// Delivery across instances through Redis pub/sub on `<key_prefix>events`.
///
/// Publishing only sends to Redis; local subscribers get every event —
/// including this instance's own — from the subscription, so each arrives
/// exactly once and in the order Redis saw them.
pub struct RedisEvents {
    publisher: RedisConnection,
    channel: String,
    local: broadcast::Sender<ResourceEvent>,
    _forwarder: AbortOnDrop,
}

impl RedisEvents {
    /// Subscribes on a dedicated connection before returning, so events
    /// published after this returns reach local subscribers. A background task
    /// then forwards messages and re-subscribes, with backoff, whenever that
    /// connection drops; events published meanwhile are lost.
    pub async fn connect(redis: Redis, key_prefix: &str) -> Result<Self, redis::RedisError> {
        let channel = format!("{key_prefix}events");
        let subscription = redis.subscribe(&channel).await?;
        let local = broadcast::channel(SUBSCRIBER_BUFFER).0;
        let publisher = redis.connection();
        let forwarder = tokio::spawn(forward(redis, channel.clone(), subscription, local.clone()));
        Ok(Self { publisher, channel, local, _forwarder: AbortOnDrop(forwarder) })
    }
}

impl EventBus for RedisEvents {
    fn publish(&self, event: ResourceEvent) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let payload = match serde_json::to_string(&event) {
                Ok(payload) => payload,
                Err(error) => {
                    tracing::warn!(url = event.url, %error, "dropping change event: cannot encode it");
                    return;
                }
            };
            let mut connection = self.publisher.clone();
            let sent = redis::cmd("PUBLISH").arg(&self.channel).arg(payload).query_async::<i64>(&mut connection).await;
            if let Err(error) = sent {
                tracing::warn!(url = event.url, %error, "dropping change event: cannot publish it");
            }
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<ResourceEvent> {
        self.local.subscribe()
    }
}

/// Forwards messages from the subscription into `local` for as long as the
/// owning [`RedisEvents`] lives, re-subscribing when the connection drops.
async fn forward(
    redis: Redis,
    channel: String,
    mut subscription: Subscription,
    local: broadcast::Sender<ResourceEvent>,
) {
    loop {
        forward_until_disconnected(&mut subscription, &local).await;
        tracing::warn!(channel, "change event subscription dropped; re-subscribing");
        subscription = resubscribe(&redis, &channel).await;
        tracing::info!(channel, "change event subscription restored");
    }
}

async fn forward_until_disconnected(subscription: &mut Subscription, local: &broadcast::Sender<ResourceEvent>) {
    let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE_INTERVAL, KEEPALIVE_INTERVAL);
    keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            message = subscription.next() => match message {
                Some(payload) => deliver(&payload, local),
                None => return,
            },
            _ = keepalive.tick() => {
                let pong = tokio::time::timeout(KEEPALIVE_TIMEOUT, subscription.ping()).await;
                if !matches!(pong, Ok(true)) {
                    return;
                }
            }
        }
    }
}

/// Retries until subscribed: events cannot be delivered without a
/// subscription, and Redis coming back is the only way forward.
async fn resubscribe(redis: &Redis, channel: &str) -> Subscription {
    let mut backoff = MIN_RECONNECT_BACKOFF;
    loop {
        // Between half and all of the backoff, so instances that lost Redis
        // together do not all reconnect at the same instant.
        let backoff_ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX).max(1);
        tokio::time::sleep(Duration::from_millis(rand::random_range(backoff_ms.div_ceil(2)..=backoff_ms))).await;
        match redis.subscribe(channel).await {
            Ok(subscription) => return subscription,
            Err(error) => tracing::warn!(channel, %error, "cannot re-subscribe to change events; retrying"),
        }
        backoff = (backoff * 2).min(MAX_RECONNECT_BACKOFF);
    }
}

fn deliver(payload: &str, local: &broadcast::Sender<ResourceEvent>) {
    match serde_json::from_str::<ResourceEvent>(payload) {
        // An error only means nobody is subscribed.
        Ok(event) => drop(local.send(event)),
        Err(error) => tracing::warn!(%error, "ignoring malformed change event"),
    }
}

/// Stops the forwarding task when its [`RedisEvents`] goes away.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_with_uppercase_action_and_camel_case_fields() {
        let event = ResourceEvent {
            action: EventAction::Create,
            url: "files/abc/a.txt".into(),
            etag: Some("e1".into()),
            timestamp: 1_700_000_000_000,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"action": "CREATE", "url": "files/abc/a.txt", "etag": "e1", "timestamp": 1_700_000_000_000_i64})
        );
        assert_eq!(serde_json::from_value::<ResourceEvent>(json).unwrap(), event);
        let deleted: ResourceEvent =
            serde_json::from_str(r#"{"action":"DELETE","url":"files/abc/a.txt","timestamp":1}"#).unwrap();
        assert_eq!((deleted.action, deleted.etag), (EventAction::Delete, None));
    }

    #[test]
    fn now_stamps_the_current_time() {
        let event = ResourceEvent::now(EventAction::Update, "files/abc/a.txt", None);
        // 2023-11-14: any clock this runs on is past it.
        assert!(event.timestamp > 1_700_000_000_000);
    }
}
