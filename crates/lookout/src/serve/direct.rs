//! `GET /events` on a plain connection, streamed without hyper: a
//! connection whose first request is a complete, simple `GET /events` head
//! that would be answered `200` is answered here, and its task then does
//! nothing but write the body's frames as chunks to its socket (one write
//! each, everything ready gathered: see [`EventBody`]) and watch the socket
//! for the client going away. Per delivery that is one task wake-up, one
//! look at the hub and one write, without hyper's dispatcher or axum's
//! boxed body; the connection's token and its socket's read readiness are
//! looked at only once their wakers fired (each through a `Gate`).
//!
//! Everything else goes to hyper untouched (the head is only peeked): a
//! head not whole in the first read, with a body (`Content-Length`,
//! `Transfer-Encoding`), `Upgrade` or `Expect`, pipelined requests after
//! it, not HTTP/1.1, a wrong or missing token, a bad query; so are TLS
//! connections. Their answers (400, 401, 404, 431…) are hyper's and the
//! router's, as before.

use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Uri, header};
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;
use tokio_stream::Stream;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::admission::Ticket;
use super::auth::Token;
use super::events::{self, EventBody};
use super::gate::Gate;
use super::state::State;

/// How much of the first request is looked at: more goes to hyper.
const PEEK: usize = 8 * 1024;

/// At most this many reads of what a streaming client sends (it should
/// send nothing) per poll, before its frames are written.
const READS_PER_POLL: usize = 4;

/// What the direct `/events` path needs of the server.
#[derive(Clone, Debug)]
pub struct Direct {
    pub state: State,
    pub token: Option<Arc<Token>>,
    /// hyper's own limit on header fields (more: hyper answers 431).
    pub max_headers: usize,
}

impl Direct {
    /// Serves the connection when its first request is a plain `GET
    /// /events` that is answered `200` (until the stream ends); else gives
    /// the stream back untouched, for hyper.
    pub async fn serve(&self, stream: TcpStream, ticket: &Ticket) -> Result<(), TcpStream> {
        let mut peeked = vec![0; PEEK];
        let Ok(n) = stream.peek(&mut peeked).await else {
            return Err(stream);
        };
        let Some((len, headers, uri)) = parse(&peeked[..n], self.max_headers) else {
            return Err(stream);
        };
        if let Some(token) = &self.token
            && !token.admits(headers.get(header::AUTHORIZATION))
        {
            return Err(stream);
        }
        let busy = ticket.busy();
        let stop = busy.stop().clone();
        let Ok((body, content_type)) =
            events::open(&self.state, Some(Arc::new(busy)), &headers, &uri)
        else {
            return Err(stream);
        };
        // The token is waited on here, more cheaply.
        let body = body.unwatched();
        // The head, taken off the socket (it is all there: peeked).
        let mut taken = 0;
        while taken < len {
            match stream.try_read(&mut peeked[taken..len]) {
                Ok(0) => return Ok(()),
                Ok(n) => taken += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if stream.readable().await.is_err() {
                        return Ok(());
                    }
                }
                Err(_) => return Ok(()),
            }
        }
        drop(peeked);
        let head = response_head(content_type);
        Streaming {
            stream,
            body,
            pending: Some(Chunk::raw(head)),
            ending: false,
            spare: Vec::new(),
            readable: Gate::default(),
            stopping: Box::pin(stop.cancelled_owned()),
            stop: Gate::default(),
        }
        .await;
        Ok(())
    }
}

