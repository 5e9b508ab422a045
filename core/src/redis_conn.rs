//! The host's one way to Redis, whichever shape it has: one server
//! (`redis.url`), a Redis Cluster (`redis.cluster_nodes`) or a primary that
//! Sentinel names (`redis.sentinels` + `redis.sentinel_master`).
//!
//! Locks, per-request keys and the event bus all talk through
//! [`RedisConnection`], a cheap-to-clone handle implementing the redis crate's
//! `ConnectionLike`, so commands and scripts are written once. Change events
//! use [`Redis::subscribe`], which gives a [`Subscription`] of the same shape
//! in every mode.
//!
//! Every command, connection and re-resolution is bounded by
//! `redis.timeout_ms`, with at most one reconnect or retry, so while Redis (or
//! a cluster's node, or Sentinel's primary) is away a command fails fast —
//! the caller answers 503 — and the first command after it is back succeeds.
//!
//! Cluster: what a script or an atomic read touches together must share a
//! slot — a per-request key and its change list carry the key as their hash
//! tag (`keys.rs`); locks touch one key each. Keys of different calls and
//! locks spread over every primary. Pub/sub is cluster-wide (`PUBLISH`
//! reaches subscribers on every node).
//!
//! Sentinel: the primary is asked of the sentinels at connect time and again
//! after any command fails (the primary may have moved); commands are never
//! retried on another node, so a failover refuses the writes in flight (503)
//! and the next ones go to the new primary. Locks held on the old primary may
//! be lost with it (replication is asynchronous) — the marker's conditional
//! write is what keeps commits correct, as ever.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use dial_handler_runtime::TRACE_SPANS;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, PubSubSink, PubSubStream};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{AggregateOp, MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{Cmd, Pipeline, PushInfo, PushKind, RedisError, RedisFuture, RedisResult, Value};
use tokio::sync::{Mutex, RwLock, mpsc};
use tracing::Instrument;

use crate::config::RedisConfig;

/// Which Redis the configuration names, checked: exactly one shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    Single(String),
    Cluster(Vec<String>),
    Sentinel { sentinels: Vec<String>, master: String },
}

impl RedisTarget {
    /// `None` when no Redis is configured.
    pub fn from_config(config: &RedisConfig) -> anyhow::Result<Option<Self>> {
        let given = [config.url.is_some(), !config.cluster_nodes.is_empty(), !config.sentinels.is_empty()];
        anyhow::ensure!(
            given.iter().filter(|set| **set).count() <= 1,
            "set one of redis.url (one server), redis.cluster_nodes (a cluster) or redis.sentinels (Sentinel), not several"
        );
        if config.sentinel_master.is_some() && config.sentinels.is_empty() {
            anyhow::bail!("redis.sentinel_master is set but redis.sentinels is empty: list the sentinels to ask");
        }
        Ok(if let Some(url) = &config.url {
            Some(Self::Single(url.clone()))
        } else if !config.cluster_nodes.is_empty() {
            Some(Self::Cluster(config.cluster_nodes.clone()))
        } else if !config.sentinels.is_empty() {
            let master = config.sentinel_master.clone().ok_or_else(|| {
                anyhow::anyhow!("redis.sentinels is set: name the primary they watch in redis.sentinel_master")
            })?;
            Some(Self::Sentinel { sentinels: config.sentinels.clone(), master })
        } else {
            None
        })
    }
}

impl fmt::Display for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Single(url) => write!(f, "{}", redact(url)),
            Self::Cluster(nodes) => {
                write!(f, "cluster {}", nodes.iter().map(|n| redact(n)).collect::<Vec<_>>().join(", "))
            }
            Self::Sentinel { sentinels, master } => write!(
                f,
                "primary '{master}' of sentinels {}",
                sentinels.iter().map(|n| redact(n)).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// A URL without its password, for logs and errors.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

/// A connected Redis: commands through [`Self::connection`], change events
/// through [`Self::subscribe`]. Cheap to clone.
#[derive(Clone)]
pub struct Redis {
    target: Arc<RedisTarget>,
    connection: RedisConnection,
    timeout: Duration,
    /// Sentinel mode: the sentinels, asked again for every subscription.
    sentinel: Option<Arc<Mutex<SentinelClient>>>,
}

impl fmt::Debug for Redis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redis").field("target", &self.target.to_string()).finish()
    }
}

