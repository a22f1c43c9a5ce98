//! The Docker Engine API layer of lookout, which the Docker, Podman and
//! Swarm providers share (as kube-client builds on kube-core's protocol
//! types, each provider is a table over this crate).
//!
//! An engine is a table: the [`Objects`] it watches (containers as a
//! [`Mapping`] describes them, or Swarm's services), their vocabulary and
//! where the engine listens ([`Discovery`]). The rest is here, once, one
//! concern per module — `http` (a request on a socket it owns), `host` and
//! `tls` (where and how to connect), `framing`, `wire` and `cursor` (the
//! `/events` body), `feed` (what each event means), `history` (the replay
//! after a reconnect), `objects`, `mapping` and `containers` (the kinds):
//!
//! - **connecting**: each request gets a connection of its own (unix socket,
//!   TCP, TLS with rustls, or one child process of the system `ssh` for
//!   `ssh://`), driven by whoever polls it: no pool, no spawned task, so
//!   dropping the session or the probe closes its socket (kills its ssh) at
//!   once.
//! - **over ssh** ([`SshTarget`]): as the docker CLI's connection helper,
//!   `ssh "-o ConnectTimeout=30" "-o BatchMode=yes" -T [-l user] [-p port] --
//!   host docker [--host unix:///path] system dial-stdio` (Podman: `podman
//!   [--url unix:///path] system dial-stdio`), the user's ssh configuration
//!   and agent applying. Each request is one ssh process and, unless the
//!   user's ssh configuration shares one (`ControlMaster auto`,
//!   `ControlPath`, `ControlPersist`), one SSH handshake: a dial makes four
//!   in a row (`/_ping`, the history, `/events`, the list), each probe one,
//!   each inspection one; the open `/events` stream holds one ssh for as
//!   long as it streams. Give `dial_timeout` the time of four handshakes.
//!   The endpoint ([`Endpoint`]: given, else as the engine's CLI finds it,
//!   Docker's contexts included) is resolved once, when the watch is made:
//!   a redial never lands on another engine.
//! - **versioned paths** ([`ApiVersion`]): a dial first asks `GET /_ping`
//!   (on a connection of its own) and sends every later request of its
//!   session to `/v{X}/…`, `X` the `Api-Version` header of the answer
//!   ([`Config::api_version`], else `DOCKER_API_VERSION`, pins it instead):
//!   the engine's own version, as an unversioned path means, and what the
//!   socket proxies that allow only `/v1.NN/…` let through. Unversioned only
//!   while no version is known (`/_ping`, or an engine that sends none).
//! - **a session** ([`CompatDial`]): first read the engine's history (on a
//!   redial since the last event seen, on a first dial of the last 2 s)
//!   with a request that ends by itself ([`History`]); then subscribe to `/events` with server-side filters
//!   (the objects' `type`, their actions, the caller's labels when the events
//!   carry labels, and `since` the history's end when the history was kept),
//!   then list the objects (`/containers/json?all=1`, `/services`) with the
//!   caller's label filter, corrected by the history's last word on each
//!   (dockerd's list lags its `die` events); then yield the history's
//!   changes (on a redial that it continues), `ResyncBegin`,
//!   the objects, `ResyncDone`, and the events as they come (those that
//!   raced the list included: the core swallows what it already knows).
//! - **the ordering after a reconnect**: what happened while the feed could
//!   not be seen is told either as the exact transitions (the history holds
//!   the last event seen, so it continues the feed: its events come live,
//!   with the engine's times, before the snapshot) or as the snapshot's net
//!   effect (no proof: the history is dropped and the subscription asks for
//!   nothing of the past), never both; after the snapshot only what the
//!   subscription sees comes live: changes from the reconnect's own requests
//!   on.
//! - **decoding** the `/events` body line by line, so that one bad line costs
//!   one event, never the session: an undecodable line (bad JSON, missing
//!   fields, over 1 MiB) is skipped with one `warn` and yields
//!   [`Observation::Progress`] (with its cursor when its time was readable).
//!   The session never ends because of one, so a redial never replays it in a
//!   loop. Events of another `Type` are skipped quietly.
//! - **what an event means** is the objects' [`KnownObjects`]: a transition,
//!   nothing, or "inspect the object first" (`GET` on a connection of its
//!   own; an object gone meanwhile, or an answer that cannot be used, costs
//!   that event only; a connection failure, or no answer within 30 s, ends
//!   the session).
//! - **the cursor** ([`Cursor`]): the newest `timeNano` seen, and until
//!   when everything is told (a session's snapshot tells every event before
//!   its list answered, so it moves that time on); a redial reads the
//!   history `since` the last event seen (1 µs early, see [`Cursor`]) to
//!   prove continuity, replays only what follows the told time, and a
//!   subscription resumed from the history's end drops what the engine
//!   replays of the events told before it.
//! - **the probe**: `GET /_ping` on a connection of its own.
//! - **API 1.52 and later**: `/events` lines without the legacy `status`,
//!   `id` and `from` (`Action` and `Actor.ID` are read, the legacy fields only
//!   as a fallback), and a body of type `application/jsonl` (the body is
//!   read as lines whatever its type).
//!
//! Containers: the instance id is the container name (without the leading
//! `/`), the `uid` the container id, so a container recreated under the same
//! name is reported `Removed` then `Created`. On a subscription, an event of
//! a container that the snapshot did not list and whose `create` the session
//! has not seen is dropped (it is from before the snapshot; the resync
//! reported the container's end), so an event of an earlier incarnation
//! never stands for the current one.

