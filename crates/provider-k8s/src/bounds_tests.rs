//! The bounds of what the apiserver sends, against an apiserver in memory
//! (a `tower` service behind kube's `Client`): a watch line over
//! [`K8sConfig::max_line`] ends the session, which resumes; a list page over
//! [`K8sConfig::max_list_page`] is asked again with fewer objects.

use std::cell::Cell;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::{Ready, ready};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Frame;
use lookout_core::{Item, ReconnectPolicy, Status};
use tokio_stream::StreamExt;

use crate::{K8sConfig, Kind};

/// A body of these chunks; then it ends, or stays open (a watch).
struct Chunks {
    chunks: VecDeque<Bytes>,
    open: bool,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.chunks.pop_front() {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            // Never woken: dropped with the session.
            None if self.open => Poll::Pending,
            None => Poll::Ready(None),
        }
    }
}

/// What the apiserver in memory answers a request (its path and query).
type Script = dyn Fn(&str, &str) -> Chunks + Send + Sync;

/// The apiserver in memory: answers by its script, logs every request.
#[derive(Clone)]
struct FakeApi {
    script: Arc<Script>,
    log: Arc<Mutex<Vec<String>>>,
}

impl FakeApi {
    fn new(script: impl Fn(&str, &str) -> Chunks + Send + Sync + 'static) -> Self {
        Self {
            script: Arc::new(script),
            log: Arc::default(),
        }
    }

    fn log(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl tower_service::Service<Request<kube::client::Body>> for FakeApi {
    type Response = Response<Chunks>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Chunks>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let (path, query) = (req.uri().path(), req.uri().query().unwrap_or(""));
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("{path}?{query}"));
        ready(Ok(Response::new((self.script)(path, query))))
    }
}

fn once(text: String, open: bool) -> Chunks {
    Chunks {
        chunks: VecDeque::from([Bytes::from(text)]),
        open,
    }
}

/// A Deployment named `name` at `version`, with a label of `pad` bytes.
fn deployment(name: &str, version: u32, pad: usize) -> String {
    format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}","namespace":"ns","uid":"u-{name}","resourceVersion":"{version}","labels":{{"pad":"{}"}}}},"spec":{{"replicas":1}}}}"#,
        "p".repeat(pad)
    )
}

