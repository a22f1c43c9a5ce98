//! `GET /events`: one hub subscription per client, written as NDJSON (the
//! `--json` event lines) or, for `Accept: text/event-stream`, as
//! Server-Sent Events (events and connection status, a keep-alive comment
//! every 15 s).
//!
//! The response body *is* the subscription: hyper polls it only when it can
//! write to this client's socket, so a client that stops reading leaves
//! only its own subscription unpolled (the hub lags it and resyncs it when
//! it reads again), and a client that goes away drops the body, hence the
//! subscription. The connection's token (cancelled at shutdown) ends the
//! body.
//!
//! Each frame is the hub item's shared bytes: the writer (hyper's queue,
//! or lookout's own writer for a plain connection) gathers what is ready into one write
//! without a copy.
//!
//! Of a server of several engines, the body holds one subscription per
//! engine picked (`?host=`, repeatable; all by default), polled in turn so
//! that none waits behind a busy one; each line and frame says its host.
//! Of `lookout etcd`, an SSE client also gets each source's publisher
//! status (`event: status`, `"host":"SOURCE"`): every source's at first,
//! then each change, once it has read the events before it.
//! There a resuming client (`Last-Event-ID`, `?since=`) gets each engine's
//! present as a resync: positions of several hubs fit no one id.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use lookout_core::{Item, Start, Subscription};
use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;

use super::admission::Busy;
use super::frames::{Filter, Frames};
use super::query::{BadQuery, Query};
use super::state::State;

/// An SSE comment when nothing was sent for this long (proxies and browsers
/// close idle streams; it also finds a vanished client).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How many filtered-out items one poll skips before it yields to the
/// runtime.
const SKIP_BUDGET: usize = 256;

