//! A watch request and its events, read as kube reads them but with each
//! line bounded ([`watch`]): kube's `Api::watch` splits the body with an
//! unbounded `LinesCodec`, so one endless line would grow memory until the
//! process dies. Here the body is split by [`K8sWatchLines`] at the configured
//! limit; a longer line is `kube::Error::LinesCodecMaxLineLengthExceeded`
//! (kube's own error for it), and the feed ends the session on it. Every
//! other line is decoded exactly as kube decodes it: a `WatchEvent`; else,
//! when it is some JSON object, a `Status` (`kube::Error::Api`); else a
//! `kube::Error::SerdeError`; an empty or cut-off line is skipped; a line
//! that is not UTF-8 is a `kube::Error::ReadEvents` of kind `InvalidData`,
//! after which the stream ends. A body cut short (`UnexpectedEof`: the
//! apiserver or a proxy closed a watch mid-chunk) ends the stream quietly,
//! to be resumed; any other failure of the body is a
//! `kube::Error::ReadEvents`, after which the stream ends.

use std::io;
use std::pin::Pin;

use bytes::Bytes;
use kube::Client;
use kube::api::{WatchEvent, WatchParams};
use kube::core::Status;
use serde::de::DeserializeOwned;
use tokio_stream::{Stream, StreamExt};

use crate::fetch::{chunks, send};
use crate::watch_lines::{K8sWatchLines, LineError};

/// The events of one watch request.
pub(crate) type Events<K> = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<K>>> + Send>>;

/// Watches `url` (a resource's path, as `Api::resource_url`) from
/// `version` (`""`: from now, or the list a `sendInitialEvents` watch
/// streams first); each line at most `max_line` bytes. Resolves once the
/// apiserver accepted the watch; an answer of `4xx`/`5xx` is its
/// `kube::Error::Api`, as kube's `Api::watch` reports it.
pub(crate) async fn watch<K>(
    client: &Client,
    url: &str,
    params: &WatchParams,
    version: &str,
    max_line: usize,
) -> kube::Result<Events<K>>
where
    K: DeserializeOwned + Clone + Send + 'static,
{
    let mut request = kube::core::Request::new(url)
        .watch(params, version)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("watch");
    // As kube does: no compressed watch (one gzip member per event is not
    // decoded past the first).
    request
        .headers_mut()
        .entry(http::header::ACCEPT_ENCODING)
        .or_insert(http::HeaderValue::from_static("identity"));
    let response = send(client, request).await?;
    let mut lines = K8sWatchLines::new(chunks(response), max_line);
    Ok(Box::pin(async_stream::stream! {
        while let Some(line) = lines.next().await {
            match line {
                Ok(line) => match decode::<K>(&line) {
                    Some(Err(e @ kube::Error::ReadEvents(_))) => {
                        yield Err(e);
                        return;
                    }
                    Some(event) => yield event,
                    None => {}
                },
                Err(LineError::TooLong) => yield Err(kube::Error::LinesCodecMaxLineLengthExceeded),
                Err(LineError::Body(e)) if cut_short(&e) => {
                    tracing::debug!(error = %e, "watch body cut short: watching again");
                    return;
                }
                Err(LineError::Body(e)) => {
                    yield Err(kube::Error::ReadEvents(io::Error::other(e)));
                    return;
                }
            }
        }
    }))
}

/// One line as kube's `Client::request_events` reads it; `None` when it is
/// skipped (empty, or cut off at the body's end).
fn decode<K: DeserializeOwned>(line: &Bytes) -> Option<kube::Result<WatchEvent<K>>> {
    if let Err(e) = std::str::from_utf8(line) {
        return Some(Err(kube::Error::ReadEvents(io::Error::new(
            io::ErrorKind::InvalidData,
            e,
        ))));
    }
    match serde_json::from_slice::<WatchEvent<K>>(line) {
        Ok(event) => Some(Ok(event)),
        Err(e) if e.is_eof() => None,
        Err(e) => Some(Err(match serde_json::from_slice::<Status>(line) {
            Ok(status) => kube::Error::Api(status.boxed()),
            Err(_) => kube::Error::SerdeError(e),
        })),
    }
}

/// A body that ended before its end (the peer closed a chunked body
/// mid-way, or TLS closed without its notify), as kube tells it: an
/// `UnexpectedEof` in the error's chain, or hyper's "unexpected EOF during
/// chunk".
fn cut_short(e: &kube::Error) -> bool {
    if e.to_string().contains("unexpected EOF during chunk") {
        return true;
    }
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    // HTTP and TLS nest a handful of errors; a cycle stops there.
    for _ in 0..16 {
        let Some(err) = next else {
            return false;
        };
        if let Some(io) = err.downcast_ref::<io::Error>()
            && io.kind() == io::ErrorKind::UnexpectedEof
        {
            return true;
        }
        next = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use kube::core::DynamicObject;

    use super::*;

    fn read(line: &str) -> Option<kube::Result<WatchEvent<DynamicObject>>> {
        decode(&Bytes::copy_from_slice(line.as_bytes()))
    }

    #[test]
    fn lines_decode_as_kube_decodes_them() {
        let added = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}}}"#;
        assert!(matches!(read(added), Some(Ok(WatchEvent::Added(_)))));
        let mark = r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}"#;
        assert!(matches!(read(mark), Some(Ok(WatchEvent::Bookmark(_)))));
        let gone = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}}"#;
        assert!(matches!(read(gone), Some(Ok(WatchEvent::Error(s))) if s.code == 410));
        // A bare Status line: the apiserver's error.
        let status =
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"no","code":500}"#;
        assert!(matches!(read(status), Some(Err(kube::Error::Api(s))) if s.code == 500));
        // No JSON: undecodable; empty or cut off: skipped.
        assert!(matches!(
            read("nope"),
            Some(Err(kube::Error::SerdeError(_)))
        ));
        assert!(read("").is_none());
        assert!(read(r#"{"type":"ADDED","obj"#).is_none());
        // Not UTF-8: the read fails as kube's codec fails it.
        let bad = decode::<DynamicObject>(&Bytes::from_static(b"{\"type\":\"\xff\"}"));
        assert!(matches!(
            bad,
            Some(Err(kube::Error::ReadEvents(e))) if e.kind() == io::ErrorKind::InvalidData
        ));
    }

    #[test]
    fn a_body_cut_short_is_told_apart() {
        let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "closed");
        assert!(cut_short(&kube::Error::Service(Box::new(eof))));
        let reset = io::Error::new(io::ErrorKind::ConnectionReset, "reset");
        assert!(!cut_short(&kube::Error::Service(Box::new(reset))));
        let chunk = io::Error::other("unexpected EOF during chunk size line");
        assert!(cut_short(&kube::Error::Service(Box::new(chunk))));
    }
}
