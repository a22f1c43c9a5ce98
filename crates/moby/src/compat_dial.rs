//! [`CompatDial`], what a watch of an engine speaking the Docker API dials:
//! the engine's endpoint (resolved once), the watch's scope, its request
//! paths, and its [`Dial`] (a dial opens a session, see `session.rs`; the
//! probe pings); and [`watch`] / [`watch_at`], which make the watch.

use std::fmt;
use std::time::Duration;

use lookout_core::{Dial, DialFuture, Labels, ProbeFuture, Watch};
use tracing::Instrument;

use crate::api::{self, ApiVersion};
use crate::config::{Config, READINESS_POLL};
use crate::error::CompatError;
use crate::http;
use crate::location::endpoint::Endpoint;
use crate::location::host::{ConfigError, Host};
use crate::protocol::cursor::Cursor;
use crate::protocol::mapping::Mapping;
use crate::protocol::objects::{Objects, ReadinessFrom, Scope};
use crate::protocol::requests;
use crate::session;

/// Watches the `objects` (containers as a [`Mapping`] describes them,
/// services…) of an engine speaking the Docker API.
///
/// Fails only when the host (given, or from the discovery's environment
/// variable now) cannot be parsed; an engine that is down is no error: the
/// stream reports it and retries.
pub fn watch<O: Objects>(
    objects: &'static O,
    config: Config,
) -> Result<Watch<CompatDial<O>>, ConfigError> {
    let endpoint = Endpoint::resolve(
        objects.discovery(),
        config.host.as_deref(),
        config.context.as_deref(),
    )?;
    watch_at(objects, endpoint, config)
}

/// [`watch`] of the engine at `endpoint` (resolved by [`Endpoint::resolve`]):
/// the config's [`host`](Config::host) and [`context`](Config::context) are
/// not read.
pub fn watch_at<O: Objects>(
    objects: &'static O,
    endpoint: Endpoint,
    config: Config,
) -> Result<Watch<CompatDial<O>>, ConfigError> {
    let mut dial = CompatDial::with_endpoint(objects, endpoint, config.labels)?
        .readiness(config.readiness, config.readiness_poll);
    if let Some(version) = config.api_version {
        dial = dial.api_version(version);
    }
    Ok(Watch::new(dial, config.watch))
}

/// Dials an engine's Docker-compatible API; what [`Watch`] drives.
///
/// Made by a provider from its [`Objects`] (by default containers, as a
/// [`Mapping`] describes them): see `lookout_docker::watch`,
/// `lookout_podman::watch` and `lookout_swarm::watch`.
pub struct CompatDial<O: Objects = Mapping> {
    pub(crate) objects: &'static O,
    pub(crate) endpoint: Endpoint,
    pub(crate) scope: Scope,
    /// With readiness, how often a [`ReadinessFrom::Polled`](crate::ReadinessFrom::Polled) engine is asked.
    pub(crate) readiness_poll: Duration,
    /// `DOCKER_API_VERSION`, read once: every request's version, instead of
    /// the one each dial's `/_ping` tells.
    pub(crate) api_version: Option<ApiVersion>,
}

impl<O: Objects> fmt::Debug for CompatDial<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompatDial")
            .field("provider", &self.objects.provider())
            .field("endpoint", &self.endpoint)
            .field("labels", &self.scope.labels)
            .field("readiness", &self.scope.readiness)
            .field("readiness_poll", &self.readiness_poll)
            .field("api_version", &self.api_version)
            .finish_non_exhaustive()
    }
}

impl<O: Objects> CompatDial<O> {
    /// A dial for the `objects` of an engine, at `host` (`None`: as the
    /// engine's CLI finds it, now: see [`Endpoint`]), watching the objects
    /// that carry all of `labels`.
    ///
    /// Fails when the host (given, or found) cannot be used, or
    /// `DOCKER_API_VERSION` is set but is no version; a host that does not
    /// answer is no error: the watch reports it and retries.
    // The owned host is the signature it always had.
    #[allow(clippy::needless_pass_by_value)]
    pub fn new(
        objects: &'static O,
        host: Option<String>,
        labels: Labels,
    ) -> Result<Self, ConfigError> {
        let endpoint = Endpoint::resolve(objects.discovery(), host.as_deref(), None)?;
        Self::with_endpoint(objects, endpoint, labels)
    }

    /// A dial for the `objects` of the engine at `endpoint` (resolved by
    /// [`Endpoint::resolve`], e.g. with a pinned docker context): every
    /// dial goes there.
    ///
    /// Fails when `DOCKER_API_VERSION` is set but is no version.
    pub fn with_endpoint(
        objects: &'static O,
        endpoint: Endpoint,
        labels: Labels,
    ) -> Result<Self, ConfigError> {
        tracing::info!(
            provider = objects.provider(),
            host = %endpoint.host,
            from = %endpoint.source,
            "engine endpoint"
        );
        if let Some(why) = &endpoint.tls.skip_verify {
            tracing::warn!(
                provider = objects.provider(),
                host = %endpoint.host,
                why = %why,
                "the engine's TLS certificate is not verified: anyone on the path can pose \
                 as the engine"
            );
        }
        Ok(Self {
            objects,
            endpoint,
            scope: Scope::new(labels, false),
            readiness_poll: READINESS_POLL,
            api_version: ApiVersion::from_env()?,
        })
    }