pub async fn handler(
    Extract(s): Extract<State>,
    busy: Option<Extension<Arc<Busy>>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let (body, content_type) = match open(&s, busy.map(|Extension(b)| b), &headers, &uri) {
        Ok(opened) => opened,
        Err(refused) => return refused.into_response(),
    };
    let mut response = (StatusCode::OK, Body::from_stream(body)).into_response();
    let h = response.headers_mut();
    for (name, value) in HEADERS {
        h.insert(name, HeaderValue::from_static(value));
    }
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The headers of every `/events` answer, beside its content type.
pub const HEADERS: [(header::HeaderName, &str); 2] = [
    (header::CACHE_CONTROL, "no-cache"),
    // Tells nginx-like proxies not to buffer the stream.
    (header::HeaderName::from_static("x-accel-buffering"), "no"),
];

/// The body of an `/events` request and its content type, or why it is
/// refused (a bad query: `400`).
pub fn open(
    s: &State,
    busy: Option<Arc<Busy>>,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<(EventBody, &'static str), BadQuery> {
    let allowed = ["initial", "label", "since", "host", "follow"];
    let parsed = Query::parse(uri.query(), &allowed).and_then(|q| {
        let since = q.one("since")?.map(str::to_owned);
        // A stream unless `follow=false` (`flag` checks the value).
        let follow = q.one("follow")?.is_none() || q.flag("follow")?;
        Ok((
            q.flag("initial")?,
            q.labels()?,
            since,
            s.select(&q)?,
            follow,
        ))
    });
    let (initial, filter, since, sources, follow) = parsed?;
    let sse = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    // A reconnecting client: `?since=ID`, or what EventSource sends.
    let resume = since.or_else(|| {
        headers
            .get("last-event-id")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    });
    let several = s.several();
    let subs = sources
        .iter()
        .map(|src| Sub {
            subscription: match &resume {
                Some(_) if several => src.hub.resume(None),
                Some(id) => src.hub.resume(src.frames.place(id)),
                None if initial => src.hub.subscribe(Start::Initial),
                None => src.hub.subscribe(Start::Baseline),
            },
            filter: src.frames.filter(filter.clone()),
            frames: Arc::clone(&src.frames),
            // Statuses are SSE frames only, as the hub's are.
            publishers: src
                .publishers
                .as_ref()
                .filter(|_| sse)
                .map(lookout_etcd::Publishers::changes),
        })
        .collect();
    let body = EventBody {
        subs,
        next: 0,
        sse,
        // The connection's own token when it has one (served through the
        // admission, as always but in unit tests).
        stop: Some(
            busy.as_ref()
                .map_or_else(|| s.shutdown.clone(), |b| b.stop().clone()),
        ),
        keep_alive: sse.then(|| KeepAlive::new(Instant::now())),
        follow,
        _busy: busy,
    };
    let content_type = if sse {
        "text/event-stream"
    } else {
        "application/x-ndjson"
    };
    Ok((body, content_type))
}

/// One engine's part of an `/events` body.
struct Sub {
    subscription: Subscription,
    filter: Arc<Filter>,
    frames: Arc<Frames>,
    /// Of `lookout etcd`, SSE only: each source's publisher status, sent
    /// when the subscription has nothing ready (so after the events the
    /// hub held when it changed: a restarted publisher's `resync` events
    /// before its `connected`).
    publishers: Option<lookout_etcd::PublisherChanges>,
}

impl Sub {
    /// What this client is sent of `item`, if anything: a hub item's shared
    /// bytes, else (told to this client alone) its own.
    fn frame(&self, item: &Item, sse: bool) -> Option<Bytes> {
        match self.subscription.position() {
            Some(p) => self.frames.shared(p, item, &self.filter, sse),
            None => self.frames.encode(None, item, &self.filter, sse),
        }
    }
}

/// The body of one `/events` response.
pub struct EventBody {
    /// One per engine picked, in the server's order.
    subs: Vec<Sub>,
    /// Whose turn is first at the next poll: after the one that yielded.
    next: usize,
    sse: bool,
    /// Ends the body when cancelled. Looked at, not waited on: the
    /// connection's task waits on it (and polls the body once it fires).
    /// `None`: the task ends the body itself.
    stop: Option<CancellationToken>,
    /// SSE only: when the next keep-alive comment is due.
    keep_alive: Option<KeepAlive>,
    /// `?follow=false`: the body ends once nothing more is ready (the
    /// present of `?initial=true`, what a resume replays), so that a script,
    /// or a fuzzer checking the answer against the `OpenAPI` document, gets a
    /// whole response instead of a stream that never ends.
    follow: bool,
    /// Its connection's slot is busy while the stream is open (it is not
    /// shed for a newcomer): the request's mark, kept by the body.
    _busy: Option<Arc<Busy>>,
}

/// An SSE comment after [`KEEP_ALIVE`] of silence. A write notes its time
/// (a clock read); the timer is moved only when it fires early, not at
/// every write.
struct KeepAlive {
    sleep: Pin<Box<Sleep>>,
    last: Instant,
}

impl KeepAlive {
    fn new(now: Instant) -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep_until(now + KEEP_ALIVE)),
            last: now,
        }
    }

    /// Ready when nothing was sent for [`KEEP_ALIVE`].
    fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let due = self.last + KEEP_ALIVE;
            if due <= Instant::now() {
                return Poll::Ready(());
            }
            // Something was sent since it was set: wait from then.
            self.sleep.as_mut().reset(due);
        }
    }
}

impl EventBody {
    /// Without its look at the token (the task that writes it waits on
    /// the token, and ends it).
    pub fn unwatched(mut self) -> Self {
        self.stop = None;
        self
    }

    fn sent(&mut self) {
        if let Some(k) = &mut self.keep_alive {
            k.last = Instant::now();
        }
    }
}

