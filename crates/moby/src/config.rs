//! What a watch of an engine speaking the Docker API is told ([`Config`]):
//! where the engine is, the label filter, the watch's settings, readiness
//! and the API version.

use std::time::Duration;

use lookout_core::{Labels, WatchConfig};

use crate::api::ApiVersion;

/// What to watch on an engine speaking the Docker API (`DockerConfig`,
/// `PodmanConfig`, `SwarmConfig`).
///
/// Made with [`Config::default`] and the builder methods below, each
/// taking and returning the config
/// (`Config::default().host("unix:///run/docker.sock").label("app", "web")`);
/// the fields are private, so a new option is a new method. Each field's
/// meaning is documented on its builder method; `get_*` methods read it back.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) host: Option<String>,
    pub(crate) context: Option<String>,
    pub(crate) labels: Labels,
    pub(crate) watch: WatchConfig,
    pub(crate) readiness: bool,
    pub(crate) readiness_poll: Duration,
    pub(crate) api_version: Option<ApiVersion>,
}

/// The default of [`Config::readiness_poll`]: 5 s.
pub const READINESS_POLL: Duration = Duration::from_secs(5);

/// No host nor context (the engine as its CLI finds it), no label filter,
/// [`WatchConfig::default`], readiness off (polled every
/// [`READINESS_POLL`] when turned on), the API version from each dial's
/// `/_ping`.
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
    /// The engine's address: `unix:///path`, `tcp://host:port`,
    /// `http://host[:port]`, `https://host[:port]` or
    /// `ssh://[user@]host[:port][/socket-path]` (through the system `ssh`,
    /// see [`SshTarget`](crate::SshTarget); `npipe://` is not supported).
    ///
    /// Unset (the default): as the engine's CLI finds it
    /// ([`Endpoint`](crate::Endpoint): Docker's `DOCKER_HOST`,
    /// `DOCKER_CONTEXT`, `currentContext`, its default socket; Podman's
    /// `CONTAINER_HOST`, its sockets), resolved once, when the watch is made.
    /// TLS (`https://`, or `tcp://` with `DOCKER_TLS_VERIFY` or `DOCKER_TLS`
    /// set) reads `ca.pem`, `cert.pem` and `key.pem` from `DOCKER_CERT_PATH`
    /// (default: `DOCKER_CONFIG`, else `~/.docker`; a named context's: its
    /// store) on every connection and verifies the server, except as the
    /// docker CLI does not: `DOCKER_TLS` without `DOCKER_TLS_VERIFY`, or a
    /// context with `SkipTLSVerify` (no `ca.pem` read; a warning once per
    /// watch). A host that cannot be parsed is the watch's
    /// [`ConfigError`](crate::ConfigError).
    #[must_use]
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// A docker context (Podman: a connection) to watch
    /// ([`Endpoint`](crate::Endpoint)), whatever `DOCKER_HOST`,
    /// `DOCKER_CONTEXT` and `currentContext` say: the docker CLI's
    /// `--context` (podman's `--connection`). Together with
    /// [`host`](Self::host) the watch fails
    /// ([`ConfigError::ContextAndHost`](crate::ConfigError::ContextAndHost)).
    /// Unset by default.
    #[must_use]
    pub fn context(mut self, name: impl Into<String>) -> Self {
        self.context = Some(name.into());
        self
    }

    /// Adds a label that containers (services) must carry: only those
    /// carrying every label added (or set by [`labels`](Self::labels)) are
    /// watched. None by default: every container (service).
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

    /// Sets the label filter: only the containers (services) carrying all
    /// of `labels` are watched (replaces those added before).
    #[must_use]
    pub fn labels(mut self, labels: Labels) -> Self {
        self.labels = labels;
        self
    }

    /// The reconnect, probe and resync settings ([`WatchConfig::default`]
    /// by default).
    #[must_use]
    pub fn watch_config(mut self, watch: WatchConfig) -> Self {
        self.watch = watch;
        self
    }

    /// Also report whether each running instance can serve
    /// ([`EventKind::Ready`](lookout_core::EventKind::Ready) /
    /// [`Unready`](lookout_core::EventKind::Unready), with the detail in
    /// each event's [`readiness`](lookout_core::InstanceEvent::readiness)).
    /// Default off: without it the stream is what it always was.
    #[must_use]
    pub fn readiness(mut self, on: bool) -> Self {
        self.readiness = on;
        self
    }

    /// With [`readiness`](Self::readiness), how often an engine whose
    /// events do not tell readiness is asked (Swarm:
    /// `GET /services?status=true`). Default [`READINESS_POLL`] (5 s); at
    /// least 100 ms.
    #[must_use]
    pub fn readiness_poll(mut self, every: Duration) -> Self {
        self.readiness_poll = every;
        self
    }

    /// Pins the API version of every request's path (`/v1.41/…`). Unset
    /// (the default): `DOCKER_API_VERSION` when set, else the `Api-Version`
    /// that each dial's `GET /_ping` answers (unversioned paths only when
    /// the engine sends none).
    #[must_use]
    pub fn api_version(mut self, version: ApiVersion) -> Self {
        self.api_version = Some(version);
        self
    }

    /// The host given ([`host`](Self::host)); `None`: as the engine's CLI
    /// finds it.
    #[must_use]
    pub fn get_host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The context (connection) pinned ([`context`](Self::context)).
    #[must_use]
    pub fn get_context(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// The label filter ([`label`](Self::label), [`labels`](Self::labels));
    /// empty: every container (service).
    #[must_use]
    pub fn get_labels(&self) -> &Labels {
        &self.labels
    }

    /// The watch's settings ([`watch_config`](Self::watch_config)).
    #[must_use]
    pub fn get_watch_config(&self) -> &WatchConfig {
        &self.watch
    }

    /// Whether readiness is watched ([`readiness`](Self::readiness)).
    #[must_use]
    pub fn get_readiness(&self) -> bool {
        self.readiness
    }

    /// How often readiness is polled where it must be
    /// ([`readiness_poll`](Self::readiness_poll)), as set (the watch takes
    /// at least 100 ms).
    #[must_use]
    pub fn get_readiness_poll(&self) -> Duration {
        self.readiness_poll
    }

    /// The API version pinned ([`api_version`](Self::api_version)); `None`:
    /// `DOCKER_API_VERSION`, else each dial's `/_ping`.
    #[must_use]
    pub fn get_api_version(&self) -> Option<ApiVersion> {
        self.api_version
    }
}