mod api;
mod connections;
mod containers;
mod cursor;
mod endpoint;
mod error;
mod feed;
mod framing;
mod history;
mod host;
mod http;
mod inspect;
mod mapping;
mod objects;
mod readiness;
mod ssh;
#[cfg(test)]
mod testing;
#[cfg(feature = "tls")]
mod tls;
mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, SystemTime};

use lookout_core::{
    BoxError, Dial, DialFuture, Labels, Listed, Observation, ProbeFuture, Session, Watch,
    WatchConfig,
};
use serde_json::json;
use tracing::Instrument;

pub use api::ApiVersion;
pub use containers::KnownContainers;
pub use cursor::Cursor;
pub use endpoint::{Endpoint, Selected, Source};
pub use error::CompatError;
pub use feed::{Feed, MAX_INSPECTIONS, Step, reinspect_after};
pub use framing::MAX_LINE;
pub use history::History;
pub use host::{ConfigError, Discovery, Host, SshTarget};
pub use inspect::Inspection;
pub use mapping::{HealthTable, Mapping};
pub use objects::{
    Decision, Event, KnownObjects, Objects, ReadinessFrom, Scope, labels_of, matches, string_value,
};
#[cfg(feature = "tls")]
pub use tls::client_config_from_files;

/// What to watch on an engine speaking the Docker API (`DockerConfig`,
/// `PodmanConfig`, `SwarmConfig`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// `unix:///path`, `tcp://host:port`, `http://host[:port]`,
    /// `https://host[:port]` or `ssh://[user@]host[:port][/socket-path]`
    /// (through the system `ssh`, see [`SshTarget`]; `npipe://` is not
    /// supported).
    /// `None`: as the engine's CLI finds it ([`Endpoint`]: Docker's
    /// `DOCKER_HOST`, `DOCKER_CONTEXT`, `currentContext`, its default socket;
    /// Podman's `CONTAINER_HOST`, its sockets), resolved once, when the watch
    /// is made. TLS (`https://`, or `tcp://` with `DOCKER_TLS_VERIFY` or
    /// `DOCKER_TLS` set) reads `ca.pem`, `cert.pem` and `key.pem` from
    /// `DOCKER_CERT_PATH` (default: `DOCKER_CONFIG`, else `~/.docker`; a named
    /// context's: its store) on every connection and verifies the server,
    /// except as the docker CLI does not: `DOCKER_TLS` without
    /// `DOCKER_TLS_VERIFY`, or a context with `SkipTLSVerify` (no `ca.pem`
    /// read; a warning once per watch).
    pub host: Option<String>,
    /// A docker context to watch ([`Endpoint`]), whatever `DOCKER_HOST`,
    /// `DOCKER_CONTEXT` and `currentContext` say: the docker CLI's
    /// `--context`. An error together with [`host`](Self::host).
    pub context: Option<String>,
    /// Only the containers (services) carrying all of these labels.
    pub labels: Labels,
    /// Reconnect, probe and resync settings.
    pub watch: WatchConfig,
    /// Also report whether each running instance can serve
    /// ([`EventKind::Ready`](lookout_core::EventKind::Ready) /
    /// [`Unready`](lookout_core::EventKind::Unready), with the detail in
    /// each event's [`readiness`](lookout_core::InstanceEvent::readiness)).
    /// Default off: without it the stream is what it always was.
    pub readiness: bool,
    /// With [`readiness`](Self::readiness), how often an engine whose events
    /// do not tell readiness is asked (Swarm: `GET /services?status=true`).
    /// Default 5 s.
    pub readiness_poll: Duration,
    /// The API version of every request's path (`/v1.41/…`). `None`:
    /// `DOCKER_API_VERSION` when set, else the `Api-Version` that each
    /// dial's `GET /_ping` answers (unversioned paths only when the engine
    /// sends none).
    pub api_version: Option<ApiVersion>,
}

