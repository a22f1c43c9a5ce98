//! One member's client address, [`EtcdEndpoint`]: `http://HOST:PORT` or
//! `https://HOST:PORT` (TLS), parsed from what a user gives.

use std::fmt;

use crate::error::ConfigError;

/// One member's client address: `http://HOST:PORT`, or `https://HOST:PORT`
/// (TLS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdEndpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: bool,
}

impl EtcdEndpoint {
    /// Parses `http://HOST[:PORT]`, `https://HOST[:PORT]` or `HOST[:PORT]`
    /// (port 2379 by default).
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        let bad = |why: &str| ConfigError::Endpoint {
            endpoint: s.to_owned(),
            why: why.to_owned(),
        };
        let t = s.trim();
        let (t, tls) = match t.strip_prefix("https://") {
            Some(rest) => (rest, true),
            None => (t.strip_prefix("http://").unwrap_or(t), false),
        };
        let t = t.trim_end_matches('/');
        if t.is_empty() || t.contains('/') || t.contains("://") {
            return Err(bad(
                "expected http://HOST:PORT, https://HOST:PORT or HOST:PORT",
            ));
        }
        let (host, port) = match t.rsplit_once(':') {
            // `[::1]:2379`, `host:2379`; a bare IPv6 address has more colons.
            Some((h, p)) if !h.contains(':') || h.ends_with(']') => {
                let port = p.parse().map_err(|_| bad("the port is no number"))?;
                (h, port)
            }
            _ => (t, 2379),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            tls,
        })
    }

    /// The same member over TLS (`https://`).
    #[must_use]
    pub fn with_tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Whether it is an `https://` endpoint.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// Parses a comma-separated list (empty items skipped); at least one.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, ConfigError> {
        let list = s
            .split(',')
            .filter(|e| !e.trim().is_empty())
            .map(Self::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err(ConfigError::NoEndpoint);
        }
        Ok(list)
    }

    /// `HOST:PORT` (`[IPV6]:PORT`): the `Host` header.
    pub(crate) fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for EtcdEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}", self.authority())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        let list = EtcdEndpoint::parse_list("http://127.0.0.1:12371, 127.0.0.1:12372,,etcd")
            .expect("parses");
        let shown: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "http://127.0.0.1:12371",
                "http://127.0.0.1:12372",
                "http://etcd:2379"
            ]
        );
        assert_eq!(
            EtcdEndpoint::parse("[::1]:2379")
                .map(|e| e.to_string())
                .ok(),
            Some("http://[::1]:2379".to_owned())
        );
        assert_eq!(
            EtcdEndpoint::parse("https://x:2379")
                .map(|e| e.to_string())
                .ok(),
            Some("https://x:2379".to_owned())
        );
        assert!(EtcdEndpoint::parse("https://x:2379").is_ok_and(|e| e.is_tls()));
        assert!(EtcdEndpoint::parse("ftp://x:2379").is_err());
        assert!(EtcdEndpoint::parse("http://x:port").is_err());
        assert!(EtcdEndpoint::parse("http://x:1/path").is_err());
        assert!(matches!(
            EtcdEndpoint::parse_list(" , "),
            Err(ConfigError::NoEndpoint)
        ));
    }
}
