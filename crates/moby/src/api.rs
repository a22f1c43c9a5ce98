//! Versioned API paths: every request of a dial goes to `/v{X}/…`, `X`
//! being the `Api-Version` header of the dial's `/_ping` (moby and Podman
//! send it on every response), or `DOCKER_API_VERSION` when set. A path is
//! unversioned only while no version is known (`/_ping` itself, or an
//! engine whose ping carries no usable header): moby answers an unversioned
//! path with its own newest version, so the semantics are the same, and the
//! socket proxies that allow only `/v1.NN/…` let every request through.

use std::borrow::Cow;
use std::fmt;

use crate::location::host::{ConfigError, Host, TlsEnv};

/// An API version, `MAJOR.MINOR` (`1.41`), ordered as versions are.
///
/// Its fields are public and complete by nature (the Docker API's versions
/// are `MAJOR.MINOR`): it can be built as a literal or with
/// [`ApiVersion::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion {
    /// `1`.
    pub major: u16,
    /// `41`.
    pub minor: u16,
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl ApiVersion {
    /// The version `major.minor`.
    pub const fn new(major: u16, minor: u16) -> Self {
        Self { major, minor }
    }

    /// Parses `1.41` (or `v1.41`, as the docker CLI accepts in
    /// `DOCKER_API_VERSION`): `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let (major, minor) = s.split_once('.')?;
        let digits =
            |p: &str| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit());
        if !digits(major) || !digits(minor) {
            return None;
        }
        Some(Self {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    /// `DOCKER_API_VERSION`, when set (non-empty): the version every
    /// request uses, whatever the engine's ping says.
    pub(crate) fn from_env() -> Result<Option<Self>, ConfigError> {
        let Some(value) = std::env::var("DOCKER_API_VERSION")
            .ok()
            .filter(|v| !v.is_empty())
        else {
            return Ok(None);
        };
        Self::parse(&value)
            .map(Some)
            .ok_or(ConfigError::InvalidApiVersion { value })
    }
}

/// Where a dial's requests go: the host, its TLS settings, and the API
/// version its paths carry (`None`: unversioned).
#[derive(Debug, Clone)]
pub(crate) struct Api {
    pub(crate) host: Host,
    pub(crate) tls: TlsEnv,
    pub(crate) version: Option<ApiVersion>,
    /// How the engine is started, said when its socket does not answer.
    pub(crate) hint: Option<&'static str>,
}

impl Api {
    /// The host, unversioned until [`versioned`](Self::versioned).
    pub(crate) fn new(host: Host, tls: TlsEnv) -> Self {
        Self {
            host,
            tls,
            version: None,
            hint: None,
        }
    }

    /// The same host, with how its engine is started (said when it does
    /// not answer).
    pub(crate) fn hint(mut self, hint: Option<&'static str>) -> Self {
        self.hint = hint;
        self
    }

    /// The same host, its paths under `/v{version}`.
    pub(crate) fn versioned(mut self, version: Option<ApiVersion>) -> Self {
        self.version = version;
        self
    }

    /// `path_and_query` as it is sent: under `/v{X}` when a version is
    /// known, except `/_ping` (which every engine and proxy answers
    /// unversioned, and which tells the version).
    pub(crate) fn path<'a>(&self, path_and_query: &'a str) -> Cow<'a, str> {
        match self.version {
            Some(v) if path_and_query != "/_ping" && path_and_query.starts_with('/') => {
                Cow::Owned(format!("/v{v}{path_and_query}"))
            }
            _ => Cow::Borrowed(path_and_query),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        let v = |major, minor| Some(ApiVersion { major, minor });
        assert_eq!(ApiVersion::parse("1.41"), v(1, 41));
        assert_eq!(ApiVersion::parse("v1.52"), v(1, 52));
        assert_eq!(ApiVersion::parse(" 1.5 "), v(1, 5));
        for bad in [
            "", "1", "1.", ".41", "1.41.0", "a.b", "1.-4", "1.41x", "99999.1",
        ] {
            assert_eq!(ApiVersion::parse(bad), None, "{bad}");
        }
        assert_eq!(v(1, 41).map(|v| v.to_string()).as_deref(), Some("1.41"));
        assert!(ApiVersion::parse("1.9") < ApiVersion::parse("1.41"));
    }

    #[test]
    fn paths_are_versioned_once_known() {
        let api = Api::new(Host::Unix("/s".into()), TlsEnv::default());
        assert_eq!(api.path("/events?since=1"), "/events?since=1");
        let api = api.versioned(ApiVersion::parse("1.41"));
        assert_eq!(api.path("/events?since=1"), "/v1.41/events?since=1");
        assert_eq!(
            api.path("/containers/json?all=1"),
            "/v1.41/containers/json?all=1"
        );
        assert_eq!(api.path("/_ping"), "/_ping");
    }
}
