//! Inspecting one object (`GET /services/{id}` …) on a connection of its
//! own, for an event that asks for it.

use std::time::Duration;

use lookout_core::Observation;

use crate::api::Api;
use crate::error::CompatError;
use crate::http;
use crate::protocol::cursor::Cursor;
use crate::protocol::event::Event;
use crate::protocol::feed::{Feed, FeedOutput, reinspect_after};
use crate::protocol::inspection::Inspection;
use crate::protocol::objects::KnownObjects;

/// How long an inspection may take. The session reads no event meanwhile,
/// and the probe (on a connection of its own) would not notice an engine that
/// answers `/_ping` but not this request: past it, the session ends and the
/// core redials.
pub(crate) const INSPECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest inspected object accepted.
const MAX_OBJECT: usize = 16 << 20;

/// `GET path` of one object. `Err` when the connection fails or the engine
/// does not answer within `timeout` (the session ends: the engine is in
/// trouble); anything the engine answers is an [`Inspection`].
pub(crate) async fn inspect(
    api: &Api,
    path: &str,
    timeout: Duration,
) -> Result<Inspection, CompatError> {
    tokio::time::timeout(timeout, inspect_now(api, path))
        .await
        .unwrap_or_else(|_| {
            Err(CompatError::Timeout {
                path: http::strip_query(path).to_owned(),
                after: timeout,
            })
        })
}

/// What `event` means, once its object is read at `path` (each read on a
/// connection of its own, bounded by [`INSPECT_TIMEOUT`]) and, while the
/// feed's objects ask for it, read again after a pause. `Err` as
/// [`inspect`]'s.
pub(crate) async fn decide<K: KnownObjects>(
    feed: &mut Feed<K>,
    api: &Api,
    mut event: Event,
    mut path: String,
) -> Result<Observation<Cursor>, CompatError> {
    loop {
        let inspection = inspect(api, &path, INSPECT_TIMEOUT).await?;
        match feed.inspected(event, &inspection) {
            FeedOutput::Obs(obs) => return Ok(obs),
            FeedOutput::Inspect {
                event: again,
                path: at,
            } => {
                tokio::time::sleep(reinspect_after(again.inspections())).await;
                (event, path) = (again, at);
            }
        }
    }
}

async fn inspect_now(api: &Api, path: &str) -> Result<Inspection, CompatError> {
    let name = http::strip_query(path);
    let exchange = http::get(api, path).await?;
    let body = match exchange.ok(name).await {
        Ok(exchange) => exchange.body(name, MAX_OBJECT).await?,
        Err(CompatError::Status { status: 404, .. }) => return Ok(Inspection::Gone),
        Err(CompatError::Status {
            status, message, ..
        }) => {
            return Ok(Inspection::Unusable(format!(
                "GET {name} answered {status}: {message}"
            )));
        }
        Err(e) => return Err(e),
    };
    Ok(match serde_json::from_slice(&body) {
        Ok(object) => Inspection::Found(object),
        Err(e) => Inspection::Unusable(format!("GET {name}: not JSON: {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Inspects `path` with `timeout` on a one-shot engine that answers with
    /// `status` and `body`, or never (until the client hangs up) when
    /// `status` is 0.
    async fn inspect_on(
        status: u16,
        body: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<Inspection, CompatError> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let socket = std::env::temp_dir().join(format!(
            "lookout-moby-inspect-{}-{status}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&socket);
        let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
        let server = async {
            let (mut conn, _) = listener.accept().await.expect("a connection");
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            if status == 0 {
                let _ = conn.read(&mut buf).await;
            } else {
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
            }
        };
        let api = Api::new(
            crate::Host::Unix(socket.clone()),
            crate::location::host::TlsEnv::default(),
        );
        let client = inspect(&api, path, timeout);
        let ((), result) = tokio::join!(server, client);
        let _ = std::fs::remove_file(&socket);
        result
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_inspection_tells_found_gone_unusable_and_hung_apart() {
        let t = Duration::from_secs(5);
        let found = inspect_on(200, r#"{"ID":1}"#, "/things/a", t).await;
        assert_eq!(
            found.expect("answered"),
            Inspection::Found(json!({"ID": 1}))
        );
        let gone = inspect_on(404, r#"{"message":"not found"}"#, "/things/a", t).await;
        assert_eq!(gone.expect("answered"), Inspection::Gone);
        let bad = inspect_on(500, "boom", "/things/a", t).await;
        assert_eq!(
            bad.expect("answered"),
            Inspection::Unusable("GET /things/a answered 500: boom".to_owned())
        );
        let junk = inspect_on(201, "{", "/things/a", t).await;
        assert!(
            matches!(junk.expect("answered"), Inspection::Unusable(e) if e.contains("not JSON"))
        );
        let started = std::time::Instant::now();
        let hung = inspect_on(0, "", "/things/a?x=1", Duration::from_millis(200)).await;
        assert!(
            matches!(&hung, Err(CompatError::Timeout { path, .. }) if path == "/things/a"),
            "{hung:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
