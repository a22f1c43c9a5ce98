//! The fuzz harness of the Kubernetes watch frames.
//!
//! [`k8s_watch`] runs a whole [`Watch`] — the core, `lookout-k8s`'s own dial
//! and session ([`lookout_k8s::watch_with_client`]: a list, then a watch per
//! kind) and kube's client — against an apiserver in memory (a `tower` service, no socket): every list answers a valid list,
//! the first watch of Deployments answers the input's bytes in chunks that
//! the input chooses, then one valid `ADDED` frame; every later watch
//! answers only that frame. Invariants:
//!
//! - no panic (the fuzzer's job);
//! - **the stream continues**: the valid object after the garbage is
//!   delivered as an event, in the same session (an undecodable frame, a
//!   line that is not UTF-8, an object without a resourceVersion are
//!   skipped) or, when the garbage holds an error the apiserver states (a
//!   Status with a code other than 410, as an `ERROR` frame or a bare line)
//!   that ends it with `Disconnected`, after one redial; the stream never
//!   ends;
//! - **bounded**: at most one `Disconnected` and two dials (only the first
//!   watch holds garbage), and no more than 10 s (a stall is a failure);
//! - **readiness as asked**: with readiness watched (flag `0x40`) every
//!   event carries it, and the valid object — whose status makes it ready —
//!   is told `ready` (the harness waits for that event rather than the
//!   first); without, no event carries readiness and none is `ready` or
//!   `unready`, whatever the garbage's statuses say.
//!
//! The input: byte 0 is a set of flags (`0x01` both kinds, `0x02` one
//! namespace, `0x04` the list holds an object, `0x08` a label selector,
//! `0x40` readiness, bits 4-5 the chunk sizes), byte 1 seeds the chunk sizes, byte 2 repeats
//! the body (`b` from `0xF8` on: `2^(b - 0xEB)` times, at most [`MAX_BODY`](super::MAX_BODY)
//! bytes; below: once); the rest is the watch body. `fuzz/corpus/k8s_watch/` in the repository holds the seeds.
//!
//! Memory is not measured here: lookout-k8s splits a watch body into lines
//! of at most `K8sConfig::max_line` (16 MiB; its unit tests at the
//! boundary), and `crates/lookout/tests/k8s_bounded.rs` measures the peak RSS
//! of a 100 MiB line. A body here is at most [`MAX_BODY`](super::MAX_BODY)
//! (4 MiB), under that limit: no input meets it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::{Ready, ready};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Frame;
use lookout_core::{EventKind, Item, ReconnectPolicy, Status, Watch, WatchConfig};
use lookout_k8s::{DialError, K8sConfig, Kind};
use tokio_stream::StreamExt;

use super::{Input, MAX_CHUNK};
use crate::rng::SplitMix64;

/// The instance the valid frame after the garbage is about.
const TAIL_ID: &str = "deployment/lookout-fuzz/tail";

/// How long one input may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// The valid `ADDED` frame after the garbage.
const TAIL: &str = concat!(
    r#"{"type":"ADDED","object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":"#,
    r#"{"name":"tail","namespace":"lookout-fuzz","uid":"f0220fa1-1ed0-4e00-8000-000000000001","#,
    r#""resourceVersion":"900000","generation":1,"labels":{"app":"web"}},"spec":{"replicas":1},"#,
    r#""status":{"observedGeneration":1,"replicas":1,"readyReplicas":1,"availableReplicas":1}}}"#
);

/// What one input says, decoded (its flags are flags).
#[derive(Debug)]
#[allow(clippy::struct_excessive_bools)]
struct Plan {
    both_kinds: bool,
    namespace: bool,
    listed: bool,
    selector: bool,
    readiness: bool,
    max_chunk: usize,
    seed: u64,
    /// The body, repeated past a chunk's length when it is repeated.
    window: Arc<[u8]>,
    body_len: usize,
    /// The body's length times its repeats.
    total: usize,
}

