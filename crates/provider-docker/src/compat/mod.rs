//! The Docker-compatible API machinery that Docker, Podman and Swarm share.
//!
//! An engine is a [`Mapping`] (its vocabulary and where it listens); the rest
//! is here, once:
//!
//! - **connecting**: each request gets a connection of its own (unix socket,
//!   TCP, or TLS with rustls), driven by whoever polls it: no pool, no spawned
//!   task, so dropping the session or the probe closes its socket at once.
//!   The host is resolved anew on every dial.
//! - **a session** ([`CompatDial`]): subscribe to `/events` with server-side
//!   filters (`type=container`, the mapped actions, the caller's labels, and
//!   `since` when resuming), then list `/containers/json?all=1` with the same
//!   label filters, then yield `ResyncBegin`, the containers, `ResyncDone`, and
//!   the events as they come (those that raced the list included: the core
//!   swallows what it already knows).
//! - **decoding** the `/events` body line by line, so that one bad line costs
//!   one event, never the session: an undecodable line (bad JSON, unknown
//!   `Type`, missing fields, over 1 MiB) is skipped with one `warn` and yields
//!   [`Observation::Progress`] (with its cursor when its time was readable).
//!   The session never ends because of one, so a redial never replays it in a
//!   loop.
//! - **the cursor** ([`Cursor`]): the event's `timeNano`; a redial passes
//!   `since` (1 µs early, see [`Cursor`]) and drops every event at or before
//!   the cursor: it was seen, and the snapshot may have moved on since.
//! - **coherence with the snapshot**: an event of a container that the
//!   snapshot did not list and whose `create` the session has not seen is
//!   dropped (it is from before the snapshot; the resync reported the
//!   container's end).
//! - **the probe**: `GET /_ping` on a connection of its own.
//!
//! Container identity: the instance id is the container name (without the
//! leading `/`), the `uid` the container id, so a container recreated under
//! the same name is reported `Removed` then `Created`.

mod error;
mod feed;
mod host;
mod http;
mod mapping;
#[cfg(feature = "tls")]
mod tls;

use std::collections::VecDeque;
use std::fmt;

use lookout_core::{
    BoxError, Dial, DialFuture, Labels, Observation, ProbeFuture, Session, Watch, WatchConfig,
};
use serde_json::json;
use tracing::Instrument;

pub use error::CompatError;
pub use feed::Cursor;
pub use host::{ConfigError, Discovery, Host};
pub use mapping::Mapping;

/// What to watch on an engine speaking the Docker API (`DockerConfig`,
/// `PodmanConfig`).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Config {
    /// `unix:///path`, `tcp://host:port`, `http://host[:port]` or
    /// `https://host[:port]` (`ssh://` and `npipe://` are not supported).
    /// `None`: the engine's [`Discovery`] (its environment variable, else its
    /// default sockets), resolved anew on every dial. TLS (`https://`, or
    /// `tcp://` with `DOCKER_TLS_VERIFY` set) reads `ca.pem`, `cert.pem` and
    /// `key.pem` from `DOCKER_CERT_PATH` (default `~/.docker`) on every dial
    /// and always verifies the server.
    pub host: Option<String>,
    /// Only containers carrying all of these labels (filtered by the engine).
    pub labels: Labels,
    /// Reconnect, probe and resync settings.
    pub watch: WatchConfig,
}

impl Config {
    /// Sets [`host`](Self::host).
    #[must_use]
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Adds a label that containers must carry.
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Sets [`labels`](Self::labels): containers must carry all of them.
    #[must_use]
    pub fn labels(mut self, labels: Labels) -> Self {
        self.labels = labels;
        self
    }

    /// Sets [`watch`](Self::watch).
    #[must_use]
    pub fn watch_config(mut self, watch: WatchConfig) -> Self {
        self.watch = watch;
        self
    }
}

/// Watches the containers of the engine `mapping` describes.
///
/// Fails only when the host (given, or from the discovery's environment
/// variable now) cannot be parsed; an engine that is down is no error: the
/// stream reports it and retries.
pub fn watch(mapping: &'static Mapping, config: Config) -> Result<Watch<CompatDial>, ConfigError> {
    let dial = CompatDial::new(mapping, config.host, config.labels)?;
    Ok(Watch::new(dial, config.watch))
}

