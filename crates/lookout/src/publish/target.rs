//! What `--publish` names: the target (`etcd[s]://[USER@]HOST:PORT…[/PREFIX]`),
//! its user's credentials, its TLS files, and the default source (this
//! host's name).

use lookout_etcd::model;
use lookout_etcd::{Credentials, EtcdEndpoint as Endpoint, Tls};

/// Where to publish: the endpoints, the prefix and the user of `etcd://…`.
#[derive(Clone, Debug)]
pub struct Target {
    pub endpoints: Vec<Endpoint>,
    pub prefix: String,
    pub user: Option<String>,
}

/// Parses `etcd://[USER@]HOST:PORT[,HOST:PORT…][/PREFIX]`, or `etcds://…`
/// (TLS: every endpoint `https://`).
pub fn parse_target(s: &str) -> Result<Target, String> {
    let (rest, tls) = match (s.strip_prefix("etcd://"), s.strip_prefix("etcds://")) {
        (Some(rest), _) => (rest, false),
        (None, Some(rest)) => (rest, true),
        (None, None) => {
            return Err(format!(
                "`{s}`: expected etcd://[USER@]HOST:PORT[,HOST:PORT...][/PREFIX] (etcds://…: TLS)"
            ));
        }
    };
    // `USER@` before the hosts (an `@` in the prefix is the prefix's).
    let hosts_end = rest.find('/').unwrap_or(rest.len());
    let (user, rest) = match rest[..hosts_end]
        .split_once('@')
        .map(|(u, _)| (u, &rest[u.len() + 1..]))
    {
        Some((u, _)) if u.is_empty() || u.contains(':') || u.contains('/') => {
            return Err(format!(
                "`{s}`: expected USER@ (a password is read from --etcd-password-file, never given here)"
            ));
        }
        Some((u, r)) => (Some(u.to_owned()), r),
        None => (None, rest),
    };
    let (hosts, prefix) = match rest.split_once('/') {
        Some((h, p)) if !prefix_words(p).is_empty() => (h, prefix_words(p)),
        Some((h, _)) => (h, model::DEFAULT_PREFIX),
        None => (rest, model::DEFAULT_PREFIX),
    };
    let endpoints = Endpoint::parse_list(hosts).map_err(|e| format!("`{s}`: {e}"))?;
    if endpoints.iter().any(Endpoint::is_tls) {
        return Err(format!(
            "`{s}`: name members as HOST:PORT (etcds://… for TLS)"
        ));
    }
    let endpoints = if tls {
        endpoints.into_iter().map(Endpoint::with_tls).collect()
    } else {
        endpoints
    };
    Ok(Target {
        endpoints,
        prefix: prefix.to_owned(),
        user,
    })
}

/// A prefix as the command line gives it, without its leading and trailing
/// `/`s: `--prefix /team`, `--prefix team/` and `etcd://HOST:PORT/team` (whose
/// first `/` only ends the hosts) all name the keys `team/…`.
pub fn prefix_words(prefix: &str) -> &str {
    prefix.trim_matches('/')
}

/// The TLS files of `endpoints` (`https://` ones need a CA file, given by
/// the flag `ca_flag`): `None` without a CA file; a CA file without an
/// `https://` endpoint is an error too (said to be useless).
pub fn tls(
    endpoints: &[Endpoint],
    ca: Option<&std::path::Path>,
    identity: Option<(&std::path::Path, &std::path::Path)>,
    ca_flag: &str,
) -> Result<Option<Tls>, String> {
    let https = endpoints.iter().any(Endpoint::is_tls);
    match ca {
        None if https => Err(format!(
            "TLS endpoints need {ca_flag} PATH (the CA that issued the members' certificates)"
        )),
        None => Ok(None),
        Some(_) if !https => Err(format!(
            "{ca_flag} given, but no TLS endpoint (https://… ; for --publish: etcds://…)"
        )),
        Some(ca) => Tls::from_files(ca, identity)
            .map(Some)
            .map_err(|e| e.to_string()),
    }
}

/// The credentials of `target`'s user, the password read from
/// `password_file`: both or neither.
pub fn credentials(
    target: &Target,
    password_file: Option<&std::path::Path>,
) -> Result<Option<Credentials>, String> {
    match (&target.user, password_file) {
        (Some(user), Some(file)) => Credentials::from_file(user.as_str(), file)
            .map(Some)
            .map_err(|e| e.to_string()),
        (Some(user), None) => Err(format!(
            "etcd user `{user}` given without --etcd-password-file"
        )),
        (None, Some(_)) => Err(
            "--etcd-password-file given without a user (--publish etcd://USER@HOST:PORT…)"
                .to_owned(),
        ),
        (None, None) => Ok(None),
    }
}

/// This machine's name (`/proc/sys/kernel/hostname`, else `HOSTNAME`, else
/// `localhost`): the default source.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".to_owned())
}