/// The request's head length, headers and target, when `buf` holds exactly
/// one whole `GET /events` head of HTTP/1.1 without a body or an upgrade.
fn parse(buf: &[u8], max_headers: usize) -> Option<(usize, HeaderMap, Uri)> {
    let mut slots = vec![httparse::EMPTY_HEADER; max_headers];
    let mut request = httparse::Request::new(&mut slots);
    let httparse::Status::Complete(len) = request.parse(buf).ok()? else {
        return None;
    };
    if len != buf.len() || request.method? != "GET" || request.version? != 1 {
        return None;
    }
    let uri: Uri = request.path?.parse().ok()?;
    if uri.path() != "/events" || uri.scheme().is_some() {
        return None;
    }
    let mut headers = HeaderMap::with_capacity(request.headers.len());
    for h in &*request.headers {
        let name = HeaderName::from_bytes(h.name.as_bytes()).ok()?;
        if [
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::UPGRADE,
            header::EXPECT,
        ]
        .contains(&name)
        {
            return None;
        }
        headers.append(name, HeaderValue::from_bytes(h.value).ok()?);
    }
    Some((len, headers, uri))
}

/// `200`, the headers hyper would send of the router's answer, chunked.
fn response_head(content_type: &str) -> Bytes {
    use std::fmt::Write as _;
    let mut head = format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n");
    for (name, value) in events::HEADERS {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    let _ = write!(
        head,
        "transfer-encoding: chunked\r\ndate: {}\r\n\r\n",
        httpdate::fmt_http_date(SystemTime::now())
    );
    Bytes::from(head)
}

/// A write of at most this many bytes is copied into one buffer.
const FLAT: usize = 4096;

thread_local! {
    /// That buffer, one per worker thread.
    static FLAT_BUFFER: std::cell::RefCell<Vec<u8>> =
        std::cell::RefCell::new(Vec::with_capacity(FLAT));
}

/// At most this many frames in one write (one chunk).
const FRAMES_PER_WRITE: usize = 64;

/// At most about this many bytes in one write: frames beyond wait for the
/// next.
const BYTES_PER_WRITE: usize = 64 * 1024;

/// What one write sends: the frames that were ready, as one chunk (its size
/// line, the frames' shared bytes, its CRLF), or raw bytes (the response
/// head, the last chunk).
struct Chunk {
    /// The size line (hex digits, CRLF): `size[..size_len]`.
    size: [u8; 18],
    size_len: usize,
    frames: Vec<Bytes>,
    /// The frames' bytes.
    framed: usize,
    tail: &'static [u8],
    /// Bytes of it written.
    at: usize,
}

impl Chunk {
    /// An empty chunk, to gather frames into (in `frames`, emptied).
    fn gather(mut frames: Vec<Bytes>) -> Self {
        frames.clear();
        Self {
            size: [0; 18],
            size_len: 0,
            frames,
            framed: 0,
            tail: b"\r\n",
            at: 0,
        }
    }

    fn push(&mut self, frame: Bytes) {
        self.framed += frame.len();
        self.frames.push(frame);
    }

    /// Whether it takes no more frames.
    fn full(&self) -> bool {
        self.frames.len() >= FRAMES_PER_WRITE || self.framed >= BYTES_PER_WRITE
    }

    /// Ready to write: its size line made (hex digits, CRLF), in place.
    fn seal(mut self) -> Self {
        use std::io::Write as _;
        let mut line = std::io::Cursor::new(&mut self.size[..]);
        // 16 hex digits and CRLF fit in its 18 bytes.
        let _ = write!(line, "{:x}\r\n", self.framed);
        self.size_len = usize::try_from(line.position()).unwrap_or(0);
        self
    }

    /// Bytes as they are (the response head).
    fn raw(data: Bytes) -> Self {
        Self {
            size: [0; 18],
            size_len: 0,
            framed: data.len(),
            frames: vec![data],
            tail: b"",
            at: 0,
        }
    }

    /// The last chunk: the body's end.
    fn last() -> Self {
        Self::raw(Bytes::from_static(b"0\r\n\r\n"))
    }

    fn len(&self) -> usize {
        self.size_len + self.framed + self.tail.len()
    }

    /// What is left to write, in `slices` (as many as they hold); how many.
    fn slices<'a>(&'a self, slices: &mut [IoSlice<'a>]) -> usize {
        let mut at = self.at;
        let parts = std::iter::once(&self.size[..self.size_len])
            .chain(self.frames.iter().map(|f| &f[..]))
            .chain(std::iter::once(self.tail))
            .map(|part| rest(part, &mut at))
            .filter(|part| !part.is_empty());
        let mut n = 0;
        for (slot, part) in slices.iter_mut().zip(parts) {
            *slot = IoSlice::new(part);
            n += 1;
        }
        n
    }
}

/// `bytes` past the `at` first of them, `at` less their count.
fn rest<'a>(bytes: &'a [u8], at: &mut usize) -> &'a [u8] {
    let skip = (*at).min(bytes.len());
    *at -= skip;
    &bytes[skip..]
}

