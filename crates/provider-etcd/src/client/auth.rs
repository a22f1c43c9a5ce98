//! etcd's authentication: a user's [`Credentials`], the token etcd gave
//! for them ([`Auth`], shared by a client's clones), and what etcd says
//! about tokens. The client authenticates before its first request and
//! again, once, when etcd refuses a token (`Client::authed`).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::ConfigError;

/// etcd's message for a token it does not know (expired, or from before a
/// restart of the member).
pub(crate) const INVALID_TOKEN: &str = "invalid auth token";
/// Where a user's password is exchanged for a token.
pub(crate) const AUTHENTICATE: &str = "/v3/auth/authenticate";
/// etcd's answer to an authentication while auth is disabled.
pub(crate) const AUTH_NOT_ENABLED: &str = "authentication is not enabled";
/// etcd's message for a request without a user while auth is enabled.
pub(crate) const USER_EMPTY: &str = "user name is empty";
/// gRPC's `Unauthenticated`.
pub(crate) const UNAUTHENTICATED: i32 = 16;

/// A user's name and password for etcd's authentication. `Debug` shows the
/// name only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub(crate) user: String,
    pub(crate) password: String,
}

impl Credentials {
    /// `user` with `password`.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            password: password.into(),
        }
    }

    /// `user` with the password in the file at `path` (its first line,
    /// without the line's end): a password is never a command-line argument.
    pub fn from_file(user: impl Into<String>, path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::PasswordFile {
            path: path.to_owned(),
            source,
        })?;
        let password = text.lines().next().unwrap_or_default();
        Ok(Self::new(user, password))
    }

    /// The user's name.
    pub fn user(&self) -> &str {
        &self.user
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The credentials of a client and the token etcd gave for them (shared
/// by the client's clones).
pub(crate) struct Auth {
    pub(crate) credentials: Credentials,
    token: Mutex<Option<Arc<str>>>,
}

impl Auth {
    /// `credentials`, no token yet.
    pub(crate) fn new(credentials: Credentials) -> Self {
        Self {
            credentials,
            token: Mutex::new(None),
        }
    }

    /// The token etcd gave, once it did.
    pub(crate) fn token(&self) -> Option<Arc<str>> {
        self.token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Keeps the token etcd gave.
    pub(crate) fn set_token(&self, token: Arc<str>) {
        *self.token.lock().unwrap_or_else(PoisonError::into_inner) = Some(token);
    }
}

/// `/v3/auth/authenticate`'s answer.
#[derive(serde::Deserialize)]
pub(crate) struct Authenticated {
    #[serde(default)]
    pub(crate) token: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_read_their_file_and_never_show_the_password() {
        let path = std::env::temp_dir().join(format!("lookout-etcd-pw-{}", std::process::id()));
        std::fs::write(&path, "pa ss\nignored\n").expect("written");
        let c = Credentials::from_file("ops", &path).expect("read");
        let _ = std::fs::remove_file(&path);
        assert_eq!(c, Credentials::new("ops", "pa ss"));
        assert_eq!(c.user(), "ops");
        let shown = format!("{c:?}");
        assert!(shown.contains("ops") && !shown.contains("pa ss"), "{shown}");
        let client = crate::client::connection::Client::new(
            vec![crate::client::endpoint::EtcdEndpoint::parse("x:1").expect("parses")],
            std::time::Duration::from_secs(1),
        )
        .expect("a client")
        .with_credentials(Some(c));
        assert!(!format!("{client:?}").contains("pa ss"));
        assert!(matches!(
            Credentials::from_file("ops", std::path::Path::new("/nonexistent/pw")),
            Err(ConfigError::PasswordFile { .. })
        ));
    }
}