impl Stream for EventBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let n = this.subs.len();
        let mut budget = SKIP_BUDGET;
        loop {
            // A turn: each subscription once, from `next` on.
            let mut pending = 0;
            for k in 0..n {
                let i = (this.next + k) % n;
                let sub = &mut this.subs[i];
                match Pin::new(&mut sub.subscription).poll_next(cx) {
                    Poll::Ready(Some(item)) => {
                        if let Some(frame) = sub.frame(&item, this.sse) {
                            this.next = (i + 1) % n;
                            this.sent();
                            return Poll::Ready(Some(Ok(frame)));
                        }
                        budget -= 1;
                        if budget == 0 {
                            this.next = (i + 1) % n;
                            break;
                        }
                    }
                    // A subscription never ends; should one, so does the response.
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => {
                        if let Some(Poll::Ready(Some(p))) = sub
                            .publishers
                            .as_mut()
                            .map(|changes| Pin::new(changes).poll_next(cx))
                        {
                            this.next = (i + 1) % n;
                            this.sent();
                            return Poll::Ready(Some(Ok(Frames::publisher(&p))));
                        }
                        pending += 1;
                    }
                }
            }
            if budget == 0 {
                break;
            }
            if pending == n {
                // Every one registered this task's waker: nothing to send.
                // (A look at the token here only, once per wait, not per
                // frame: at shutdown the connection's task polls the body.)
                if !this.follow
                    || this
                        .stop
                        .as_ref()
                        .is_some_and(CancellationToken::is_cancelled)
                {
                    return Poll::Ready(None);
                }
                if let Some(k) = &mut this.keep_alive
                    && k.poll_due(cx).is_ready()
                {
                    this.sent();
                    return Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n"))));
                }
                return Poll::Pending;
            }
        }
        // Many items, none for this client: let the others run.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::labels::LabelFilter;
    use lookout_core::{Dial, DialFuture, Listed, Observation, Watch, WatchConfig};
    use tokio_stream::StreamExt;
    use tokio_util::sync::CancellationToken;

    /// An engine with `web` (app=web, running) and `db` (app=db, stopped),
    /// and a quiet feed.
    struct TwoListed;

    impl Dial for TwoListed {
        type Cursor = ();
        fn dial(&mut self, _resume: Option<&()>) -> DialFuture<()> {
            let listed = |id: &str, running| {
                Ok(Observation::Listed(
                    Listed::new(id.into(), running)
                        .labels([("app".to_owned(), id.to_owned())].into()),
                ))
            };
            Box::pin(async move {
                let snapshot = vec![
                    Ok(Observation::ResyncBegin),
                    listed("web", true),
                    listed("db", false),
                    Ok(Observation::ResyncDone),
                ];
                let session = tokio_stream::iter(snapshot).chain(tokio_stream::pending());
                Ok(Box::pin(session) as lookout_core::Session<()>)
            })
        }
    }

    fn body(sse: bool, query: &str, shutdown: &CancellationToken) -> EventBody {
        let hub = Watch::new(TwoListed, WatchConfig::default()).share();
        let q = Query::parse(Some(query), &["initial", "label"]).expect("query");
        let frames = Arc::new(Frames::new("docker", None, 1024, 0xab));
        EventBody {
            subs: vec![Sub {
                subscription: hub.subscribe(Start::Initial),
                filter: frames.filter(q.labels().expect("labels")),
                frames,
                publishers: None,
            }],
            next: 0,
            sse,
            stop: Some(shutdown.clone()),
            _busy: None,
            keep_alive: sse.then(|| KeepAlive::new(Instant::now())),
            follow: true,
        }
    }

    /// The body's next frame: one line (NDJSON) or one SSE frame.
    async fn frame(body: &mut EventBody) -> String {
        let frame = tokio::time::timeout(Duration::from_secs(60), body.next())
            .await
            .expect("a frame")
            .expect("the body goes on");
        String::from_utf8(frame.expect("infallible").to_vec()).expect("UTF-8")
    }

    #[tokio::test(start_paused = true)]
    async fn ndjson_is_the_json_lines_filtered_and_ends_on_shutdown() {
        let shutdown = CancellationToken::new();
        let mut body = body(false, "label=app%3Dweb", &shutdown);
        let created = frame(&mut body).await;
        assert!(
            created.starts_with(r#"{"provider":"docker","instance":"web","kind":"created","origin":"initial","at":""#),
            "{created}"
        );
        // Subscribed before the hub synced: the snapshot is the hub's
        // items, each with its id (the position: db is 0, web 1 and 2).
        let id = body.subs[0].frames.id(1);
        assert!(
            created.ends_with(&format!(
                "\"labels\":{{\"app\":\"web\"}},\"id\":\"{id}\"}}\n"
            )),
            "{created}"
        );
        let started = frame(&mut body).await;
        assert!(
            started.contains(r#""instance":"web","kind":"started""#) && started.ends_with("}\n"),
            "{started}"
        );
        // db is filtered out, the status is not an event, and NDJSON has no
        // keep-alive: nothing more, even a minute later.
        let more = tokio::time::timeout(Duration::from_secs(60), body.next()).await;
        assert!(more.is_err(), "{more:?}");
        shutdown.cancel();
        assert!(body.next().await.is_none(), "the body ends on shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn sse_has_events_status_and_a_keep_alive() {
        let shutdown = CancellationToken::new();
        let mut body = body(true, "", &shutdown);
        let mut frames = Vec::new();
        // db (stopped): created; web: created, started; by id.
        for _ in 0..3 {
            frames.push(frame(&mut body).await);
        }
        let kinds: Vec<&str> = frames
            .iter()
            .map(|f| f.lines().next().unwrap_or_default())
            .collect();
        assert_eq!(kinds, ["event: instance"; 3], "{frames:?}");
        for (n, f) in frames.iter().enumerate() {
            let head = format!(
                "event: instance\nid: {}\ndata: {{",
                body.subs[0].frames.id(n as u64)
            );
            assert!(f.starts_with(&head) && f.ends_with("}\n\n"), "{f}");
        }
        let status = frame(&mut body).await;
        assert_eq!(
            status,
            format!(
                "event: status\nid: {}\ndata: {{\"status\":\"connected\",\"instances\":2}}\n\n",
                body.subs[0].frames.id(3)
            )
        );
        let before = Instant::now();
        assert_eq!(frame(&mut body).await, ": keep-alive\n\n");
        assert_eq!(before.elapsed(), KEEP_ALIVE);
        // And again after as long a silence.
        assert_eq!(frame(&mut body).await, ": keep-alive\n\n");
        assert_eq!(before.elapsed(), 2 * KEEP_ALIVE);
        shutdown.cancel();
        assert!(body.next().await.is_none(), "the body ends on shutdown");
    }

    /// Of several engines: one subscription each, taken in turn; every line
    /// says its host; a busy engine does not hold up the other.
    #[tokio::test(start_paused = true)]
    async fn several_engines_in_turn_each_line_says_its_host() {
        let shutdown = CancellationToken::new();
        let epoch = 0xcd;
        let subs = ["a", "b"]
            .into_iter()
            .map(|host| {
                let hub = Watch::new(TwoListed, WatchConfig::default()).share();
                let frames = Arc::new(Frames::new("docker", Some(host.into()), 1024, epoch));
                Sub {
                    subscription: hub.subscribe(Start::Initial),
                    filter: frames.filter(LabelFilter::default()),
                    frames,
                    publishers: None,
                }
            })
            .collect();
        let mut body = EventBody {
            subs,
            next: 0,
            sse: false,
            stop: Some(shutdown.clone()),
            _busy: None,
            keep_alive: None,
            follow: true,
        };
        let mut lines = Vec::new();
        for _ in 0..6 {
            let line = frame(&mut body).await;
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            assert!(v.get("id").is_none(), "no positional id of several: {line}");
            lines.push((
                v["host"].as_str().unwrap_or("?").to_owned(),
                v["instance"].as_str().unwrap_or("?").to_owned(),
                v["kind"].as_str().unwrap_or("?").to_owned(),
            ));
        }
        let hosts: Vec<&str> = lines.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(hosts, ["a", "b", "a", "b", "a", "b"], "in turn: {lines:?}");
        for host in ["a", "b"] {
            let of: Vec<(&str, &str)> = lines
                .iter()
                .filter(|l| l.0 == host)
                .map(|l| (l.1.as_str(), l.2.as_str()))
                .collect();
            assert_eq!(
                of,
                [("db", "created"), ("web", "created"), ("web", "started")],
                "{host}"
            );
        }
        shutdown.cancel();
        assert!(body.next().await.is_none(), "the body ends on shutdown");
    }
}
