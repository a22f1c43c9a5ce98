//! What to watch, and how ([`EtcdConfig`]): the endpoints, the prefix and
//! sources, readiness, the request bound, the core's settings, credentials
//! and TLS.

use std::time::Duration;

use lookout_core::WatchConfig;

use crate::client::auth::Credentials;
use crate::client::endpoint::EtcdEndpoint;
use crate::client::tls::Tls;
use crate::error::ConfigError;
use crate::model;

/// What to watch, and how: [`EtcdConfig::new`] with the endpoints, then
/// the builder methods.
///
/// ```
/// use std::time::Duration;
/// use lookout_etcd::EtcdConfig;
///
/// # fn main() -> Result<(), lookout_etcd::ConfigError> {
/// let config = EtcdConfig::new("127.0.0.1:2379,127.0.0.1:22379")?
///     .prefix("lookout")
///     .sources(["host-a"])
///     .readiness(true)
///     .request_timeout(Duration::from_secs(3));
/// assert_eq!(config.get_endpoints().len(), 2);
/// assert_eq!(config.get_sources(), ["host-a"]);
/// # Ok(())
/// # }
/// ```
///
/// Each option is set by a method of its name taking `self`, and read back
/// by `get_` and its name (as clap's builders): a new option is a new
/// method.
#[derive(Clone, Debug)]
pub struct EtcdConfig {
    endpoints: Vec<EtcdEndpoint>,
    prefix: String,
    sources: Vec<String>,
    readiness: bool,
    request_timeout: Duration,
    watch: WatchConfig,
    credentials: Option<Credentials>,
    tls: Option<Tls>,
}

impl EtcdConfig {
    /// A configuration for `endpoints` (`http://HOST:PORT`,
    /// `https://HOST:PORT` or `HOST:PORT`, comma-separated; tried in
    /// order), the rest by default.
    pub fn new(endpoints: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            endpoints: EtcdEndpoint::parse_list(endpoints)?,
            prefix: model::DEFAULT_PREFIX.to_owned(),
            sources: Vec::new(),
            readiness: false,
            request_timeout: Duration::from_secs(5),
            watch: Self::default_watch(),
            credentials: None,
            tls: None,
        })
    }

    /// The key prefix the publishers write under (default
    /// [`model::DEFAULT_PREFIX`]; trailing `/`s are ignored, an empty one is
    /// a [`ConfigError::Name`] of [`watch`](crate::watch)).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The sources to read, replacing any before (default none: every
    /// source under the prefix). A name that is empty or holds a `/` is a
    /// [`ConfigError::Name`] of [`watch`](crate::watch).
    #[must_use]
    pub fn sources(mut self, sources: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.sources = sources.into_iter().map(Into::into).collect();
        self
    }

    /// Tell readiness (the records' `ready`) and `Ready`/`Unready`
    /// (default off).
    #[must_use]
    pub fn readiness(mut self, on: bool) -> Self {
        self.readiness = on;
        self
    }

    /// The bound of each request (connect and answer) and of a watch's
    /// creation (default 5 s).
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The core's settings (default [`EtcdConfig::default_watch`]).
    #[must_use]
    pub fn watch_config(mut self, watch: WatchConfig) -> Self {
        self.watch = watch;
        self
    }

    /// The user to authenticate as, when etcd's auth is enabled (default
    /// none). Its `Debug` redacts the password.
    #[must_use]
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// The CA (and client certificate) `https://` endpoints are verified
    /// with (default none: an `https://` endpoint then fails to connect,
    /// [`EtcdError::NoCa`](crate::EtcdError::NoCa)).
    #[must_use]
    pub fn tls(mut self, tls: Tls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The cluster's members, in the order they are tried.
    pub fn get_endpoints(&self) -> &[EtcdEndpoint] {
        &self.endpoints
    }

    /// The key prefix ([`prefix`](Self::prefix)), as given.
    pub fn get_prefix(&self) -> &str {
        &self.prefix
    }

    /// The sources read ([`sources`](Self::sources)); empty: every source.
    pub fn get_sources(&self) -> &[String] {
        &self.sources
    }

    /// Whether readiness is told ([`readiness`](Self::readiness)).
    pub fn get_readiness(&self) -> bool {
        self.readiness
    }

    /// The bound of each request ([`request_timeout`](Self::request_timeout)).
    pub fn get_request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The core's settings ([`watch_config`](Self::watch_config)).
    pub fn get_watch_config(&self) -> &WatchConfig {
        &self.watch
    }

    /// The user authenticated as ([`credentials`](Self::credentials)); `None`: no auth.
    pub fn get_credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// The TLS of `https://` endpoints ([`tls`](Self::tls)); `None`: none.
    pub fn get_tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// The configuration, taken apart for the watch: its core settings.
    pub(crate) fn into_watch_config(self) -> WatchConfig {
        self.watch
    }

    /// The core's defaults without periodic or lag relist: etcd's watch
    /// resumes from its revision and says when it cannot.
    pub fn default_watch() -> WatchConfig {
        WatchConfig::default()
            .resync_every(None)
            .resync_after_lag(None)
    }
}
