//! The watch of [`Client`]: `POST /v3/watch` with one create request,
//! then its NDJSON lines as they come ([`WatchStream`], which owns the
//! connection: dropping it closes the socket).

use bytes::Bytes;
use http_body_util::Full;
use serde_json::json;

use super::auth::{INVALID_TOKEN, UNAUTHENTICATED};
use super::connection::{Client, Exchange};
use super::lines::Lines;
use super::wire::{WatchCreate, WatchLine, WatchResponse};
use crate::error::EtcdError;

/// The largest watch line (one revision's events with their previous
/// values): beyond it the watch fails ([`EtcdError::TooLarge`]) and the
/// session ends. etcd stores at most `--max-request-bytes` (1.5 MiB by
/// default) a request, and lookout's publishers write one instance a txn:
/// 64 MiB is far past any line they cause, and what the buffer may hold.
const LINE_LIMIT: usize = 64 * 1024 * 1024;

impl Client {
    /// Opens a watch (`POST /v3/watch` with `create`), failing over; resolves
    /// when the response head arrived. The first lines say `created`, or
    /// `canceled` with `compact_revision`.
    pub(crate) async fn watch(&self, create: &WatchCreate) -> Result<WatchStream, EtcdError> {
        let first = Bytes::from(json!({ "create_request": create }).to_string());
        let first = &first;
        let path = "/v3/watch";
        self.authed(|| {
            self.failover(path, move |i| {
                let first = first.clone();
                async move {
                    let ex = self
                        .send(i, http::Method::POST, path, Full::new(first))
                        .await?;
                    let endpoint = self.endpoints()[i].to_string();
                    if !ex.status().is_success() {
                        return Err(EtcdError::Status {
                            endpoint,
                            path: path.to_owned(),
                            status: ex.status().as_u16(),
                            code: 0,
                            message: "the watch was refused".to_owned(),
                        });
                    }
                    let mut stream = WatchStream {
                        exchange: ex,
                        lines: Lines::new(LINE_LIMIT),
                        endpoint,
                        member: i,
                    };
                    if self.has_credentials() {
                        // A watch whose token is refused is created and canceled
                        // at once (HTTP 200): told as the refusal it is, so that
                        // `authed` authenticates again.
                        let endpoint = stream.endpoint.clone();
                        let first = self.bounded(&endpoint, path, stream.peek_line()).await?;
                        if let Ok(WatchLine {
                            result: Some(r), ..
                        }) = serde_json::from_slice::<WatchLine>(&first)
                            && r.canceled
                            && r.cancel_reason.contains(INVALID_TOKEN)
                        {
                            return Err(EtcdError::Status {
                                endpoint,
                                path: path.to_owned(),
                                status: 401,
                                code: UNAUTHENTICATED,
                                message: r.cancel_reason,
                            });
                        }
                    }
                    Ok(stream)
                }
            })
        })
        .await
    }
}

/// What one line of a watch stream says.
#[derive(Debug)]
pub(crate) enum Line {
    /// A watch response.
    Response(WatchResponse),
    /// A line that is no watch response (logged; the feed goes on).
    Undecodable(String),
}

/// An open watch: its NDJSON lines. Dropping it closes the connection.
pub(crate) struct WatchStream {
    exchange: Exchange,
    lines: Lines,
    endpoint: String,
    /// Its index in [`Client::endpoints`].
    member: usize,
}

impl WatchStream {
    /// The first line (kept to be read again by [`Self::next`]); empty when
    /// the stream ended before one.
    async fn peek_line(&mut self) -> Result<Bytes, EtcdError> {
        loop {
            if let Some(line) = self.lines.first() {
                return Ok(Bytes::copy_from_slice(line));
            }
            if self.lines.over() {
                return Ok(Bytes::new());
            }
            if !self.fill().await? {
                return Ok(Bytes::copy_from_slice(self.lines.rest()));
            }
        }
    }

    /// Reads the next chunk into the buffer: `false` when the stream ended.
    async fn fill(&mut self) -> Result<bool, EtcdError> {
        match self.exchange.chunk().await {
            Some(Ok(chunk)) => {
                self.lines.push(&chunk);
                Ok(true)
            }
            Some(Err(source)) => Err(EtcdError::Http {
                endpoint: self.endpoint.clone(),
                path: "/v3/watch".to_owned(),
                source: Box::new(source),
            }),
            None => Ok(false),
        }
    }

    /// The member this watch is on.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The member this watch is on, as an index of [`Client::endpoints`].
    pub(crate) fn member(&self) -> usize {
        self.member
    }

    /// The next line: `None` when the stream ended.
    pub(crate) async fn next(&mut self) -> Result<Option<Line>, EtcdError> {
        loop {
            if let Some(line) = self.lines.take() {
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                return match serde_json::from_slice::<WatchLine>(line) {
                    Ok(WatchLine { error: Some(e), .. }) => Err(EtcdError::WatchError {
                        endpoint: self.endpoint.clone(),
                        code: e.code,
                        message: e.message,
                    }),
                    Ok(WatchLine {
                        result: Some(r), ..
                    }) => Ok(Some(Line::Response(r))),
                    Ok(_) => Ok(Some(Line::Undecodable("neither result nor error".into()))),
                    Err(e) => Ok(Some(Line::Undecodable(e.to_string()))),
                };
            }
            if self.lines.over() {
                return Err(EtcdError::TooLarge {
                    endpoint: self.endpoint.clone(),
                    path: "/v3/watch".to_owned(),
                    limit: LINE_LIMIT,
                });
            }
            if !self.fill().await? {
                if self.lines.is_blank() {
                    return Ok(None);
                }
                // A last line without its newline.
                self.lines.finish();
            }
        }
    }
}