impl Plan {
    fn new(data: &[u8]) -> Self {
        let Input {
            flags,
            seed,
            max_chunk,
            body,
            repeats,
        } = Input::new(data);
        Self {
            both_kinds: flags & 0x01 != 0,
            namespace: flags & 0x02 != 0,
            listed: flags & 0x04 != 0,
            selector: flags & 0x08 != 0,
            readiness: flags & 0x40 != 0,
            max_chunk,
            seed,
            window: if repeats > 1 {
                Arc::from(body.repeat(MAX_CHUNK.div_ceil(body.len()) + 1))
            } else {
                Arc::from(body)
            },
            body_len: body.len().max(1),
            total: body.len() * repeats,
        }
    }
}

/// A response body: the garbage (`repeats` times over, in chunks), then
/// `tail`; then it never ends (as a watch that stays open).
#[derive(Debug)]
struct FuzzBody {
    /// The body repeated past a chunk's length: each chunk is a slice of it,
    /// so that no per-byte loop of the harness weighs on the fuzzer.
    garbage: Arc<[u8]>,
    body_len: usize,
    total: usize,
    pos: usize,
    max_chunk: usize,
    rng: SplitMix64,
    tail: Option<Bytes>,
    open: bool,
}

impl FuzzBody {
    fn full(bytes: Bytes) -> Self {
        Self {
            garbage: Arc::from(&[][..]),
            body_len: 1,
            total: 0,
            pos: 0,
            max_chunk: 1,
            rng: SplitMix64::new(0),
            tail: Some(bytes),
            open: false,
        }
    }
}

impl http_body::Body for FuzzBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.pos < this.total {
            // At most 2^16 chunks: a body of megabytes in bytes would take seconds.
            let size = this
                .rng
                .upto(this.max_chunk)
                .max(this.total >> 16)
                .min(this.total - this.pos);
            let start = this.pos % this.body_len;
            this.pos += size;
            let chunk = Bytes::copy_from_slice(&this.garbage[start..start + size]);
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if let Some(tail) = this.tail.take() {
            return Poll::Ready(Some(Ok(Frame::data(tail))));
        }
        if this.open {
            // A watch that stays open: never woken, dropped with the session.
            Poll::Pending
        } else {
            Poll::Ready(None)
        }
    }
}

/// The apiserver in memory.
#[derive(Debug, Clone)]
struct FakeApi {
    plan: Arc<Plan>,
    /// Watch requests so far, per kind.
    watches: Arc<Mutex<HashMap<Kind, usize>>>,
}

impl FakeApi {
    fn answer(&self, req: &Request<kube::client::Body>) -> Response<FuzzBody> {
        let path = req.uri().path();
        let query = req.uri().query().unwrap_or("");
        let (kind, list_kind) = if path.ends_with("/statefulsets") {
            (Kind::StatefulSet, "StatefulSetList")
        } else if path.ends_with("/deployments") {
            (Kind::Deployment, "DeploymentList")
        } else {
            let body = Bytes::from_static(br#"{"kind":"Status","code":404,"message":"no"}"#);
            return status(404, FuzzBody::full(body));
        };
        if !query.split('&').any(|kv| kv == "watch=true") {
            let items = if self.plan.listed && kind == Kind::Deployment {
                concat!(
                    r#"[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"listed","#,
                    r#""namespace":"lookout-fuzz","uid":"u-listed","resourceVersion":"90","#,
                    r#""labels":{"app":"web"}},"spec":{"replicas":1}}]"#
                )
            } else {
                "[]"
            };
            let list = format!(
                r#"{{"kind":"{list_kind}","apiVersion":"apps/v1","metadata":{{"resourceVersion":"100"}},"items":{items}}}"#
            );
            return status(200, FuzzBody::full(Bytes::from(list)));
        }
        let first = {
            let mut watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
            let n = watches.entry(kind).or_default();
            *n += 1;
            *n == 1
        };
        let body = match kind {
            Kind::Deployment if first => FuzzBody {
                garbage: Arc::clone(&self.plan.window),
                body_len: self.plan.body_len,
                total: self.plan.total,
                pos: 0,
                max_chunk: self.plan.max_chunk,
                rng: SplitMix64::new(self.plan.seed),
                tail: Some(Bytes::from(format!("\n{TAIL}\n"))),
                open: true,
            },
            Kind::Deployment => FuzzBody {
                open: true,
                ..FuzzBody::full(Bytes::from(format!("{TAIL}\n")))
            },
            // StatefulSets (and any kind added later): a quiet watch.
            _ => FuzzBody {
                open: true,
                ..FuzzBody::full(Bytes::new())
            },
        };
        status(200, body)
    }
}

fn status(code: u16, body: FuzzBody) -> Response<FuzzBody> {
    let mut response = Response::new(body);
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or_default();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        "application/json".parse().expect("a header value"),
    );
    response
}

