//! The requests whose answers lookout reads itself, each read to a bound:
//! a list page ([`list`], at most the page limit), a `GET` of one object or
//! of `/version` ([`get`]) and an error answer (its first
//! [`ERROR_KEPT`] bytes). kube's `Client::request` collects a body whole,
//! whatever its size; these send the request with `Client::send` (the
//! client's own middleware, auth and connections) and stop reading past
//! their bound. A watch's body is read line by line (`events.rs`).

use std::pin::pin;

use bytes::Bytes;
use http_body_util::BodyExt;
use kube::Client;
use kube::api::ListParams;
use kube::client::Body;
use kube::core::{ObjectList, Status};
use serde::de::DeserializeOwned;

use crate::limit::ReadToBound;

/// How much of an error answer is read (a `Status` is far smaller; a proxy's
/// page is cut there).
pub(crate) const ERROR_KEPT: usize = 64 * 1024;

/// The reason kube gives a `Status` it made of an error body that was no
/// `Status` (`error.rs` tells such a one by it).
pub(crate) const NOT_A_STATUS: &str = "Failed to parse error data";

/// Sends `request` (marked [`ReadToBound`]: the answer is read here, to a
/// bound); an answer of `4xx` or `5xx` is the error it states
/// (`kube::Error::Api`), as kube's own requests report it: its `Status`, or
/// one made of its text ([`NOT_A_STATUS`]), of which at most
/// [`ERROR_KEPT`] bytes are read.
pub(crate) async fn send(
    client: &Client,
    request: http::Request<Vec<u8>>,
) -> kube::Result<http::Response<Body>> {
    let mut request = request.map(Body::from);
    request.extensions_mut().insert(ReadToBound);
    let response = client.send(request).await?;
    let code = response.status();
    if !code.is_client_error() && !code.is_server_error() {
        return Ok(response);
    }
    let text = match read(response.into_body(), ERROR_KEPT).await? {
        Read::Whole(all) | Read::Cut(all) => all,
    };
    let status = serde_json::from_slice::<Status>(&text).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(&text);
        Status::failure(text.trim(), NOT_A_STATUS).with_code(code.as_u16())
    });
    tracing::debug!(?status, "unsuccessful");
    Err(kube::Error::Api(status.boxed()))
}

/// A body as far as it was read.
enum Read {
    /// The whole body.
    Whole(Vec<u8>),
    /// Its first bytes, up to the limit: the rest was not read.
    Cut(Vec<u8>),
}

/// Reads `body` up to `limit` bytes; the buffer never grows past the limit.
async fn read(body: Body, limit: usize) -> kube::Result<Read> {
    let mut all = Vec::new();
    let mut body = pin!(body);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        let len = all.len() + data.len();
        if len > limit {
            let room = limit - all.len();
            all.extend_from_slice(&data[..room]);
            return Ok(Read::Cut(all));
        }
        if len > all.capacity() {
            // Doubling, as a `Vec` grows, but never past the limit.
            let cap = len.max(all.capacity() * 2).min(limit);
            all.reserve_exact(cap - all.len());
        }
        all.extend_from_slice(&data);
    }
    Ok(Read::Whole(all))
}

/// An answer read to its bound.
pub(crate) enum Answer<T> {
    /// The whole answer, decoded.
    Read(T),
    /// The answer was longer than the bound; the rest of it was not read.
    TooLarge,
}

/// Sends `request` and decodes its answer, read to `limit` bytes.
async fn fetch<T: DeserializeOwned>(
    client: &Client,
    request: http::Request<Vec<u8>>,
    limit: usize,
) -> kube::Result<Answer<T>> {
    let response = send(client, request).await?;
    match read(response.into_body(), limit).await? {
        Read::Whole(all) => serde_json::from_slice(&all)
            .map(Answer::Read)
            .map_err(kube::Error::SerdeError),
        Read::Cut(_) => Ok(Answer::TooLarge),
    }
}

/// One page of the list of `url` (a resource's path, as `Api::resource_url`),
/// read to `limit` bytes.
pub(crate) async fn list<K: DeserializeOwned + Clone>(
    client: &Client,
    url: &str,
    params: &ListParams,
    limit: usize,
) -> kube::Result<Answer<ObjectList<K>>> {
    let mut request = kube::core::Request::new(url)
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("list");
    fetch(client, request, limit).await
}

/// `GET path` (an object's, or `/version`), read to `limit` bytes.
pub(crate) async fn get<T: DeserializeOwned>(
    client: &Client,
    path: &str,
    limit: usize,
) -> kube::Result<Answer<T>> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    fetch(client, request, limit).await
}

/// The body's chunks, as a stream (for the lines of a watch).
pub(crate) fn chunks(
    response: http::Response<Body>,
) -> impl tokio_stream::Stream<Item = kube::Result<Bytes>> + Send + Unpin {
    response.into_body().into_data_stream()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(chunks: &[&'static [u8]]) -> Body {
        Body::from(chunks.concat())
    }

    #[test]
    fn a_body_is_read_to_its_limit_and_no_further() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let exact = read(body(&[b"12345678"]), 8).await.expect("read");
            assert!(matches!(exact, Read::Whole(b) if b == b"12345678"));
            let over = read(body(&[b"123456789"]), 8).await.expect("read");
            assert!(matches!(over, Read::Cut(b) if b == b"12345678"));
        });
    }
}