/// The default of [`Config::readiness_poll`].
pub const READINESS_POLL: Duration = Duration::from_secs(5);

impl Default for Config {
    fn default() -> Self {
        Self {
            host: None,
            context: None,
            labels: Labels::new(),
            watch: WatchConfig::default(),
            readiness: false,
            readiness_poll: READINESS_POLL,
            api_version: None,
        }
    }
}

impl Config {
    /// Sets [`host`](Self::host).
    #[must_use]
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Sets [`context`](Self::context).
    #[must_use]
    pub fn context(mut self, name: impl Into<String>) -> Self {
        self.context = Some(name.into());
        self
    }

    /// Adds a label that containers (services) must carry.
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (key, value) = (key.into(), value.into());
        self.labels = self
            .labels
            .iter()
            .chain([(key.as_str(), value.as_str())])
            .collect();
        self
    }

    /// Sets [`labels`](Self::labels): containers (services) must carry all of them.
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

    /// Sets [`readiness`](Self::readiness).
    #[must_use]
    pub fn readiness(mut self, on: bool) -> Self {
        self.readiness = on;
        self
    }

    /// Sets [`readiness_poll`](Self::readiness_poll).
    #[must_use]
    pub fn readiness_poll(mut self, every: Duration) -> Self {
        self.readiness_poll = every;
        self
    }

    /// Sets [`api_version`](Self::api_version): every request under
    /// `/v{version}`.
    #[must_use]
    pub fn api_version(mut self, version: ApiVersion) -> Self {
        self.api_version = Some(version);
        self
    }
}

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

/// The largest object list accepted (64 MiB: about 100 000 containers).
const MAX_LIST: usize = 64 << 20;

/// How long an inspection may take. The session reads no event meanwhile,
/// and the probe (on a connection of its own) would not notice an engine that
/// answers `/_ping` but not this request: past it, the session ends and the
/// core redials.
const INSPECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Dials an engine's Docker-compatible API; what [`Watch`] drives.
///
/// Made by a provider from its [`Objects`] (by default containers, as a
/// [`Mapping`] describes them): see `lookout_docker::watch`,
/// `lookout_podman::watch` and `lookout_swarm::watch`.
pub struct CompatDial<O: Objects = Mapping> {
    objects: &'static O,
    endpoint: Endpoint,
    scope: Scope,
    /// With readiness, how often a [`ReadinessFrom::Polled`] engine is asked.
    readiness_poll: Duration,
    /// `DOCKER_API_VERSION`, read once: every request's version, instead of
    /// the one each dial's `/_ping` tells.
    api_version: Option<ApiVersion>,
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

    fn label_filter(&self) -> Vec<String> {
        label_filter(&self.scope.labels)
    }

    /// `/events` with the session's filters (the objects' type and actions,
    /// the caller's labels when the events carry them), without `since`.
    fn events_path(&self) -> String {
        let mut filters = json!({ "type": [self.objects.event_type()] });
        let actions = self.objects.actions(self.scope.readiness);
        if !actions.is_empty() {
            filters["event"] = json!(actions);
        }
        if self.objects.labels_in_events() && !self.scope.labels.is_empty() {
            filters["label"] = json!(self.label_filter());
        }
        format!("/events?filters={}", encode(&filters.to_string()))
    }

    fn list_path(&self) -> String {
        list_path(
            self.objects.list_path(self.scope.readiness),
            &self.scope.labels,
            None,
        )
    }
}