impl tower_service::Service<Request<kube::client::Body>> for FakeApi {
    type Response = Response<FuzzBody>;
    type Error = Infallible;
    type Future = Ready<Result<Response<FuzzBody>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        ready(Ok(self.answer(&req)))
    }
}

/// Runs a watch whose first Deployment watch answers `data` (see the
/// [module](self)), then one valid frame; panics when an invariant does not
/// hold.
pub fn k8s_watch(data: &[u8]) {
    let plan = Arc::new(Plan::new(data));
    let mut kinds = vec![Kind::Deployment];
    if plan.both_kinds {
        kinds.push(Kind::StatefulSet);
    }
    let api = FakeApi {
        plan: Arc::clone(&plan),
        watches: Arc::default(),
    };
    // Its silence bound (probe after 30 s) is past the harness's deadline:
    // the probe never runs.
    let mut config = K8sConfig::default()
        .kinds(kinds)
        .readiness(plan.readiness)
        .watch_config(
            WatchConfig::default().reconnect(
                ReconnectPolicy::default()
                    .initial_delay(Duration::from_millis(1))
                    .max_delay(Duration::from_millis(1))
                    .jitter(false),
            ),
        );
    if plan.namespace {
        config = config.namespace("lookout-fuzz");
    }
    if plan.selector {
        config = config.label_selector("app=web");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let readiness = plan.readiness;
    runtime.block_on(async move {
        let started = Instant::now();
        let mut watch: Watch<_> = lookout_k8s::watch_with_client(config, move || {
            kube::Client::new(api.clone(), "default")
        })
        .expect("a valid configuration");
        let mut disconnects = Vec::new();
        loop {
            let left = DEADLINE.saturating_sub(started.elapsed());
            let Ok(item) = tokio::time::timeout(left, watch.next()).await else {
                panic!(
                    "the valid frame after the garbage was not delivered within {DEADLINE:?} \
                     (disconnects: {disconnects:?})"
                );
            };
            match item.expect("the stream never ends") {
                Item::Event(e) => {
                    assert_eq!(
                        e.readiness.is_some(),
                        readiness,
                        "readiness watched: {readiness}, yet {e:?}"
                    );
                    assert!(
                        readiness || !matches!(e.kind, EventKind::Ready | EventKind::Unready),
                        "a readiness event without readiness: {e:?}"
                    );
                    // The valid object is ready: with readiness, it is
                    // done once that is told.
                    if e.id.as_str() == TAIL_ID && (!readiness || e.kind == EventKind::Ready) {
                        break;
                    }
                }
                Item::Status(Status::Disconnected { error, .. }) => {
                    // Only an error the apiserver (or a proxy) states ends
                    // the session: a Status with a code (not 410), as an
                    // `ERROR` frame or a bare line. An undecodable frame or
                    // line is skipped in it.
                    // (During the dial too: it completes once every watch
                    // is accepted, so an error frame may come before.)
                    let by_apiserver = match &*error {
                        lookout_core::Error::Session(e) | lookout_core::Error::Dial(e) => {
                            match e.downcast_ref::<DialError>() {
                                Some(DialError::Watch { source, .. }) => match source {
                                    kube::runtime::watcher::Error::WatchError(status) => {
                                        status.code != 0 && status.code != 410
                                    }
                                    kube::runtime::watcher::Error::WatchFailed(
                                        kube::Error::Api(status),
                                    ) => status.code != 0,
                                    _ => false,
                                },
                                _ => false,
                            }
                        }
                        _ => false,
                    };
                    assert!(
                        by_apiserver,
                        "a session ended on something else than an apiserver error: {error}"
                    );
                    disconnects.push(error.to_string());
                    assert!(
                        disconnects.len() <= 1,
                        "only the first watch holds garbage, yet: {disconnects:?}"
                    );
                }
                Item::Status(_) => {}
            }
        }
    });
}