fn list(items: &[String], version: u32, next: Option<usize>) -> String {
    let next = next.map_or_else(String::new, |n| format!(r#","continue":"{n}""#));
    format!(
        r#"{{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{{"resourceVersion":"{version}"{next}}},"items":[{}]}}"#,
        items.join(",")
    )
}

fn config(max_line: usize, max_page: usize) -> K8sConfig {
    K8sConfig::default()
        .kinds([Kind::Deployment])
        .max_line(max_line)
        .max_list_page(max_page)
        .watch_config(
            K8sConfig::default_watch().initial(true).reconnect(
                ReconnectPolicy::default()
                    .initial_delay(Duration::from_millis(1))
                    .max_delay(Duration::from_millis(1))
                    .jitter(false),
            ),
        )
}

fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Reads `watch` until `done` says so; every item seen, as text.
async fn until(
    watch: &mut crate::Watch<crate::K8sDial>,
    done: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut seen = Vec::new();
    let read = async {
        while let Some(item) = watch.next().await {
            let text = match item {
                Item::Event(e) => format!("{} {}", e.id, e.kind),
                Item::Status(Status::Disconnected { error, .. }) => {
                    format!("disconnected: {error}")
                }
                Item::Status(s) => format!("{s:?}"),
            };
            seen.push(text.clone());
            if done(&text) {
                return;
            }
        }
    };
    let finished = tokio::time::timeout(Duration::from_secs(10), read).await;
    assert!(finished.is_ok(), "not done within 10 s: {seen:#?}");
    seen
}

#[tokio::test(flavor = "current_thread")]
async fn a_watch_line_over_the_limit_ends_the_session_which_resumes() {
    let watches = AtomicUsize::new(0);
    let api = FakeApi::new(move |_, query| {
        if query_value(query, "watch") != Some("true") {
            return once(list(&[], 100, None), false);
        }
        if watches.fetch_add(1, Ordering::Relaxed) == 0 {
            // The first watch: 5 000 bytes of a line that never ends, in
            // chunks (the limit is 1 024).
            return Chunks {
                chunks: (0..10).map(|_| Bytes::from(vec![b'x'; 500])).collect(),
                open: true,
            };
        }
        once(
            format!(
                "{{\"type\":\"ADDED\",\"object\":{}}}\n",
                deployment("tail", 101, 0)
            ),
            true,
        )
    });
    let seen_api = api.clone();
    let mut watch = crate::watch_with_client(config(1024, 4096), move || {
        kube::Client::new(api.clone(), "default")
    })
    .expect("a valid configuration");
    let seen = until(&mut watch, |t| t.starts_with("deployment/ns/tail")).await;
    let disconnects: Vec<&String> = seen
        .iter()
        .filter(|t| t.starts_with("disconnected"))
        .collect();
    assert_eq!(disconnects.len(), 1, "{seen:#?}");
    assert!(
        disconnects[0].contains(
            "watching deployments failed: a line of the watch exceeded 1024 bytes \
             (K8sConfig::max_line)"
        ),
        "{}",
        disconnects[0]
    );
    // One list; both watches from its version: the second resumed it.
    let log = seen_api.log();
    let watches: Vec<&String> = log.iter().filter(|r| r.contains("watch=true")).collect();
    assert_eq!(log.len() - watches.len(), 1, "{log:#?}");
    assert_eq!(watches.len(), 2, "{log:#?}");
    assert!(
        watches.iter().all(|w| w.contains("resourceVersion=100")),
        "{log:#?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_list_page_over_the_limit_is_asked_again_with_fewer_objects() {
    // Three objects of about 900 bytes: pages of more than two exceed
    // 2 048 bytes; a page of one does not.
    let objects: Vec<String> = (0..3)
        .map(|i| deployment(&format!("d{i}"), 90 + i, 800))
        .collect();
    let api = FakeApi::new(move |_, query| {
        if query_value(query, "watch") == Some("true") {
            return once(String::new(), true);
        }
        let limit: usize = query_value(query, "limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(500);
        let from: usize = query_value(query, "continue")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let to = (from + limit).min(objects.len());
        let next = (to < objects.len()).then_some(to);
        once(list(&objects[from..to], 100, next), false)
    });
    let seen_api = api.clone();
    let mut watch = crate::watch_with_client(config(512, 2048), move || {
        kube::Client::new(api.clone(), "default")
    })
    .expect("a valid configuration");
    let listed = Cell::new(0);
    let seen = until(&mut watch, |t| {
        listed.set(listed.get() + usize::from(t.starts_with("deployment/")));
        listed.get() == 3
    })
    .await;
    let listed: Vec<&String> = seen
        .iter()
        .filter(|t| t.starts_with("deployment/"))
        .collect();
    assert_eq!(listed.len(), 3, "{seen:#?}");
    let log = seen_api.log();
    let limits: Vec<&str> = log
        .iter()
        .filter(|r| !r.contains("watch=true"))
        .filter_map(|r| query_value(r.split_once('?').map_or("", |(_, q)| q), "limit"))
        .collect();
    // 500 → … → 1, then the two pages after it at one object each.
    assert_eq!(
        limits,
        [
            "500", "250", "125", "62", "31", "15", "7", "3", "1", "1", "1"
        ],
        "{log:#?}"
    );

    // One object over the limit even alone: the session ends, and says so.
    let big = vec![deployment("big", 90, 4000)];
    let api = FakeApi::new(move |_, query| {
        if query_value(query, "watch") == Some("true") {
            return once(String::new(), true);
        }
        once(list(&big, 100, None), false)
    });
    let mut watch = crate::watch_with_client(config(512, 2048), move || {
        kube::Client::new(api.clone(), "default")
    })
    .expect("a valid configuration");
    let seen = until(&mut watch, |t| t.starts_with("disconnected")).await;
    let last = seen.last().map_or("", String::as_str);
    assert!(
        last.contains(
            "listing deployments failed: a list page of one object exceeded 2048 bytes \
             (K8sConfig::max_list_page)"
        ),
        "{last}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn what_kube_reads_whole_is_limited_on_the_clients_lookout_builds() {
    use crate::fetch::{Answer, get};
    use crate::limit::BodyLimit;

    // Every answer is 2 000 bytes long.
    let api = FakeApi::new(|_, _| {
        once(
            format!(
                r#"{{"major":"1","minor":"33","pad":"{}"}}"#,
                "p".repeat(1960)
            ),
            false,
        )
    });
    let client = kube::client::ClientBuilder::new(api, "default")
        .with_layer(&BodyLimit(1000))
        .build();
    // kube's own read (as discovery's): fails past the limit, and says so.
    let request = http::Request::get("/apis")
        .body(Vec::new())
        .expect("a request");
    let e = client
        .request_text(request)
        .await
        .expect_err("past the limit");
    let chain = format!("{e}: {:?}", std::error::Error::source(&e));
    assert!(chain.contains("exceeds 1000 bytes"), "{chain}");
    // What lookout reads itself, to its own bound: untouched by the layer.
    let version = get::<serde_json::Value>(&client, "/version", 4096).await;
    assert!(matches!(version, Ok(Answer::Read(v)) if v["minor"] == "33"));
    let cut = get::<serde_json::Value>(&client, "/version", 1500).await;
    assert!(matches!(cut, Ok(Answer::TooLarge)));
}
