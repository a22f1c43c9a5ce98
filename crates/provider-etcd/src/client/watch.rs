//! The watch of [`Client`]: `POST /v3/watch` with one create request,
//! then its NDJSON lines as they come ([`WatchStream`], which owns the
//! connection: dropping it closes the socket), split by the core's
//! [`LineSplitter`] at [`LINE_LIMIT`].

use std::borrow::Cow;

use bytes::{Buf, Bytes};
use http_body_util::Full;
use lookout_core::{LineSplitter, SplitLine};
use serde_json::json;

use super::auth::{INVALID_TOKEN, UNAUTHENTICATED};
use super::connection::{Client, Exchange};
use super::wire::{WatchCreate, WatchLine, WatchResponse};
use crate::error::EtcdError;

/// The largest watch line (one revision's events with their previous
/// values): beyond it the watch fails ([`EtcdError::TooLarge`]) and the
/// session ends. etcd stores at most `--max-request-bytes` (1.5 MiB by
/// default) a request, and lookout's publishers write at most 64 instances
/// and 256 KiB of keys and values a txn (a line: those, their previous
/// values, in base64: under 1 MiB): 64 MiB is far past any line they cause,
/// and what the buffer may hold.
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
                        lines: LineSplitter::new(LINE_LIMIT),
                        rest: Bytes::new(),
                        peeked: None,
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

/// What a watch body holds next.
#[derive(Debug)]
enum Pulled {
    /// A line, without its `\n`.
    Line(Bytes),
    /// A line over [`LINE_LIMIT`]: the watch fails.
    TooLong,
    /// The body ended.
    End,
}

/// An open watch: its NDJSON lines. Dropping it closes the connection.
pub(crate) struct WatchStream {
    exchange: Exchange,
    /// The body's lines, each at most [`LINE_LIMIT`].
    lines: LineSplitter,
    /// The unread rest of the last chunk.
    rest: Bytes,
    /// What [`Self::peek_line`] read, for [`Self::next`] to read again.
    peeked: Option<Pulled>,
    endpoint: String,
    /// Its index in [`Client::endpoints`].
    member: usize,
}

impl WatchStream {
    /// The first line (kept to be read again by [`Self::next`]); empty when
    /// the stream ended before one, or it is over the limit.
    async fn peek_line(&mut self) -> Result<Bytes, EtcdError> {
        let pulled = self.pull().await?;
        let first = match &pulled {
            Pulled::Line(line) => line.clone(),
            Pulled::TooLong | Pulled::End => Bytes::new(),
        };
        self.peeked = Some(pulled);
        Ok(first)
    }

    /// The next line of the body (the last one may have no `\n`), or what
    /// ended it.
    async fn pull(&mut self) -> Result<Pulled, EtcdError> {
        if let Some(pulled) = self.peeked.take() {
            return Ok(pulled);
        }
        loop {
            let mut chunk: &[u8] = &self.rest;
            let split = self.lines.split(&mut chunk);
            let consumed = self.rest.len() - chunk.len();
            let pulled = split.map(|split| match split {
                // The whole line in one chunk: lent from it, no copy.
                SplitLine::Line(Cow::Borrowed(line)) => Pulled::Line(self.rest.slice_ref(line)),
                SplitLine::Line(Cow::Owned(line)) => Pulled::Line(Bytes::from(line)),
                SplitLine::TooLong(_) => Pulled::TooLong,
            });
            self.rest.advance(consumed);
            if let Some(pulled) = pulled {
                return Ok(pulled);
            }
            if !self.fill().await? {
                // A last line without its newline.
                return Ok(self
                    .lines
                    .finish()
                    .map_or(Pulled::End, |last| Pulled::Line(Bytes::from(last))));
            }
        }
    }

    /// Reads the next chunk: `false` when the stream ended.
    async fn fill(&mut self) -> Result<bool, EtcdError> {
        match self.exchange.chunk().await {
            Some(Ok(chunk)) => {
                self.rest = chunk;
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
            let line = match self.pull().await? {
                Pulled::Line(line) => line,
                Pulled::TooLong => {
                    return Err(EtcdError::TooLarge {
                        endpoint: self.endpoint.clone(),
                        path: "/v3/watch".to_owned(),
                        limit: LINE_LIMIT,
                    });
                }
                Pulled::End => return Ok(None),
            };
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
    }
}

#[cfg(test)]
mod tests;
