//! `POST /v1/ops/resource/subscribe`: a Server-Sent-Events stream of the
//! changes at or under the URLs a caller may read (SPEC §11).
//!
//! Every instance's changes arrive through the event bus (Redis pub/sub with
//! several instances). The caller's access is checked for every URL before
//! the stream starts (403) and again for each event it would be sent: a
//! revoked share stops that URL's events at once, and the stream ends when
//! no URL is left. Events are hints (see [`crate::events`]): a subscriber
//! that falls behind the bus's buffer skips what it missed.
//!
//! A subscription lives no longer than the credential it was made with: one
//! made with a per-request key ends when the key is revoked (checked every
//! [`KEY_CHECK`]) or expires, one made with a JWT at the token's `exp`.
//! Watched URLs are de-duplicated, each event costs one access decision per
//! subscription (each owner's sharing document read once), and a caller
//! holds at most `feed.max_subscriptions_per_caller` subscriptions at once
//! on an instance (429 beyond).

use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use super::error::ApiError;
use super::state::AppState;
use super::subscriptions::Slot;
use crate::access::{Permission, Resource, StateRead};
use crate::auth::Caller;
use crate::catalog::{Kind, Link};
use crate::clock::now_ms;
use crate::events::{EventAction, ResourceEvent};

/// URLs one subscription may watch.
const MAX_WATCHED: usize = 100;
/// How often a subscription made with a per-request key asks the key store
/// whether the key is still alive.
const KEY_CHECK: Duration = Duration::from_secs(1);

#[derive(Deserialize, utoipa::ToSchema)]
struct SubscribeRequest {
    resources: Option<Vec<Watch>>,
}

#[derive(Deserialize, utoipa::ToSchema)]
struct Watch {
    url: String,
}

/// One event of the feed, sent as `data: <json>`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Change {
    /// As listings show it (a v2 resource's with its trailing `/`).
    url: String,
    #[schema(value_type = String, example = "UPDATE")]
    action: EventAction,
    timestamp: i64,
    /// After the change; none for a deletion.
    etag: Option<String>,
}

/// `POST /v1/ops/resource/subscribe`
#[utoipa::path(post, path = "/v1/ops/resource/subscribe", tag = "resources", request_body = SubscribeRequest,
    responses((status = 200, description = "Server-sent events: `data: <event>` per change at or under the URLs \
        the caller can read, made on any instance, and `: heartbeat` comments",
        body = Change, content_type = "text/event-stream")))]
