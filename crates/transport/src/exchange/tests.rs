//! The exchange against a server on a unix socket: a `GET`, a `POST` with
//! its body and headers, the body limit, and the socket closed on drop.

use super::*;
use bytes::Bytes;
use http::header;
use http_body_util::{Empty, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// A listening unix socket in the temp dir, removed on drop.
struct Listening {
    path: std::path::PathBuf,
    listener: UnixListener,
}

impl Listening {
    fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "lookout-transport-{test}-{}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).expect("a socket");
        Self { path, listener }
    }

    async fn accept(&self) -> UnixStream {
        self.listener.accept().await.expect("a connection").0
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads a request: its head, then `body` more bytes.
async fn read_request(conn: &mut UnixStream, body: usize) -> String {
    let mut request = Vec::new();
    while !request.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        conn.read_exact(&mut byte).await.expect("the request");
        request.push(byte[0]);
    }
    let mut rest = vec![0u8; body];
    conn.read_exact(&mut rest)
        .await
        .expect("the request's body");
    request.extend(rest);
    String::from_utf8_lossy(&request).into_owned()
}

#[tokio::test(flavor = "current_thread")]
async fn a_get_and_its_body() {
    let listening = Listening::new("get");
    let server = async {
        let mut conn = listening.accept().await;
        let request = read_request(&mut conn, 0).await;
        conn.write_all(b"HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Length: 2\r\n\r\nOK")
            .await
            .expect("the response");
        request
    };
    let client = async {
        let socket = Socket::unix(&listening.path).await?;
        let request = Request::get("/_ping")
            .header(header::HOST, "localhost")
            .header(header::USER_AGENT, USER_AGENT)
            .body(Empty::<Bytes>::new())
            .expect("a request");
        let exchange = send(socket, request).await?;
        assert_eq!(exchange.status(), StatusCode::OK);
        assert_eq!(exchange.headers()["api-version"], "1.41");
        exchange.body(64).await
    };
    let (request, body) = tokio::join!(server, client);
    assert!(request.starts_with("GET /_ping HTTP/1.1\r\n"), "{request}");
    assert!(request.contains("user-agent: lookout/"), "{request}");
    assert_eq!(body.expect("an exchange").as_ref(), b"OK");
}

#[tokio::test(flavor = "current_thread")]
async fn a_post_sends_its_body_and_headers() {
    let listening = Listening::new("post");
    let json = r#"{"key":"a"}"#;
    let server = async {
        let mut conn = listening.accept().await;
        let request = read_request(&mut conn, json.len()).await;
        conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope")
            .await
            .expect("the response");
        request
    };
    let client = async {
        let socket = Socket::unix(&listening.path).await?;
        let request = Request::post("/v3/kv/range")
            .header(header::HOST, "localhost")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(json)))
            .expect("a request");
        let exchange = send(socket, request).await?;
        assert_eq!(exchange.status(), StatusCode::NOT_FOUND);
        exchange.body(64).await
    };
    let (request, body) = tokio::join!(server, client);
    assert!(
        request.starts_with("POST /v3/kv/range HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(
        request.contains("content-type: application/json"),
        "{request}"
    );
    assert!(request.ends_with(json), "{request}");
    assert_eq!(body.expect("an exchange").as_ref(), b"nope");
}

#[tokio::test(flavor = "current_thread")]
async fn a_body_past_its_limit_fails() {
    let listening = Listening::new("limit");
    let server = async {
        let mut conn = listening.accept().await;
        read_request(&mut conn, 0).await;
        let _ = conn
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789")
            .await;
    };
    let client = async {
        let socket = Socket::unix(&listening.path).await?;
        let request = Request::get("/")
            .header(header::HOST, "localhost")
            .body(Empty::<Bytes>::new())
            .expect("a request");
        send(socket, request).await?.body(4).await
    };
    let ((), body) = tokio::join!(server, client);
    let err = body.expect_err("10 bytes past a limit of 4");
    assert!(
        matches!(err, TransportError::TooLarge { limit: 4 }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_the_exchange_closes_the_socket() {
    let listening = Listening::new("drop");
    let socket = Socket::unix(&listening.path).await.expect("connected");
    let mut conn = listening.accept().await;
    let request = Request::get("/events")
        .header(header::HOST, "localhost")
        .body(Empty::<Bytes>::new())
        .expect("a request");
    let server = async {
        read_request(&mut conn, 0).await;
        // A streamed body that never ends.
        conn.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n")
            .await
            .expect("the head");
    };
    let (exchange, ()) = tokio::join!(send(socket, request), server);
    let mut exchange = exchange.expect("the head");
    assert_eq!(
        exchange
            .chunk()
            .await
            .expect("a chunk")
            .expect("data")
            .as_ref(),
        b"hi"
    );
    drop(exchange);
    let mut rest = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        conn.read_to_end(&mut rest),
    )
    .await
    .expect("closed at once");
    assert_eq!(read.expect("the end of the connection"), 0);
}
