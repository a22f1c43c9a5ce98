//! `--token-file`: every request but `/healthz` and `/` (the static page) carries
//! `Authorization: Bearer <token>`, compared in constant time.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use subtle::ConstantTimeEq;

use super::response::error;

/// Why the token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the token file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {path} is empty")]
    Empty { path: PathBuf },
    #[error("the token file {path} holds more than one line or characters not allowed in a header")]
    Invalid { path: PathBuf },
}

/// The bearer token. Its `Debug` does not show it.
pub struct Token(Box<[u8]>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// Reads the token: the file's content without surrounding whitespace
    /// (a trailing newline is usual); it must be one non-empty line of
    /// visible ASCII (what an `Authorization` header can carry).
    pub fn read(path: &Path) -> Result<Self, TokenError> {
        let text = std::fs::read(path).map_err(|source| TokenError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let token = text.trim_ascii();
        if token.is_empty() {
            return Err(TokenError::Empty {
                path: path.to_path_buf(),
            });
        }
        if !token.iter().all(u8::is_ascii_graphic) {
            return Err(TokenError::Invalid {
                path: path.to_path_buf(),
            });
        }
        Ok(Self(token.into()))
    }

    /// Whether an `Authorization` header value is `Bearer <this token>`.
    pub fn admits(&self, value: Option<&HeaderValue>) -> bool {
        let Some(value) = value else { return false };
        let bytes = value.as_bytes();
        let Some(scheme) = bytes.get(..7) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        // Constant time in the content (a length mismatch is not a secret
        // worth hiding: tokens are random strings of a chosen length).
        bool::from(bytes[7..].trim_ascii().ct_eq(&self.0))
    }
}

/// The middleware: 401 unless the request carries the token (`/healthz`
/// is open, for load balancers and probes, and so is `/`, the static page,
/// which holds no data and asks for the token).
pub async fn require(
    State(token): State<Option<Arc<Token>>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(token) = token else {
        return next.run(req).await;
    };
    // `/healthz` for probes; `/` is the static page, which asks for the token.
    if matches!(req.uri().path(), "/healthz" | "/")
        || token.admits(req.headers().get(header::AUTHORIZATION))
    {
        return next.run(req).await;
    }
    let mut response =
        error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(s: &str) -> Token {
        Token(s.as_bytes().into())
    }

    #[test]
    fn admits_only_the_exact_bearer_token() {
        let t = token("s3cret");
        let h = |s: &'static str| Some(HeaderValue::from_static(s));
        assert!(t.admits(h("Bearer s3cret").as_ref()));
        assert!(t.admits(h("bearer s3cret").as_ref()));
        assert!(!t.admits(h("Bearer s3cre").as_ref()));
        assert!(!t.admits(h("Bearer s3cret2").as_ref()));
        assert!(!t.admits(h("Basic s3cret").as_ref()));
        assert!(!t.admits(h("Bearer").as_ref()));
        assert!(!t.admits(None));
    }

    /// A token wrong at its first byte is refused no faster than one wrong
    /// at its last (a compare that stops at the first difference would be
    /// hundreds of times faster on a 16 KiB token): the best of 5 runs of
    /// 50 compares each, so that noise cannot make it fail.
    #[test]
    fn the_compare_takes_as_long_wrong_at_the_first_byte_as_at_the_last() {
        let secret = "k".repeat(16 * 1024);
        let t = token(&secret);
        let header = |s: String| HeaderValue::from_str(&s).expect("a header value");
        let first = header(format!("Bearer X{}", &secret[1..]));
        let last = header(format!("Bearer {}X", &secret[..secret.len() - 1]));
        let best = |h: &HeaderValue| {
            (0..5)
                .map(|_| {
                    let start = std::time::Instant::now();
                    for _ in 0..50 {
                        assert!(!t.admits(Some(std::hint::black_box(h))));
                    }
                    start.elapsed()
                })
                .min()
                .unwrap_or_default()
        };
        let (a, b) = (best(&first), best(&last));
        let ratio = b.as_secs_f64() / a.as_secs_f64().max(1e-9);
        assert!(
            (0.33..3.0).contains(&ratio),
            "wrong at the first byte: {a:?}, at the last: {b:?}"
        );
    }

    #[test]
    fn reads_one_line_and_rejects_empty_or_odd_files() {
        let dir = std::env::temp_dir().join(format!("lookout-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("t");
        std::fs::write(&file, "abc123\n").expect("write");
        assert_eq!(&*Token::read(&file).expect("token").0, b"abc123");
        std::fs::write(&file, " \n").expect("write");
        assert!(matches!(Token::read(&file), Err(TokenError::Empty { .. })));
        std::fs::write(&file, "a b\n").expect("write");
        assert!(matches!(
            Token::read(&file),
            Err(TokenError::Invalid { .. })
        ));
        assert!(matches!(
            Token::read(&dir.join("missing")),
            Err(TokenError::Read { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn debug_hides_the_token() {
        assert_eq!(format!("{:?}", token("s3cret")), "Token(…)");
    }
}