pub async fn subscribe(
    State(state): State<AppState>,
    caller: Caller,
    bytes: Bytes,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let request: SubscribeRequest = serde_json::from_slice(&bytes).map_err(|error| {
        tracing::debug!(%error, "subscribe request");
        ApiError::bad_request("Can't subscribe to resources. Incorrect body provided")
    })?;
    let resources = request.resources.unwrap_or_default();
    if resources.is_empty() {
        return Err(ApiError::bad_request("resources list must be provided"));
    }
    if resources.len() > MAX_WATCHED {
        return Err(ApiError::bad_request(format!("At most {MAX_WATCHED} resources per subscription")));
    }
    let mut watched = Vec::with_capacity(resources.len());
    let mut seen = HashSet::new();
    for watch in &resources {
        let link = state.catalog().parse_canonical(&watch.url).await?;
        if !seen.insert(link.key()) {
            continue;
        }
        readable(&state, &caller, &link).await?;
        watched.push(link);
    }
    let slot = state.feed_subscriptions().take(&caller)?;
    let ends_at = credential_end(&caller);
    // Subscribed before the answer: every change after the 200 is seen.
    let events = state.events().subscribe();
    let heartbeat = state.feed_heartbeat();
    let stopping = state.stopping();
    let feed = Feed { state, caller, watched, events, stopping, ends_at, _slot: slot };
    let stream =
        futures_util::stream::unfold(feed, |mut feed| async move { feed.next().await.map(|event| (Ok(event), feed)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(heartbeat).text("heartbeat")))
}

async fn readable(state: &AppState, caller: &Caller, link: &Link) -> Result<(), ApiError> {
    Ok(state.catalog().require(caller, link, Permission::Read).await?)
}

/// When the credential a subscription was made with stops being valid
/// (epoch ms): a per-request key's expiry, a JWT's `exp`; none for an API key.
fn credential_end(caller: &Caller) -> Option<i64> {
    match &caller.per_request {
        Some(key) => Some(key.expires_at),
        None => caller.claims.as_ref()?.get("exp")?.as_f64().map(|exp| (exp * 1000.0) as i64),
    }
}

/// One subscription: what it watches and where its events come from.
struct Feed {
    state: AppState,
    caller: Caller,
    watched: Vec<Link>,
    events: tokio::sync::broadcast::Receiver<ResourceEvent>,
    /// The server is stopping: the stream ends.
    stopping: tokio::sync::watch::Receiver<bool>,
    /// When the credential ends (epoch ms): the stream ends then.
    ends_at: Option<i64>,
    _slot: Slot,
}

impl Feed {
    /// The next event to send, or `None` when nothing is left to watch or
    /// the server is stopping.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if self.watched.is_empty() || *self.stopping.borrow() {
                return None;
            }
            let until_end = self.ends_at.map(|end| Duration::from_millis(u64::try_from(end - now_ms()).unwrap_or(0)));
            if until_end == Some(Duration::ZERO) {
                return None;
            }
            let key_check = self.caller.per_request.as_ref().map(|_| KEY_CHECK);
            let received = tokio::select! {
                received = self.events.recv() => received,
                _ = self.stopping.changed() => return None,
                () = sleep_or_never(until_end) => return None,
                () = sleep_or_never(key_check) => {
                    if !self.key_alive().await {
                        return None;
                    }
                    continue;
                }
            };
            if !self.key_alive().await {
                return None;
            }
            let event = match received {
                Ok(event) => event,
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "a change feed fell behind; events skipped");
                    continue;
                }
                Err(RecvError::Closed) => return None,
            };
            if let Some(url) = self.admit(&event).await {
                let change = Change { url, action: event.action, timestamp: event.timestamp, etag: event.etag };
                let body = serde_json::to_string(&change).expect("changes serialise");
                return Some(Event::default().data(body));
            }
        }
    }

    /// Whether the per-request key the subscription was made with is still
    /// alive (a key store that cannot answer ends the stream: fail closed).
    async fn key_alive(&self) -> bool {
        let Some(key) = &self.caller.per_request else { return true };
        matches!(self.state.keys().get(&key.id.0).await, Ok(Some(_)))
    }

    /// The URL to show for `event` if a watched URL covers it and the caller
    /// may still read there; a watched URL the caller lost is dropped. One
    /// access decision: the state it reads is read once for every check.
    async fn admit(&mut self, event: &ResourceEvent) -> Option<String> {
        let mut decision = StateRead::default();
        let mut admitted = None;
        let mut index = 0;
        while index < self.watched.len() {
            let link = &self.watched[index];
            if !crate::sharing::covers(&link.key(), &event.url) {
                index += 1;
                continue;
            }
            if !self.reads(link, &mut decision).await {
                self.watched.remove(index);
                continue;
            }
            if admitted.is_none() && self.item_readable(link, &event.url, &mut decision).await {
                admitted = Some(shown_url(link, &event.url));
            }
            index += 1;
        }
        admitted
    }

    async fn reads(&self, link: &Link, decision: &mut StateRead) -> bool {
        let resource = Resource { url: &link.url, location: &link.location };
        let permissions = self.state.access().permissions_within(&self.caller, resource, decision).await;
        permissions.is_ok_and(|permissions| permissions.allows(Permission::Read))
    }

    /// Below a watched folder, the item itself must be readable too (public
    /// folder rules can hide part of a folder).
    async fn item_readable(&self, link: &Link, url: &str, decision: &mut StateRead) -> bool {
        if !link.url.is_folder() {
            return true;
        }
        match self.state.catalog().parse_link(url) {
            Ok(item) => self.reads(&item, decision).await,
            Err(_) => false,
        }
    }
}

/// Sleeps for `duration`, or forever when there is none.
async fn sleep_or_never(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

/// A v2 resource as listings show it: with its trailing `/`.
fn shown_url(link: &Link, url: &str) -> String {
    match link.kind {
        Kind::Folder(_) if !url.ends_with('/') => format!("{url}/"),
        _ => url.to_string(),
    }
}