/// The largest container list accepted (64 MiB: about 100 000 containers).
const MAX_LIST: usize = 64 << 20;

/// Dials an engine's Docker-compatible API; what [`Watch`] drives.
///
/// Made by a provider from its [`Mapping`]: see `lookout_docker::watch` and
/// `lookout_podman::watch`.
pub struct CompatDial {
    mapping: &'static Mapping,
    host: Option<String>,
    labels: Labels,
}

impl fmt::Debug for CompatDial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompatDial")
            .field("provider", &self.mapping.provider)
            .field("host", &self.host)
            .field("labels", &self.labels)
            .finish()
    }
}

impl CompatDial {
    /// A dial for the engine `mapping` describes, at `host` (`None`: discover
    /// it on every dial), watching the containers that carry all of `labels`.
    ///
    /// Fails when the host (given, or from the discovery's environment
    /// variable now) cannot be parsed; a host that does not answer is no
    /// error: the watch reports it and retries.
    pub fn new(
        mapping: &'static Mapping,
        host: Option<String>,
        labels: Labels,
    ) -> Result<Self, ConfigError> {
        let dial = Self {
            mapping,
            host,
            labels,
        };
        dial.resolve()?;
        Ok(dial)
    }

    /// The engine's address as the next dial would resolve it.
    pub fn resolve(&self) -> Result<Host, ConfigError> {
        self.endpoint().map(|(host, _)| host)
    }

    /// The address and the TLS settings, read from the environment now.
    fn endpoint(&self) -> Result<(Host, host::TlsEnv), ConfigError> {
        let tls = host::TlsEnv::from_env();
        let host = host::resolve(self.host.as_deref(), &self.mapping.discovery, &tls)?;
        Ok((host, tls))
    }

    /// The provider's table.
    pub fn mapping(&self) -> &'static Mapping {
        self.mapping
    }

    fn label_filter(&self) -> Vec<String> {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    fn events_path(&self, resume: Option<Cursor>) -> String {
        let actions: Vec<&str> = self.mapping.actions.iter().map(|(a, _)| *a).collect();
        let mut filters = json!({ "type": ["container"], "event": actions });
        if !self.labels.is_empty() {
            filters["label"] = json!(self.label_filter());
        }
        let mut path = format!("/events?filters={}", encode(&filters.to_string()));
        if let Some(cursor) = resume {
            path.push_str("&since=");
            path.push_str(&cursor.since());
        }
        path
    }

    fn list_path(&self) -> String {
        let mut path = "/containers/json?all=1".to_owned();
        if !self.labels.is_empty() {
            let filters = json!({ "label": self.label_filter() });
            path.push_str("&filters=");
            path.push_str(&encode(&filters.to_string()));
        }
        path
    }
}

impl Dial for CompatDial {
    type Cursor = Cursor;

    fn dial(&mut self, resume: Option<&Cursor>) -> DialFuture<Cursor> {
        let mapping = self.mapping;
        let resume = resume.copied();
        let endpoint = self.endpoint();
        let events_path = self.events_path(resume);
        let list_path = self.list_path();
        Box::pin(async move {
            let (host, tls) = endpoint?;
            tracing::debug!(provider = mapping.provider, %host, ?resume, "subscribing to /events");
            let events = http::get(&host, &tls, &events_path)
                .instrument(tracing::debug_span!("conn", provider = mapping.provider, %host, request = "events"))
                .await?
                .ok("/events")
                .await?;
            let list = async {
                http::get(&host, &tls, &list_path)
                    .await?
                    .ok("/containers/json")
                    .await?
                    .body("/containers/json", MAX_LIST)
                    .await
            }
            .instrument(
                tracing::debug_span!("conn", provider = mapping.provider, %host, request = "list"),
            )
            .await?;
            let listed = feed::parse_list(&list, mapping)?;
            tracing::debug!(
                provider = mapping.provider,
                containers = listed.len(),
                "listed"
            );
            let feed = feed::Feed::new(mapping, resume, &listed);
            Ok(session(listed, feed, events))
        })
    }

