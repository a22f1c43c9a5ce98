//! `ssh://[user@]host[:port][/socket-path]`, as the docker CLI's connection
//! helper (`cli/connhelper`) does it: each connection is one child process
//! of the system `ssh`, running the engine's own CLI on the remote host to
//! proxy its API socket (`docker [--host unix://PATH] system dial-stdio`;
//! Podman: `podman [--url unix://PATH] system dial-stdio`), its stdin and
//! stdout the connection.
//!
//! The argv is the docker CLI's (23 and later; 20.10 passes neither
//! `ConnectTimeout` nor `-T`, and takes no socket path), plus `-o
//! BatchMode=yes` (a watcher never prompts for a password or a host key):
//! `ssh "-o ConnectTimeout=30" "-o BatchMode=yes" -T [-l user] [-p port] --
//! host docker [--host unix:///path] system dial-stdio` (each `-o` one
//! argument, as the docker CLI passes it), with the full environment, so the
//! user's ssh configuration and agent apply. The child and its connection
//! are `lookout-transport`'s ([`lookout_transport::SshStream`]): dropping
//! the connection kills it; what ssh writes on its stderr (up to 4 KiB) is
//! said in the error of a request that fails on the connection.

use lookout_transport::{Socket, TransportError};

/// Where an `ssh://` host leads: the SSH destination and the engine's socket
/// on it. Read from a [`Host::Ssh`](crate::Host::Ssh) (made by
/// [`Host::parse`](crate::Host::parse) or an endpoint's resolution);
/// `#[non_exhaustive]`: a field may be added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SshTarget {
    /// `-l user`.
    pub user: Option<String>,
    /// The host (a name the user's ssh configuration may know).
    pub host: String,
    /// `-p port`.
    pub port: Option<u16>,
    /// The engine's socket on the remote host (`None`: its CLI's default).
    pub socket: Option<String>,
    /// The CLI run remotely: `docker` or `podman`.
    pub cli: &'static str,
    /// `-i key` (a Podman connection's identity, `CONTAINER_SSHKEY`).
    pub identity: Option<std::path::PathBuf>,
}

impl SshTarget {
    /// Parses what follows `ssh://`: `[user@]host[:port][/path]`; `Err` with
    /// why (a password, a query or a fragment are refused, as the docker CLI
    /// refuses them).
    pub(crate) fn parse(rest: &str) -> Result<Self, &'static str> {
        if rest.contains(['?', '#']) {
            return Err("an ssh:// host takes no query or fragment");
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((user, _)) if user.contains(':') => {
                return Err("an ssh:// host takes no password (use keys or the agent)");
            }
            Some(("", _)) => return Err("empty user name"),
            Some((user, hostport)) => (Some(user.to_owned()), hostport),
            None => (None, authority),
        };
        let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or("unclosed [ in an IPv6 address")?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .and_then(|p| p.parse().ok())
                        .ok_or("invalid port")?,
                ),
            };
            (host, port)
        } else {
            match hostport.split_once(':') {
                Some((h, p)) => (h, Some(p.parse().map_err(|_| "invalid port")?)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err("missing host name");
        }
        let socket = match path {
            "" | "/" => None,
            p => Some(p.to_owned()),
        };
        Ok(Self {
            user,
            host: host.to_owned(),
            port,
            socket,
            cli: "docker",
            identity: None,
        })
    }

    /// ssh's arguments (the program is `ssh`).
    pub fn argv(&self) -> Vec<String> {
        // One argument each, as the docker CLI passes its ConnectTimeout.
        let mut args: Vec<String> = ["-o ConnectTimeout=30", "-o BatchMode=yes", "-T"]
            .map(str::to_owned)
            .to_vec();
        if let Some(key) = &self.identity {
            args.extend(["-i".to_owned(), key.display().to_string()]);
        }
        if let Some(user) = &self.user {
            args.extend(["-l".to_owned(), user.clone()]);
        }
        if let Some(port) = self.port {
            args.extend(["-p".to_owned(), port.to_string()]);
        }
        args.extend(["--".to_owned(), self.host.clone(), self.cli.to_owned()]);
        if let Some(socket) = &self.socket {
            let flag = if self.cli == "podman" {
                "--url"
            } else {
                "--host"
            };
            args.extend([flag.to_owned(), quote(&format!("unix://{socket}"))]);
        }
        args.extend(["system".to_owned(), "dial-stdio".to_owned()]);
        args
    }

    /// Starts ssh: a connection to the engine's API.
    pub(crate) fn connect(&self) -> Result<Socket, TransportError> {
        Socket::ssh(self.argv())
    }
}

impl std::fmt::Display for SshTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ssh://")?;
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        if let Some(socket) = &self.socket {
            f.write_str(socket)?;
        }
        Ok(())
    }
}

/// A word as a POSIX shell reads it back (the remote command goes through
/// the remote user's shell): as is when it is made of safe characters,
/// else single-quoted.
fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<SshTarget, &'static str> {
        SshTarget::parse(s)
    }

    #[test]
    fn parses_and_builds_the_docker_clis_argv() {
        let t = parse("me@h:2222/run/x.sock").expect("valid");
        assert_eq!(
            t.argv()[..3],
            ["-o ConnectTimeout=30", "-o BatchMode=yes", "-T"]
        );
        assert_eq!(
            t.argv().join(" "),
            "-o ConnectTimeout=30 -o BatchMode=yes -T -l me -p 2222 -- h docker \
             --host unix:///run/x.sock system dial-stdio"
        );
        assert_eq!(t.to_string(), "ssh://me@h:2222/run/x.sock");
        let t = parse("h").expect("valid");
        assert_eq!(
            t.argv().join(" "),
            "-o ConnectTimeout=30 -o BatchMode=yes -T -- h docker system dial-stdio"
        );
        let mut t = parse("[::1]:22/run/podman/podman.sock").expect("valid");
        t.cli = "podman";
        assert_eq!(t.host, "::1");
        assert_eq!(
            t.argv()[5..].join(" "),
            "-- ::1 podman --url unix:///run/podman/podman.sock system dial-stdio"
        );
        assert_eq!(t.to_string(), "ssh://[::1]:22/run/podman/podman.sock");
        let t = parse("h/run/my sock").expect("valid");
        assert!(t.argv().contains(&"'unix:///run/my sock'".to_owned()));
    }

    #[test]
    fn refuses_what_the_docker_cli_refuses() {
        for bad in ["me:pw@h", "h?x=1", "h#f", "", "@h", "h:port", "[::1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quotes_for_the_remote_shell() {
        assert_eq!(quote("unix:///a/b.sock"), "unix:///a/b.sock");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
