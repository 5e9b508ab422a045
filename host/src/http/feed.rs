//! `POST /v1/ops/resource/subscribe`: a Server-Sent-Events stream of the
//! changes at or under the URLs a caller may read (SPEC §11).
//!
//! Every instance's changes arrive through the event bus (Redis pub/sub with
//! several instances). The caller's access is checked for every URL before
//! the stream starts (403) and again for each event it would be sent: a
//! revoked share stops that URL's events at once, and the stream ends when
//! no URL is left. Events are hints (see [`crate::events`]): a subscriber
//! that falls behind the bus's buffer skips what it missed.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use super::AppState;
use super::catalog::{self, Kind, Link};
use super::error::ApiError;
use crate::access::Permission;
use crate::auth::Caller;
use crate::events::{EventAction, ResourceEvent};

/// URLs one subscription may watch.
const MAX_WATCHED: usize = 100;

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
    for watch in &resources {
        let link = catalog::canonical(&state, catalog::parse_link(&state, &watch.url)?).await?;
        readable(&state, &caller, &link).await?;
        watched.push(link);
    }
    // Subscribed before the answer: every change after the 200 is seen.
    let events = state.events().subscribe();
    let heartbeat = state.feed_heartbeat();
    let stopping = state.stopping();
    let stream =
        futures_util::stream::unfold(Feed { state, caller, watched, events, stopping }, |mut feed| async move {
            feed.next().await.map(|event| (Ok(event), feed))
        });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(heartbeat).text("heartbeat")))
}

async fn readable(state: &AppState, caller: &Caller, link: &Link) -> Result<(), ApiError> {
    catalog::require(state, caller, link, Permission::Read).await
}

/// One subscription: what it watches and where its events come from.
struct Feed {
    state: AppState,
    caller: Caller,
    watched: Vec<Link>,
    events: tokio::sync::broadcast::Receiver<ResourceEvent>,
    /// The server is stopping: the stream ends.
    stopping: tokio::sync::watch::Receiver<bool>,
}

impl Feed {
    /// The next event to send, or `None` when nothing is left to watch or
    /// the server is stopping.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if self.watched.is_empty() || *self.stopping.borrow() {
                return None;
            }
            let received = tokio::select! {
                received = self.events.recv() => received,
                _ = self.stopping.changed() => return None,
            };
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

    /// The URL to show for `event` if a watched URL covers it and the caller
    /// may still read there; a watched URL the caller lost is dropped.
    async fn admit(&mut self, event: &ResourceEvent) -> Option<String> {
        let mut admitted = None;
        let mut index = 0;
        while index < self.watched.len() {
            let link = &self.watched[index];
            if !crate::sharing::covers(&link.key(), &event.url) {
                index += 1;
                continue;
            }
            if readable(&self.state, &self.caller, link).await.is_err() {
                self.watched.remove(index);
                continue;
            }
            if admitted.is_none() && self.item_readable(link, &event.url).await {
                admitted = Some(shown_url(link, &event.url));
            }
            index += 1;
        }
        admitted
    }

    /// Below a watched folder, the item itself must be readable too (public
    /// folder rules can hide part of a folder).
    async fn item_readable(&self, link: &Link, url: &str) -> bool {
        if !link.url.is_folder() {
            return true;
        }
        match catalog::parse_link(&self.state, url) {
            Ok(item) => readable(&self.state, &self.caller, &item).await.is_ok(),
            Err(_) => false,
        }
    }
}

/// A v2 resource as listings show it: with its trailing `/`.
fn shown_url(link: &Link, url: &str) -> String {
    match link.kind {
        Kind::Folder(_) if !url.ends_with('/') => format!("{url}/"),
        _ => url.to_string(),
    }
}