impl Redis {
    /// Connects (failing if Redis does not answer within the timeout, so a
    /// misconfigured instance does not start), or `None` without Redis.
    pub async fn connect(config: &RedisConfig) -> anyhow::Result<Option<Self>> {
        let Some(target) = RedisTarget::from_config(config)? else { return Ok(None) };
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        let bounded = |what: String| {
            let target = target.to_string();
            move |error: RedisError| anyhow::anyhow!("{what} ({target}): {error}")
        };
        let (connection, sentinel) = match &target {
            RedisTarget::Single(url) => {
                let client = redis::Client::open(url.as_str()).map_err(bounded("redis.url".into()))?;
                let manager = client
                    .get_connection_manager_with_config(manager_config(timeout))
                    .await
                    .map_err(bounded("connecting to Redis".into()))?;
                (RedisConnection(Inner::Single(manager)), None)
            }
            RedisTarget::Cluster(nodes) => {
                let client = cluster_client(nodes, timeout, None).map_err(bounded("redis.cluster_nodes".into()))?;
                let connection = tokio::time::timeout(timeout * 2, client.get_async_connection())
                    .await
                    .map_err(|_| anyhow::anyhow!("connecting to the Redis cluster ({target}): no answer"))?
                    .map_err(bounded("connecting to the Redis cluster".into()))?;
                (RedisConnection(Inner::Cluster(connection)), None)
            }
            RedisTarget::Sentinel { sentinels, master } => {
                let client = SentinelClient::build(sentinels.clone(), master.clone(), None, SentinelServerType::Master)
                    .map_err(bounded("redis.sentinels".into()))?;
                let client = Arc::new(Mutex::new(client));
                let primary = SentinelPrimary { sentinel: client.clone(), current: Arc::default(), timeout };
                primary.resolve().await.map_err(bounded("asking Sentinel for the primary".into()))?;
                (RedisConnection(Inner::Sentinel(primary)), Some(client))
            }
        };
        Ok(Some(Self { target: Arc::new(target), connection, timeout, sentinel }))
    }

    pub fn target(&self) -> &RedisTarget {
        &self.target
    }

    /// A handle for commands (cheap to clone).
    pub fn connection(&self) -> RedisConnection {
        self.connection.clone()
    }

    /// Subscribes to `channel` on a connection of its own. The subscription
    /// ends (its [`Subscription::next`] returns `None`) when that connection
    /// drops; subscribe again then.
    pub async fn subscribe(&self, channel: &str) -> RedisResult<Subscription> {
        let limit = self.timeout * 2;
        match &*self.target {
            RedisTarget::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                within(limit, pubsub(client, channel)).await
            }
            RedisTarget::Sentinel { .. } => {
                let sentinel = self.sentinel.as_ref().expect("sentinel mode keeps its sentinels");
                let client = within(limit, async { sentinel.lock().await.async_get_client().await }).await?;
                within(limit, pubsub(client, channel)).await
            }
            RedisTarget::Cluster(nodes) => {
                let (sender, receiver) = mpsc::unbounded_channel();
                let client = cluster_client(nodes, self.timeout, Some(sender))?;
                let mut connection = within(limit, client.get_async_connection()).await?;
                within(limit, connection.subscribe(channel)).await?;
                Ok(Subscription(SubscriptionInner::Cluster { connection, pushes: receiver }))
            }
        }
    }
}

/// `future`, or a timeout error after `limit`.
async fn within<T>(limit: Duration, future: impl Future<Output = RedisResult<T>>) -> RedisResult<T> {
    tokio::time::timeout(limit, future).await.unwrap_or_else(|_| Err(io_error("no answer from Redis in time")))
}

fn manager_config(timeout: Duration) -> ConnectionManagerConfig {
    // One reconnect attempt per failed command, each bounded: requests get
    // their 503 at once while Redis is away, and the next command after it
    // returns reconnects.
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
}

fn cluster_client(
    nodes: &[String],
    timeout: Duration,
    pushes: Option<mpsc::UnboundedSender<PushInfo>>,
) -> RedisResult<redis::cluster::ClusterClient> {
    // RESP3 for the push messages that carry pub/sub; one retry (a MOVED
    // after a resharding, or a node that just came back) within twice the
    // timeout, so a down primary's slots fail fast instead of being retried
    // sixteen times.
    let mut builder = redis::cluster::ClusterClientBuilder::new(nodes.to_vec())
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .overall_response_timeout(Some(timeout * 2))
        .retries(1)
        .use_protocol(redis::ProtocolVersion::RESP3);
    if let Some(pushes) = pushes {
        builder = builder.push_sender(pushes);
    }
    builder.build()
}

async fn pubsub(client: redis::Client, channel: &str) -> RedisResult<Subscription> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    let (sink, stream) = pubsub.split();
    Ok(Subscription(SubscriptionInner::PubSub { sink, stream }))
}