    fn probe(&mut self) -> Option<ProbeFuture> {
        let endpoint = self.endpoint();
        let provider = self.mapping.provider;
        Some(Box::pin(async move {
            let (host, tls) = endpoint?;
            let span = tracing::debug_span!("conn", provider, %host, request = "ping");
            async {
                http::get(&host, &tls, "/_ping")
                    .await?
                    .ok("/_ping")
                    .await?
                    .body("/_ping", 4096)
                    .await?;
                Ok::<_, CompatError>(())
            }
            .instrument(span)
            .await?;
            Ok(())
        }))
    }
}

/// The session: the snapshot, then the events as they are decoded.
fn session(
    listed: Vec<lookout_core::Listed>,
    mut feed: feed::Feed,
    mut events: http::Exchange,
) -> Session<Cursor> {
    Box::pin(async_stream::stream! {
        yield Ok(Observation::ResyncBegin);
        for l in listed {
            yield Ok(Observation::Listed(l));
        }
        yield Ok(Observation::ResyncDone);
        let mut out = VecDeque::new();
        loop {
            match events.chunk().await {
                Some(Ok(chunk)) => feed.push(&chunk, &mut out),
                Some(Err(source)) => {
                    yield Err(BoxError::from(CompatError::Http { path: "/events".to_owned(), source }));
                    break;
                }
                None => {
                    feed.finish(&mut out);
                    for obs in out.drain(..) {
                        yield Ok(obs);
                    }
                    // The end of the stream tells the core the feed closed.
                    break;
                }
            }
            for obs in out.drain(..) {
                yield Ok(obs);
            }
        }
    })
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved characters).
fn encode(s: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookout_core::EventKind;

    static TABLE: Mapping = Mapping {
        provider: "test",
        actions: &[("start", EventKind::Started), ("die", EventKind::Stopped)],
        ignored: &[],
        non_label_attributes: &["name"],
        discovery: Discovery {
            host_var: "LOOKOUT_TEST_UNSET_HOST",
            sockets: &[("", "/nonexistent/test.sock")],
        },
    };

    fn decode(s: &str) -> String {
        let mut out = Vec::new();
        let mut bytes = s.bytes();
        while let Some(b) = bytes.next() {
            if b == b'%' {
                let hex: String = bytes.by_ref().take(2).map(char::from).collect();
                out.push(u8::from_str_radix(&hex, 16).expect("hex"));
            } else {
                out.push(b);
            }
        }
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn request_paths_carry_the_filters() {
        let labels = Labels::from([("lookout.test".into(), "a b&c=d".into())]);
        let dial = CompatDial::new(&TABLE, None, labels).expect("default host");
        let events = dial.events_path(Some(Cursor::from_unix_nanos(2_000_001_000)));
        let (path, query) = events.split_once('?').expect("query");
        assert_eq!(path, "/events");
        let (filters, since) = query.split_once("&since=").expect("since");
        assert_eq!(since, "2.000000000");
        let filters: serde_json::Value =
            serde_json::from_str(&decode(filters.strip_prefix("filters=").expect("filters")))
                .expect("json");
        assert_eq!(
            filters,
            json!({"type": ["container"], "event": ["start", "die"], "label": ["lookout.test=a b&c=d"]})
        );
        assert!(!dial.events_path(None).contains("since"));
        assert_eq!(
            decode(&dial.list_path()),
            r#"/containers/json?all=1&filters={"label":["lookout.test=a b&c=d"]}"#
        );
        let unfiltered = CompatDial::new(&TABLE, None, Labels::new()).expect("default host");
        assert_eq!(unfiltered.list_path(), "/containers/json?all=1");
    }

    #[test]
    fn a_bad_host_is_a_config_error() {
        let err =
            CompatDial::new(&TABLE, Some("ftp://x".into()), Labels::new()).expect_err("bad scheme");
        assert!(err.to_string().contains("ftp://x"), "{err}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_engine_that_is_down_is_a_dial_error() {
        let mut dial = CompatDial::new(&TABLE, None, Labels::new()).expect("default host");
        let Err(err) = dial.dial(None).await else {
            panic!("dialing a missing socket succeeded");
        };
        assert!(err.to_string().contains("/nonexistent/test.sock"), "{err}");
        let probe = dial.probe().expect("a probe").await;
        assert!(probe.is_err());
    }
}