/// The rest of the connection: the body's frames written as they come,
/// until it ends (shutdown: the last chunk), the client goes away, or a
/// write fails.
struct Streaming {
    stream: TcpStream,
    body: EventBody,
    /// Being written; the next frame is not taken before it is out (a
    /// client that does not read leaves its subscription unread: it lags).
    pending: Option<Chunk>,
    /// The last chunk is in what is pending: done once it is out.
    ending: bool,
    /// The frames' list of the last write, for the next.
    spare: Vec<Bytes>,
    /// Its read readiness, looked at when it may have changed.
    readable: Gate,
    /// Its token; waited on only when there is nothing to write (and
    /// looked at when it may have changed).
    stopping: Pin<Box<WaitForCancellationFutureOwned>>,
    stop: Gate,
}

impl Future for Streaming {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        // The client went away (or sends what is dropped): until the
        // socket has nothing to read (its waker registered), or a few
        // reads (then this task comes back).
        let mut reads = 0;
        loop {
            match this.readable.poll(cx, |cx| this.stream.poll_read_ready(cx)) {
                None | Some(Poll::Pending) => break,
                Some(Poll::Ready(Err(_))) => return Poll::Ready(()),
                Some(Poll::Ready(Ok(()))) => {
                    if reads == READS_PER_POLL {
                        cx.waker().wake_by_ref();
                        break;
                    }
                    let mut scratch = [0u8; 512];
                    match this.stream.try_read(&mut scratch) {
                        Ok(0) => return Poll::Ready(()),
                        Ok(_) => reads += 1,
                        // Not ready after all: the next look registers.
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return Poll::Ready(()),
                    }
                }
            }
        }
        loop {
            if let Some(chunk) = &mut this.pending {
                let mut slices = [IoSlice::new(&[]); FRAMES_PER_WRITE + 2];
                let n = chunk.slices(&mut slices);
                // A small write from one buffer (a copy, in the worker
                // thread's): the kernel takes one slice for less than
                // several.
                let written = if chunk.len() - chunk.at <= FLAT {
                    FLAT_BUFFER.with_borrow_mut(|flat| {
                        flat.clear();
                        for slice in &slices[..n] {
                            flat.extend_from_slice(slice);
                        }
                        Pin::new(&mut this.stream).poll_write(cx, flat)
                    })
                } else {
                    Pin::new(&mut this.stream).poll_write_vectored(cx, &slices[..n])
                };
                match written {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(_) | Ok(0)) => return Poll::Ready(()),
                    Poll::Ready(Ok(n)) => {
                        chunk.at += n;
                        if chunk.at < chunk.len() {
                            continue;
                        }
                        if let Some(done) = this.pending.take() {
                            this.spare = done.frames;
                        }
                        if this.ending {
                            return Poll::Ready(());
                        }
                    }
                }
            }
            // Every frame ready now, in one chunk.
            let mut chunk = Chunk::gather(std::mem::take(&mut this.spare));
            let end = loop {
                if chunk.full() {
                    break false;
                }
                match Pin::new(&mut this.body).poll_next(cx) {
                    Poll::Ready(Some(Ok(frame))) => chunk.push(frame),
                    Poll::Ready(Some(Err(never))) => match never {},
                    Poll::Ready(None) => break true,
                    Poll::Pending => {
                        let stopping = &mut this.stopping;
                        break matches!(
                            this.stop.poll(cx, |cx| stopping.as_mut().poll(cx)),
                            Some(Poll::Ready(()))
                        );
                    }
                }
            };
            // (At the end, the last chunk goes in the same write.)
            this.ending = end;
            if !chunk.frames.is_empty() {
                let mut sealed = chunk.seal();
                if end {
                    sealed.tail = b"\r\n0\r\n\r\n";
                }
                this.pending = Some(sealed);
            } else if end {
                this.pending = Some(Chunk::last());
            } else {
                this.spare = chunk.frames;
                return Poll::Pending;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(head: &str) -> Option<String> {
        parse(head.as_bytes(), 64).map(|(len, _, uri)| {
            assert_eq!(len, head.len());
            uri.to_string()
        })
    }

    #[test]
    fn only_a_whole_plain_get_of_events_is_taken() {
        let ok = "GET /events?label=a%3Db HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n";
        assert_eq!(parsed(ok).as_deref(), Some("/events?label=a%3Db"));
        for (why, head) in [
            ("not whole", "GET /events HTTP/1.1\r\nHost: x\r\n"),
            (
                "pipelined",
                "GET /events HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            ),
            ("another path", "GET /events/x HTTP/1.1\r\n\r\n"),
            ("another method", "HEAD /events HTTP/1.1\r\n\r\n"),
            ("HTTP/1.0", "GET /events HTTP/1.0\r\n\r\n"),
            (
                "a body",
                "GET /events HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            ),
            (
                "chunked",
                "GET /events HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            ),
            (
                "an upgrade",
                "GET /events HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            ),
            (
                "100-continue",
                "GET /events HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            ),
            ("absolute form", "GET http://x/events HTTP/1.1\r\n\r\n"),
            (
                "a DEL in a value",
                "GET /events HTTP/1.1\r\nX: a\x7fb\r\n\r\n",
            ),
        ] {
            assert_eq!(parsed(head), None, "{why}: hyper's");
        }
        let mut many = String::new();
        for n in 0..65 {
            many.push_str("X-");
            many.push_str(&n.to_string());
            many.push_str(": y\r\n");
        }
        assert_eq!(parsed(&format!("GET /events HTTP/1.1\r\n{many}\r\n")), None);
    }

    /// What is written of a chunk, `at` bytes in: the rest of its bytes.
    fn rest_of(chunk: &Chunk) -> Vec<u8> {
        let mut slices = [IoSlice::new(&[]); FRAMES_PER_WRITE + 2];
        let n = chunk.slices(&mut slices);
        slices[..n].iter().flat_map(|s| s.iter().copied()).collect()
    }

    #[test]
    fn a_chunk_is_its_frames_framed_and_resumes_where_a_write_stopped() {
        let mut chunk = Chunk::gather(Vec::new());
        chunk.push(Bytes::from_static(b"{\"a\":1}\n"));
        chunk.push(Bytes::from_static(b"{\"b\":2}\n"));
        let mut chunk = chunk.seal();
        let whole = b"10\r\n{\"a\":1}\n{\"b\":2}\n\r\n".to_vec();
        assert_eq!(chunk.len(), whole.len());
        for at in 0..=whole.len() {
            chunk.at = at;
            assert_eq!(rest_of(&chunk), whole[at..], "{at} bytes in");
        }
        assert_eq!(rest_of(&Chunk::last()), b"0\r\n\r\n");
        for len in [1, 15, 16, 255, 4096, 65_535, 1 << 20] {
            let mut chunk = Chunk::gather(Vec::new());
            chunk.push(Bytes::from(vec![b'x'; len]));
            let sealed = chunk.seal();
            assert_eq!(
                &sealed.size[..sealed.size_len],
                format!("{len:x}\r\n").as_bytes()
            );
            assert_eq!(sealed.len(), sealed.size_len + len + 2);
        }
        let mut full = Chunk::gather(Vec::new());
        while !full.full() {
            full.push(Bytes::from_static(b"x\n"));
        }
        assert_eq!(full.frames.len(), FRAMES_PER_WRITE);
    }
}
