//! What a watch of an engine speaking the Docker API is told ([`Config`]):
//! where the engine is, the label filter, the watch's settings, readiness
//! and the API version.

use std::time::Duration;

use lookout_core::{Labels, WatchConfig};

use crate::api::ApiVersion;

/// What to watch on an engine speaking the Docker API (`DockerConfig`,
/// `PodmanConfig`, `SwarmConfig`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// `unix:///path`, `tcp://host:port`, `http://host[:port]`,
    /// `https://host[:port]` or `ssh://[user@]host[:port][/socket-path]`
    /// (through the system `ssh`, see [`SshTarget`](crate::SshTarget); `npipe://` is not
    /// supported).
    /// `None`: as the engine's CLI finds it ([`Endpoint`](crate::Endpoint): Docker's
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
    /// A docker context to watch ([`Endpoint`](crate::Endpoint)), whatever `DOCKER_HOST`,
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