fn io_error(what: &'static str) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}

/// Messages of one subscription, as payload strings.
pub struct Subscription(SubscriptionInner);

enum SubscriptionInner {
    PubSub { sink: PubSubSink, stream: PubSubStream },
    Cluster { connection: ClusterConnection, pushes: mpsc::UnboundedReceiver<PushInfo> },
}

impl Subscription {
    /// The next message's payload; `None` once the connection dropped.
    /// A payload that is not text is skipped with a warning.
    pub async fn next(&mut self) -> Option<String> {
        use futures_util::StreamExt;
        loop {
            match &mut self.0 {
                SubscriptionInner::PubSub { stream, .. } => {
                    let message = stream.next().await?;
                    match message.get_payload::<String>() {
                        Ok(payload) => return Some(payload),
                        Err(error) => tracing::warn!(%error, "ignoring a change event that is not text"),
                    }
                }
                SubscriptionInner::Cluster { pushes, .. } => {
                    let push = pushes.recv().await?;
                    match push.kind {
                        // [channel, payload]
                        PushKind::Message => match push.data.get(1).map(redis::from_redis_value_ref::<String>) {
                            Some(Ok(payload)) => return Some(payload),
                            _ => tracing::warn!("ignoring a change event that is not text"),
                        },
                        // The cluster connection re-subscribes by itself
                        // after a node drops; a disconnect is only news.
                        PushKind::Disconnection => {
                            tracing::warn!("a Redis cluster node of the event subscription dropped")
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    /// Whether the subscription's connection still answers (a peer that
    /// vanished without closing the connection is found this way).
    pub async fn ping(&mut self) -> bool {
        match &mut self.0 {
            SubscriptionInner::PubSub { sink, .. } => sink.ping::<Value>().await.is_ok(),
            SubscriptionInner::Cluster { connection, .. } => {
                redis::cmd("PING").query_async::<Value>(connection).await.is_ok()
            }
        }
    }
}

/// A handle for commands on whichever Redis is configured; implements
/// `ConnectionLike`, so `query_async` and scripts take it. Cheap to clone.
#[derive(Clone)]
pub struct RedisConnection(Inner);

#[derive(Clone)]
enum Inner {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(SentinelPrimary),
}

impl RedisConnection {
    /// Keys matching `pattern` (a `SCAN … MATCH` pattern), over every primary
    /// of a cluster. Walks the keyspace: for metrics and tests, not requests.
    pub async fn count_keys(&mut self, pattern: &str) -> RedisResult<usize> {
        if let Inner::Cluster(connection) = &mut self.0 {
            // One script per primary, the counts summed by the client.
            let mut count = redis::cmd("EVAL");
            count.arg(COUNT_KEYS_SCRIPT).arg(0).arg(pattern);
            let routing = RoutingInfo::MultiNode((
                MultipleNodeRoutingInfo::AllMasters,
                Some(ResponsePolicy::Aggregate(AggregateOp::Sum)),
            ));
            let total = connection.route_command(count, routing).await?;
            return Ok(redis::from_redis_value::<usize>(total)?);
        }
        let mut cursor = 0u64;
        let mut count = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(self)
                .await?;
            count += keys.len();
            if next == 0 {
                return Ok(count);
            }
            cursor = next;
        }
    }
}

/// Counts the keys matching `ARGV[1]` on the node it runs on.
const COUNT_KEYS_SCRIPT: &str = r#"
local cursor, count = "0", 0
repeat
    local reply = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
    cursor = reply[1]
    count = count + #reply[2]
until cursor == "0"
return count
"#;

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let span = tracing::info_span!(
            target: TRACE_SPANS,
            "redis",
            otel.name = %format!("redis {}", command_name(cmd)),
            otel.kind = "client",
            db.system.name = "redis",
        );
        let sent = match &mut self.0 {
            Inner::Single(connection) => connection.req_packed_command(cmd),
            Inner::Cluster(connection) => connection.req_packed_command(cmd),
            Inner::Sentinel(primary) => Box::pin(primary.command(cmd)),
        };
        if span.is_disabled() { sent } else { Box::pin(sent.instrument(span)) }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let span = tracing::info_span!(
            target: TRACE_SPANS,
            "redis",
            otel.name = "redis pipeline",
            otel.kind = "client",
            db.system.name = "redis",
            db.operation.batch.size = pipeline.len(),
        );
        let sent = match &mut self.0 {
            Inner::Single(connection) => connection.req_packed_commands(pipeline, offset, count),
            Inner::Cluster(connection) => connection.req_packed_commands(pipeline, offset, count),
            Inner::Sentinel(primary) => Box::pin(primary.pipeline(pipeline, offset, count)),
        };
        if span.is_disabled() { sent } else { Box::pin(sent.instrument(span)) }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Inner::Single(connection) => connection.get_db(),
            Inner::Cluster(connection) => connection.get_db(),
            Inner::Sentinel(_) => 0,
        }
    }
}

/// A command's name (`GET`, `EVALSHA`, …) for its span: the first
/// argument, never the keys or values after it.
fn command_name(cmd: &Cmd) -> String {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(name)) => String::from_utf8_lossy(name).to_ascii_uppercase(),
        _ => "command".into(),
    }
}

/// The primary Sentinel names: a connection manager to it, replaced by one
/// to whatever Sentinel names next after a command fails.
#[derive(Clone)]
struct SentinelPrimary {
    sentinel: Arc<Mutex<SentinelClient>>,
    current: Arc<RwLock<Option<ConnectionManager>>>,
    timeout: Duration,
}

impl SentinelPrimary {
    /// Asks the sentinels for the primary and connects to it (bounded).
    async fn resolve(&self) -> RedisResult<ConnectionManager> {
        let timeout = self.timeout;
        let connect = async {
            let client = self.sentinel.lock().await.async_get_client().await?;
            client.get_connection_manager_with_config(manager_config(timeout)).await
        };
        let manager = within(timeout * 2, connect).await?;
        *self.current.write().await = Some(manager.clone());
        Ok(manager)
    }

    async fn connection(&self) -> RedisResult<ConnectionManager> {
        if let Some(manager) = self.current.read().await.clone() {
            return Ok(manager);
        }
        self.resolve().await
    }

    /// A failed command may mean the primary moved (a failover made it a
    /// replica, which answers writes with READONLY, or it is gone): forget
    /// it, so the next command asks the sentinels again. The failed command
    /// is not retried — it may have landed.
    async fn forget_on(&self, error: &RedisError) {
        let moved = error.is_io_error()
            || error.is_timeout()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || error.code() == Some("READONLY")
            || error.code() == Some("MASTERDOWN");
        if moved {
            *self.current.write().await = None;
        }
    }

    async fn command(&self, cmd: &Cmd) -> RedisResult<Value> {
        let mut manager = self.connection().await?;
        let result = manager.req_packed_command(cmd).await;
        if let Err(error) = &result {
            self.forget_on(error).await;
        }
        result
    }

    async fn pipeline(&self, pipeline: &Pipeline, offset: usize, count: usize) -> RedisResult<Vec<Value>> {
        let mut manager = self.connection().await?;
        let result = manager.req_packed_commands(pipeline, offset, count).await;
        if let Err(error) = &result {
            self.forget_on(error).await;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: Option<&str>, cluster: &[&str], sentinels: &[&str], master: Option<&str>) -> RedisConfig {
        RedisConfig {
            url: url.map(Into::into),
            cluster_nodes: cluster.iter().map(|s| s.to_string()).collect(),
            sentinels: sentinels.iter().map(|s| s.to_string()).collect(),
            sentinel_master: master.map(Into::into),
            ..RedisConfig::default()
        }
    }

    #[test]
    fn one_shape_of_redis_at_a_time() {
        assert_eq!(RedisTarget::from_config(&config(None, &[], &[], None)).unwrap(), None);
        assert_eq!(
            RedisTarget::from_config(&config(Some("redis://a"), &[], &[], None)).unwrap(),
            Some(RedisTarget::Single("redis://a".into()))
        );
        assert_eq!(
            RedisTarget::from_config(&config(None, &["redis://a", "redis://b"], &[], None)).unwrap(),
            Some(RedisTarget::Cluster(vec!["redis://a".into(), "redis://b".into()]))
        );
        assert_eq!(
            RedisTarget::from_config(&config(None, &[], &["redis://s"], Some("m"))).unwrap(),
            Some(RedisTarget::Sentinel { sentinels: vec!["redis://s".into()], master: "m".into() })
        );
        let both = RedisTarget::from_config(&config(Some("redis://a"), &["redis://b"], &[], None)).unwrap_err();
        assert!(both.to_string().contains("not several"), "{both}");
        let nameless = RedisTarget::from_config(&config(None, &[], &["redis://s"], None)).unwrap_err();
        assert!(nameless.to_string().contains("redis.sentinel_master"), "{nameless}");
        let orphan = RedisTarget::from_config(&config(None, &[], &[], Some("m"))).unwrap_err();
        assert!(orphan.to_string().contains("redis.sentinels is empty"), "{orphan}");
    }

    #[test]
    fn passwords_stay_out_of_what_is_shown() {
        let shown = RedisTarget::Single("redis://user:secret@host:6379".into()).to_string();
        assert!(!shown.contains("secret") && shown.contains("host"), "{shown}");
    }
}