/// A label filter's terms (`key=value`).
fn label_filter(labels: &Labels) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// A list `path` with the label filter, and a `health` filter when given.
fn list_path(path: &str, labels: &Labels, health: Option<&str>) -> String {
    let mut filters = serde_json::Map::new();
    if !labels.is_empty() {
        filters.insert("label".to_owned(), json!(label_filter(labels)));
    }
    if let Some(health) = health {
        filters.insert("health".to_owned(), json!([health]));
    }
    let mut path = path.to_owned();
    if !filters.is_empty() {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str("filters=");
        path.push_str(&encode(&serde_json::Value::Object(filters).to_string()));
    }
    path
}

impl<O: Objects> Dial for CompatDial<O> {
    type Cursor = Cursor;

    fn dial(&mut self, resume: Option<&Cursor>) -> DialFuture<Cursor> {
        let objects = self.objects;
        let provider = objects.provider();
        let resume = resume.copied();
        let (host, tls) = (self.endpoint.host.clone(), self.endpoint.tls.clone());
        let hint = self.endpoint.hint;
        let events_path = self.events_path();
        let list_path = self.list_path();
        let scope = self.scope.clone();
        let poll = (scope.readiness && objects.readiness_from() == ReadinessFrom::Polled)
            .then_some(self.readiness_poll);
        let pinned = self.api_version;
        Box::pin(async move {
            let api = versioned(provider, api::Api::new(host, tls).hint(hint), pinned).await?;
            let host = &api.host;
            // What happened while the feed could not be seen: its exact
            // transitions when the engine's history proves it continues the
            // feed, else the snapshot's diff alone tells it.
            let past = history::read(
                objects,
                &scope,
                &api,
                &events_path,
                resume,
                SystemTime::now(),
            )
            .instrument(tracing::debug_span!("conn", provider, %host, request = "history"))
            .await?;
            // Subscribe from the history's end (without one, from now):
            // nothing of the past comes after the snapshot.
            let from = past.as_ref().and_then(|p| p.end);
            tracing::debug!(provider, %host, ?resume, ?from, "subscribing to /events");
            let subscription = from.map_or_else(|| events_path.clone(), |c| since(&events_path, c));
            let events = http::get(&api, &subscription)
                .instrument(tracing::debug_span!("conn", provider, %host, request = "events"))
                .await?
                .ok("/events")
                .await?;
            let path = http::strip_query(&list_path);
            let list = async {
                http::get(&api, &list_path)
                    .await?
                    .ok(path)
                    .await?
                    .body(path, MAX_LIST)
                    .await
            }
            .instrument(tracing::debug_span!("conn", provider, %host, request = "list"))
            .await?;
            let mut listed = objects
                .parse_list(&list, scope.readiness)
                .map_err(|reason| CompatError::List {
                    path: path.to_owned(),
                    reason,
                })?;
            tracing::debug!(provider, objects = listed.len(), "listed");
            if let (true, ReadinessFrom::Health { lists_none }) =
                (scope.readiness, objects.readiness_from())
            {
                readiness::health(objects, lists_none, &api, &scope, &mut listed)
                    .instrument(tracing::debug_span!("conn", provider, %host, request = "health"))
                    .await?;
            }
            if let Some(past) = &past {
                history::correct(&mut listed, &past.last);
            }
            let mut feed = feed::Feed::new(objects, &scope, from, &listed);
            // The snapshot tells everything before its list answered.
            let told = feed.snapshot_at(Cursor::from_system_time(SystemTime::now()));
            let replayed = past.and_then(|p| p.replay).unwrap_or_default();
            let poll = poll.map(|every| readiness::Poll::new(objects, list_path, every));
            Ok(session(
                api,
                provider,
                replayed,
                (listed, told),
                (feed, poll),
                events,
            ))
        })
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

/// The dial's API: its paths under `pinned` (`DOCKER_API_VERSION`), else
/// under the `Api-Version` of a `/_ping` on a connection of its own (and
/// unversioned when the engine sends none).
async fn versioned(
    provider: &'static str,
    api: api::Api,
    pinned: Option<ApiVersion>,
) -> Result<api::Api, CompatError> {
    if let Some(version) = pinned {
        tracing::debug!(provider, host = %api.host, %version, "API version from DOCKER_API_VERSION");
        return Ok(api.versioned(Some(version)));
    }
    let span = tracing::debug_span!("conn", provider, host = %api.host, request = "ping");
    let version = async {
        let ping = http::get(&api, "/_ping").await?.ok("/_ping").await?;
        let version = ping.api_version();
        ping.body("/_ping", 4096).await?;
        Ok::<_, CompatError>(version)
    }
    .instrument(span)
    .await?;
    match version {
        Some(version) => {
            tracing::debug!(provider, host = %api.host, %version, "API version from /_ping");
        }
        None => {
            tracing::warn!(provider, host = %api.host, "/_ping told no Api-Version: unversioned paths");
        }
    }
    Ok(api.versioned(version))
}

/// `events_path` resumed from `cursor`.
fn since(events_path: &str, cursor: Cursor) -> String {
    format!("{events_path}&since={}", cursor.since())
}

/// The session: the history replayed (what was missed, exactly), the
/// snapshot, then the events as they are decoded (each inspection they ask
/// for on a connection of its own, in order), and with a readiness poll the
/// polled readiness between them.
fn session<O: Objects>(
    api: api::Api,
    provider: &'static str,
    replayed: Vec<Observation<Cursor>>,
    (listed, told): (Vec<Listed>, Cursor),
    (mut feed, mut poll): (feed::Feed<O::Known>, Option<readiness::Poll<O>>),
    mut events: http::Exchange,
) -> Session<Cursor> {
    let host = api.host.clone();
    Box::pin(async_stream::stream! {
        for obs in replayed {
            yield Ok(obs);
        }
        yield Ok(Observation::ResyncBegin);
        for l in listed {
            yield Ok(Observation::Listed(l));
        }
        yield Ok(Observation::ResyncDone);
        yield Ok(Observation::Progress(Some(told)));
        let mut out = VecDeque::new();
        'session: loop {
            let next = match &mut poll {
                Some(poll) => poll.next_or(&mut events).await,
                None => readiness::Next::Chunk(events.chunk().await),
            };
            let chunk = match next {
                readiness::Next::Chunk(chunk) => chunk,
                readiness::Next::Poll => {
                    let span = tracing::debug_span!("conn", provider, %host, request = "poll");
                    let Some(poll) = &mut poll else { continue };
                    match poll.run(&api).instrument(span).await {
                        Ok(polled) => {
                            for obs in polled {
                                yield Ok(obs);
                            }
                        }
                        Err(e) => {
                            yield Err(BoxError::from(e));
                            break 'session;
                        }
                    }
                    continue;
                }
            };
            let ended = match chunk {
                Some(Ok(chunk)) => {
                    feed.push(&chunk, &mut out);
                    false
                }
                Some(Err(source)) => {
                    yield Err(BoxError::from(CompatError::Http { path: "/events".to_owned(), source }));
                    break;
                }
                None => {
                    feed.finish(&mut out);
                    true
                }
            };
            while let Some(step) = out.pop_front() {
                match step {
                    feed::Step::Obs(obs) => {
                        if let (Some(poll), Observation::Change(_)) = (&mut poll, &obs) {
                            // A scale, a removal: its readiness is asked soon.
                            poll.soon();
                        }
                        yield Ok(obs);
                    }
                    feed::Step::Inspect { event, path } => {
                        let span = tracing::debug_span!("conn", provider, %host, request = "inspect");
                        match inspect::decide(&mut feed, &api, event, path).instrument(span).await {
                            Ok(obs) => {
                                if let (Some(poll), Observation::Change(_)) = (&mut poll, &obs) {
                                    // A creation, an update that did not
                                    // scale: its readiness is asked soon too.
                                    poll.soon();
                                }
                                yield Ok(obs);
                            }
                            Err(e) => {
                                yield Err(BoxError::from(e));
                                break 'session;
                            }
                        }
                    }
                }
            }
            feed::Step::trim(&mut out);
            if ended {
                // The end of the stream tells the core the feed closed.
                break;
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
        history: History::Until,
        discovery: Discovery {
            host_var: "LOOKOUT_TEST_UNSET_HOST",
            sockets: &[("", "/nonexistent/test.sock")],
            docker_contexts: false,
            podman_connections: false,
            ssh_cli: "docker",
        },
        health: crate::mapping::HealthTable {
            status_in_action: true,
            unhealthy_when_paused: true,
            lists_none: true,
        },
    };

    use crate::testing::percent_decode as decode;

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
            json!({"type": ["container"], "event": ["start", "die"], "label": ["lookout.test=a b&c=d"]})
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
            json!({"type": ["container"], "event": ["start", "die"]})
        );
        assert_eq!(
            filters(true),
            json!({"type": ["container"], "event": ["start", "die", "health_status", "pause", "unpause"]})
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