    /// Also watches readiness (see [`Config::readiness`]), an engine whose
    /// events do not tell it polled `every` (see [`Config::readiness_poll`]).
    #[must_use]
    pub fn readiness(mut self, on: bool, every: Duration) -> Self {
        self.scope.readiness = on;
        self.readiness_poll = every.max(Duration::from_millis(100));
        self
    }

    /// Every request under `/v{version}` (instead of `DOCKER_API_VERSION`,
    /// or each dial's `/_ping`).
    #[must_use]
    pub fn api_version(mut self, version: ApiVersion) -> Self {
        self.api_version = Some(version);
        self
    }

    /// The engine's address: every dial goes there.
    pub fn resolve(&self) -> Result<Host, ConfigError> {
        Ok(self.endpoint.host.clone())
    }

    /// The engine's endpoint, and where it came from.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The provider's table.
    pub fn objects(&self) -> &'static O {
        self.objects
    }

    /// `/events` with the session's filters (the objects' type and actions,
    /// the caller's labels when the events carry them), without `since`.
    pub(crate) fn events_path(&self) -> String {
        requests::events_path(self.objects, &self.scope)
    }

    /// The objects' list, with the caller's label filter.
    pub(crate) fn list_path(&self) -> String {
        requests::list_path(
            self.objects.list_path(self.scope.readiness),
            &self.scope.labels,
            None,
        )
    }
}

impl<O: Objects> Dial for CompatDial<O> {
    type Cursor = Cursor;

    fn dial(&mut self, resume: Option<&Cursor>) -> DialFuture<Cursor> {
        let objects = self.objects;
        let (host, tls) = (self.endpoint.host.clone(), self.endpoint.tls.clone());
        let poll = (self.scope.readiness && objects.readiness_from() == ReadinessFrom::Polled)
            .then_some(self.readiness_poll);
        let opening = session::Opening {
            objects,
            api: api::Api::new(host, tls).hint(self.endpoint.hint),
            pinned: self.api_version,
            scope: self.scope.clone(),
            events_path: self.events_path(),
            list_path: self.list_path(),
            poll,
        };
        let resume = resume.copied();
        Box::pin(async move { session::open(opening, resume).await.map_err(Into::into) })
    }

    fn probe(&mut self) -> Option<ProbeFuture> {
        let (host, tls) = (self.endpoint.host.clone(), self.endpoint.tls.clone());
        let hint = self.endpoint.hint;
        let provider = self.objects.provider();
        Some(Box::pin(async move {
            let span = tracing::debug_span!("conn", provider, %host, request = "ping");
            let api = api::Api::new(host, tls).hint(hint);
            async {
                http::get(&api, "/_ping")
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

#[cfg(test)]
mod tests {
    use super::*;
    use lookout_core::EventKind;

    static TABLE: Mapping = Mapping {
        provider: "test",
        actions: &[("start", EventKind::Started), ("die", EventKind::Stopped)],
        ignored: &[],
        non_label_attributes: &["name"],
        history: History::Until,
        discovery: Discovery {
            host_var: "LOOKOUT_TEST_UNSET_HOST",
            sockets: &[("", "/nonexistent/test.sock")],
            docker_contexts: false,
            podman_connections: false,
            ssh_cli: "docker",
        },
        health: crate::HealthTable {
            status_in_action: true,
            unhealthy_when_paused: true,
            lists_none: true,
            status_in_list: false,
        },
        stops_logged: true,
    };

    use crate::location::discovery::Discovery;
    use crate::protocol::objects::History;
    use crate::protocol::requests::since;
    use crate::testing::percent_decode as decode;
    use serde_json::json;

    #[test]
    fn request_paths_carry_the_filters() {
        let labels = Labels::from([("lookout.test".into(), "a b&c=d".into())]);
        let dial = CompatDial::new(&TABLE, None, labels).expect("default host");
        let events = since(&dial.events_path(), Cursor::from_unix_nanos(2_000_001_000));
        let (path, query) = events.split_once('?').expect("query");
        assert_eq!(path, "/events");
        let (filters, since) = query.split_once("&since=").expect("since");
        assert_eq!(since, "2.000000000");
        let filters: serde_json::Value =
            serde_json::from_str(&decode(filters.strip_prefix("filters=").expect("filters")))
                .expect("json");
        assert_eq!(
            filters,
            json!({"type": ["container"], "event": ["start", "die", "oom"], "label": ["lookout.test=a b&c=d"]})
        );
        assert!(!dial.events_path().contains("since"));
        assert_eq!(
            decode(&dial.list_path()),
            r#"/containers/json?all=1&filters={"label":["lookout.test=a b&c=d"]}"#
        );
        let unfiltered = CompatDial::new(&TABLE, None, Labels::new()).expect("default host");
        assert_eq!(unfiltered.list_path(), "/containers/json?all=1");
    }

    /// With readiness, the subscription also asks for the actions that
    /// tell it; without, it is what it always was.
    #[test]
    fn readiness_adds_its_actions_to_the_event_filter() {
        let filters = |readiness: bool| {
            let dial = CompatDial::new(&TABLE, None, Labels::new())
                .expect("default host")
                .readiness(readiness, READINESS_POLL);
            let path = dial.events_path();
            let (_, filters) = path.split_once("filters=").expect("filters");
            serde_json::from_str::<serde_json::Value>(&decode(filters)).expect("json")
        };
        assert_eq!(
            filters(false),
            json!({"type": ["container"], "event": ["start", "die", "oom"]})
        );
        assert_eq!(
            filters(true),
            json!({"type": ["container"], "event": ["start", "die", "oom", "health_status", "pause", "unpause"]})
        );
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
