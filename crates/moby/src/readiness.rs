//! Readiness where the events alone do not tell it: a snapshot's container
//! health, from the list's `Status` (Docker) or the engine's `health` list
//! filter (one list per status), and
//! the polled list of an engine without readiness events (Swarm), with why
//! the objects it finds not ready fail (Swarm's tasks).

use std::collections::HashMap;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll as TaskPoll;
use std::time::Duration;

use bytes::Bytes;
use lookout_core::{Health, Listed, Observation, Readiness, Reason};
use tokio::time::{Instant, Sleep, sleep_until};

use crate::api::Api;
use crate::error::CompatError;
use crate::http;
use crate::inspect::{INSPECT_TIMEOUT, inspect};
use crate::protocol::containers::{has_check, inspected_health};
use crate::protocol::cursor::Cursor;
use crate::protocol::inspection::Inspection;
use crate::protocol::objects::{Objects, Scope};
use crate::protocol::requests::{MAX_LIST, list_path};

/// The statuses a snapshot lists, in order: a container listed under two
/// (its status changed between the requests) takes the later one's.
const LISTED: [(&str, Health); 4] = [
    ("starting", Health::Starting),
    ("healthy", Health::Healthy),
    ("unhealthy", Health::Unhealthy),
    ("none", Health::None),
];

/// Fills in the health of each `listed` container (their pause is the
/// list's): one list per status (`none` only where the engine's filter
/// finds it, see [`HealthTable::lists_none`](crate::HealthTable::lists_none)),
/// then, for a container in none of them, what the watch learnt of it (no
/// check: `none`), else one inspection. What it learns of each container's
/// check is kept in the scope, for the watch's later sessions.
pub(crate) async fn health<O: Objects>(
    objects: &'static O,
    lists_none: bool,
    api: &Api,
    scope: &Scope,
    listed: &mut [Listed],
) -> Result<(), CompatError> {
    let base = objects.list_path(true);
    let mut status: HashMap<Arc<str>, Health> = HashMap::with_capacity(listed.len());
    for (name, health) in LISTED {
        if health == Health::None && !lists_none {
            continue;
        }
        let path = list_path(base, &scope.labels, Some(name));
        let body = get(api, &path).await?;
        let found = objects
            .parse_list(&body, false)
            .map_err(|reason| CompatError::List {
                path: http::strip_query(&path).to_owned(),
                reason,
            })?;
        for l in found {
            if let Some(uid) = l.uid {
                status.insert(uid, health);
            }
        }
    }
    let mut inspected = 0usize;
    for l in listed.iter_mut() {
        let Some(uid) = l.uid.clone() else { continue };
        let health = match (status.get(&uid), scope.checks.get(&uid)) {
            (Some(&health), _) => health,
            (None, Some(false)) => Health::None,
            // Not in a list (its status changed meanwhile, or the engine
            // lists no `none`), and not known to have no check: read it.
            (None, _) => {
                inspected += 1;
                let path = format!("/containers/{uid}/json");
                if !uid.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    continue;
                }
                match inspect(api, &path, INSPECT_TIMEOUT).await? {
                    Inspection::Found(object) => {
                        let (health, _) = inspected_health(&object);
                        scope.checks.set(&uid, has_check(&object, health));
                        health
                    }
                    // Gone since the list: the next event or snapshot says so.
                    Inspection::Gone | Inspection::Unusable(_) => Health::None,
                }
            }
        };
        if status.contains_key(&uid) {
            scope.checks.set(&uid, health != Health::None);
        }
        if let Some(Readiness::Container { paused, .. }) = l.readiness {
            l.readiness = Some(Readiness::container(health, paused));
        }
    }
    scope.checks.retain(listed);
    tracing::debug!(
        provider = objects.provider(),
        containers = listed.len(),
        inspected,
        "health listed"
    );
    Ok(())
}

/// Where the list's `Status` told each running container's health
/// ([`ReadinessFrom::Status`](crate::ReadinessFrom::Status), Docker): reads
/// it for those it did not tell (no readiness yet: a paused one), by one
/// inspection each, and keeps what is now known of each running
/// container's check in the scope (one that does not run is learnt at its
/// first start). No other request.
pub(crate) async fn untold(
    api: &Api,
    scope: &Scope,
    listed: &mut [Listed],
) -> Result<(), CompatError> {
    let mut inspected = 0usize;
    for l in listed.iter_mut() {
        let Some(uid) = l.uid.clone() else { continue };
        if !l.running {
            continue;
        }
        if let Some(Readiness::Container { health, .. }) = l.readiness {
            scope.checks.set(&uid, health != Health::None);
            continue;
        }
        // Told as "no readiness" should the inspection not answer: the
        // next event or snapshot says more.
        l.readiness = Some(Readiness::container(Health::None, false));
        if !uid.bytes().all(|b| b.is_ascii_alphanumeric()) {
            continue;
        }
        inspected += 1;
        let path = format!("/containers/{uid}/json");
        if let Inspection::Found(object) = inspect(api, &path, INSPECT_TIMEOUT).await? {
            let (health, paused) = inspected_health(&object);
            scope.checks.set(&uid, has_check(&object, health));
            l.readiness = Some(Readiness::container(health, paused));
        }
    }
    scope.checks.retain(listed);
    tracing::debug!(
        containers = listed.len(),
        inspected,
        "health read from the list's Status"
    );
    Ok(())
}

async fn get(api: &Api, path: &str) -> Result<Bytes, CompatError> {
    let name = http::strip_query(path);
    http::get(api, path)
        .await?
        .ok(name)
        .await?
        .body(name, MAX_LIST)
        .await
}

/// What a session waits for next: a piece of the `/events` body, or the
/// readiness poll.
pub(crate) enum Next {
    Chunk(Option<Result<Bytes, hyper::Error>>),
    Poll,
}

/// The readiness poll of one session: the objects' list (with the label
/// filter), every `every` and soon after a change, each listed object that
/// runs as an [`Observation::Polled`].
pub(crate) struct Poll<O: 'static> {
    objects: &'static O,
    path: String,
    every: Duration,
    timer: Pin<Box<Sleep>>,
}

impl<O: Objects> Poll<O> {
    pub(crate) fn new(objects: &'static O, path: String, every: Duration) -> Self {
        Self {
            objects,
            path,
            every,
            timer: Box::pin(sleep_until(Instant::now() + every)),
        }
    }

    /// A change was seen: poll within a second (its readiness follows it).
    pub(crate) fn soon(&mut self) {
        let soon = Instant::now() + Duration::from_secs(1).min(self.every);
        if self.timer.deadline() > soon {
            self.timer.as_mut().reset(soon);
        }
    }

    /// The next piece of `events`, or the poll when it is due first.
    pub(crate) async fn next_or(&mut self, events: &mut http::Exchange) -> Next {
        poll_fn(|cx| {
            if let TaskPoll::Ready(chunk) = events.poll_chunk(cx) {
                return TaskPoll::Ready(Next::Chunk(chunk));
            }
            if self.timer.as_mut().poll(cx).is_ready() {
                return TaskPoll::Ready(Next::Poll);
            }
            TaskPoll::Pending
        })
        .await
    }

    /// Polls now: each listed object's readiness, and why it fails when
    /// the objects tell it ([`Objects::polled_failures`]). `Err` when the
    /// engine cannot be read (the session ends, and the core redials).
    pub(crate) async fn run(&mut self, api: &Api) -> Result<Vec<Observation<Cursor>>, CompatError> {
        let started = Instant::now();
        let body = timed(get(api, &self.path), &self.path).await?;
        self.timer.as_mut().reset(started + self.every);
        let mut listed =
            self.objects
                .parse_list(&body, true)
                .map_err(|reason| CompatError::List {
                    path: http::strip_query(&self.path).to_owned(),
                    reason,
                })?;
        // An object listed as not running tells nothing: its stop is the
        // feed's to tell (a poll answered between a scale to 0 and its event
        // would otherwise tell `Unready` before the `Stopped`).
        listed.retain(|l| l.running);
        if !failures(self.objects, api, &mut listed).await? {
            return Ok(Vec::new());
        }
        Ok(listed
            .into_iter()
            .filter_map(|l| {
                let readiness = l.readiness?;
                Some(Observation::polled(l.id, l.uid, readiness).failing(l.reason))
            })
            .collect())
    }
}

/// `request`, within [`INSPECT_TIMEOUT`].
async fn timed(
    request: impl Future<Output = Result<Bytes, CompatError>>,
    path: &str,
) -> Result<Bytes, CompatError> {
    tokio::time::timeout(INSPECT_TIMEOUT, request)
        .await
        .unwrap_or_else(|_| {
            Err(CompatError::Timeout {
                path: http::strip_query(path).to_owned(),
                after: INSPECT_TIMEOUT,
            })
        })
}

/// Sets the [`reason`](Listed::reason) of each running `listed` object that
/// is not ready to why it fails, from the one list the objects name
/// ([`Objects::polled_failures`]), read only when some object is running
/// and not ready (a ready one does not fail: its reason is left as it
/// was). `Ok(false)` when that list named an object removed since it was
/// listed (the engine answers `404` to the whole list): the caller tells
/// nothing of this poll, and the next one reads them again.
pub(crate) async fn failures<O: Objects>(
    objects: &'static O,
    api: &Api,
    listed: &mut [Listed],
) -> Result<bool, CompatError> {
    let fails = |l: &Listed| l.running && l.readiness.is_some_and(|r| !r.is_ready());
    let unready: Vec<Arc<str>> = listed
        .iter()
        .filter(|l| fails(l))
        .filter_map(|l| l.uid.clone())
        .collect();
    if unready.is_empty() {
        return Ok(true);
    }
    let uids: Vec<&str> = unready.iter().map(|uid| &**uid).collect();
    let Some((path, decode)) = objects.polled_failures(&uids) else {
        return Ok(true);
    };
    let body = match timed(get(api, &path), &path).await {
        Ok(body) => body,
        Err(CompatError::Status {
            status: 404,
            message,
            ..
        }) => {
            tracing::debug!(
                provider = objects.provider(),
                %message,
                "an object was removed since the poll listed it: this poll tells nothing"
            );
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    let failing: HashMap<String, Arc<Reason>> = decode(&body)
        .map_err(|reason| CompatError::List {
            path: http::strip_query(&path).to_owned(),
            reason,
        })?
        .into_iter()
        .map(|(uid, reason)| (uid, Arc::new(reason)))
        .collect();
    let mut told = 0usize;
    for l in listed.iter_mut() {
        if let (true, Some(uid)) = (fails(l), l.uid.as_deref()) {
            l.reason = failing.get(uid).cloned();
            told += usize::from(l.reason.is_some());
        }
    }
    tracing::debug!(
        provider = objects.provider(),
        unready = uids.len(),
        failing = told,
        "failures listed"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use lookout_core::Labels;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    static DOCKER: &crate::Mapping = &testing::TABLE;

    static PODMAN: crate::Mapping = crate::Mapping {
        health: crate::HealthTable {
            status_in_action: false,
            unhealthy_when_paused: false,
            lists_none: false,
            status_in_list: false,
        },
        ..testing::TABLE
    };

    /// An engine answering the health lists from `lists` (status → the
    /// container ids it lists; `none` never matches on Podman) and an
    /// inspection of `c…` with a check, of anything else without; counts
    /// the inspections.
    struct Engine {
        socket: std::path::PathBuf,
        inspections: Arc<AtomicUsize>,
    }

    impl Drop for Engine {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.socket);
        }
    }

    /// A client of the fake engine `e`.
    fn engine_api(e: &Engine) -> Api {
        Api::new(
            crate::Host::Unix(e.socket.clone()),
            crate::location::host::TlsEnv::default(),
        )
    }

    /// Runs `test` while `server` serves (no task spawned: the server
    /// ends with the test).
    async fn with_server(server: impl Future<Output = ()>, test: impl Future<Output = ()>) {
        tokio::select! {
            () = server => panic!("the fake engine stopped"),
            () = test => {}
        }
    }

    use crate::testing::percent_decode as decode;

    /// The (decoded) target of the request on `conn`, once its head is read.
    async fn request_target(conn: &mut tokio::net::UnixStream) -> String {
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        decode(head.split_whitespace().nth(1).unwrap_or("/"))
    }

    fn engine(
        name: &str,
        lists: &'static [(&'static str, &'static [&'static str])],
    ) -> (Engine, impl Future<Output = ()>) {
        let socket = std::env::temp_dir().join(format!(
            "lookout-moby-health-{}-{name}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&socket);
        let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
        let inspections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&inspections);
        let server = async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let target = request_target(&mut conn).await;
                let body = if let Some(id) = target
                    .strip_prefix("/containers/")
                    .and_then(|t| t.strip_suffix("/json"))
                {
                    counted.fetch_add(1, Ordering::SeqCst);
                    if id.starts_with('c') {
                        r#"{"State":{"Health":{"Status":"unhealthy"}},"Config":{"Healthcheck":{"Test":["CMD","x"]}}}"#.to_owned()
                    } else {
                        r#"{"State":{},"Config":{}}"#.to_owned()
                    }
                } else {
                    let ids = lists
                        .iter()
                        .find(|(status, _)| target.contains(&format!(r#""health":["{status}"]"#)))
                        .map_or(&[][..], |(_, ids)| *ids);
                    let entries: Vec<String> = ids
                        .iter()
                        .map(|id| format!(r#"{{"Id":"{id}","Names":["/{id}"],"State":"running"}}"#))
                        .collect();
                    format!("[{}]", entries.join(","))
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
            }
        };
        (
            Engine {
                socket,
                inspections,
            },
            server,
        )
    }

    fn listed(ids: &[&str]) -> Vec<Listed> {
        ids.iter()
            .map(|id| {
                Listed::new((*id).into(), true)
                    .uid(Some((*id).into()))
                    .labels(Labels::new())
                    .readiness(Some(Readiness::container(Health::None, false)))
            })
            .collect()
    }

    fn healths(listed: &[Listed]) -> Vec<(&str, Health)> {
        listed
            .iter()
            .map(|l| match l.readiness {
                Some(Readiness::Container { health, .. }) => (l.id.as_str(), health),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// Podman: `health=none` never matches, so a container in no list is
    /// inspected — once per watch when it has no check (the scope keeps
    /// it), every snapshot when it has one and is in no list (its status
    /// changed between the lists).
    #[tokio::test(flavor = "current_thread")]
    async fn a_snapshot_reads_health_from_the_lists_and_inspects_the_rest_once() {
        let (e, server) = engine("podman", &[("healthy", &["c1"]), ("starting", &["c2"])]);
        with_server(
            Box::pin(server),
            Box::pin(async {
                let api = engine_api(&e);
                let scope = Scope::new(Labels::new(), true);
                let ids = ["c1", "c2", "p1", "c3"];
                let mut first = listed(&ids);
                health(&PODMAN, false, &api, &scope, &mut first)
                    .await
                    .expect("health");
                assert_eq!(
                    healths(&first),
                    [
                        ("c1", Health::Healthy),
                        ("c2", Health::Starting),
                        ("p1", Health::None),
                        ("c3", Health::Unhealthy),
                    ]
                );
                assert_eq!(e.inspections.load(Ordering::SeqCst), 2, "p1 and c3");
                assert_eq!(
                    ids.map(|id| scope.checks.get(id)),
                    [Some(true), Some(true), Some(false), Some(true)]
                );
                // The next snapshot of the watch: p1 is known to have no check.
                let mut next = listed(&ids);
                health(&PODMAN, false, &api, &scope, &mut next)
                    .await
                    .expect("health");
                assert_eq!(healths(&next), healths(&first));
                assert_eq!(e.inspections.load(Ordering::SeqCst), 3, "c3 again only");
                // A container no longer listed is forgotten.
                let mut fewer = listed(&["c1"]);
                health(&PODMAN, false, &api, &scope, &mut fewer)
                    .await
                    .expect("health");
                assert_eq!(scope.checks.get("p1"), None);
            }),
        )
        .await;
    }

    /// Docker's `health=none` list finds the containers without a check:
    /// no inspection.
    #[tokio::test(flavor = "current_thread")]
    async fn docker_lists_none_too() {
        let (e, server) = engine("docker", &[("unhealthy", &["c1"]), ("none", &["p1"])]);
        with_server(
            Box::pin(server),
            Box::pin(async {
                let api = engine_api(&e);
                let scope = Scope::new(Labels::new(), true);
                let mut l = listed(&["c1", "p1"]);
                health(DOCKER, true, &api, &scope, &mut l)
                    .await
                    .expect("health");
                assert_eq!(
                    healths(&l),
                    [("c1", Health::Unhealthy), ("p1", Health::None)]
                );
                assert_eq!(e.inspections.load(Ordering::SeqCst), 0);
                assert_eq!(scope.checks.get("p1"), Some(false));
            }),
        )
        .await;
    }

    /// Docker's list told each running container's health in its
    /// `Status`: only one it did not tell (paused) is inspected; no list
    /// is asked again. What is known of each running one's check is kept.
    #[tokio::test(flavor = "current_thread")]
    async fn a_status_told_snapshot_inspects_only_what_it_did_not_tell() {
        let (e, server) = engine("status", &[]);
        with_server(
            Box::pin(server),
            Box::pin(async {
                let api = engine_api(&e);
                let scope = Scope::new(Labels::new(), true);
                let mut l = listed(&["a1", "p1", "c1", "x1"]);
                l[0].readiness = Some(Readiness::container(Health::Healthy, false));
                l[1].readiness = Some(Readiness::container(Health::None, false));
                l[2].readiness = None;
                l[3].running = false;
                untold(&api, &scope, &mut l).await.expect("health");
                assert_eq!(
                    healths(&l),
                    [
                        ("a1", Health::Healthy),
                        ("p1", Health::None),
                        ("c1", Health::Unhealthy),
                        ("x1", Health::None),
                    ]
                );
                assert_eq!(e.inspections.load(Ordering::SeqCst), 1, "c1 only");
                assert_eq!(
                    ["a1", "p1", "c1", "x1"].map(|id| scope.checks.get(id)),
                    [Some(true), Some(false), Some(true), None]
                );
            }),
        )
        .await;
    }

    /// A polled table: `/things` lists objects `{"id", "running",
    /// "desired", "ready"}`; `/why?ids=a,b` tells why some fail
    /// (`{"uid": "message"}`).
    #[derive(Debug)]
    struct Things;

    struct Nothing;

    impl crate::KnownObjects for Nothing {
        fn event(&mut self, _: &crate::Event) -> crate::Decision {
            crate::Decision::Skip
        }
    }

    impl Objects for Things {
        type Known = Nothing;
        fn provider(&self) -> &'static str {
            "things"
        }
        fn discovery(&self) -> &crate::Discovery {
            &testing::TABLE.discovery
        }
        fn event_type(&self) -> &'static str {
            "thing"
        }
        fn actions(&self, _: bool) -> Vec<&'static str> {
            Vec::new()
        }
        fn labels_in_events(&self) -> bool {
            true
        }
        fn list_path(&self, _: bool) -> &'static str {
            "/things"
        }
        fn parse_list(&self, body: &[u8], _: bool) -> Result<Vec<Listed>, String> {
            let list: Vec<serde_json::Value> =
                serde_json::from_slice(body).map_err(|e| e.to_string())?;
            Ok(list
                .iter()
                .map(|t| {
                    let n = |k: &str| u32::try_from(t[k].as_u64().unwrap_or(0)).unwrap_or(0);
                    let id = t["id"].as_str().unwrap_or("");
                    Listed::new(id.into(), t["running"] == true)
                        .uid(Some(id.into()))
                        .readiness(Some(Readiness::replicas(n("desired"), n("ready"), true)))
                })
                .collect())
        }
        fn readiness_from(&self) -> crate::ReadinessFrom {
            crate::ReadinessFrom::Polled
        }
        fn polled_failures(
            &self,
            uids: &[&str],
        ) -> Option<(String, fn(&[u8]) -> Result<Vec<(String, Reason)>, String>)> {
            fn decode(body: &[u8]) -> Result<Vec<(String, Reason)>, String> {
                let why: HashMap<String, String> =
                    serde_json::from_slice(body).map_err(|e| e.to_string())?;
                Ok(why
                    .into_iter()
                    .map(|(uid, message)| (uid, Reason::failing(&message)))
                    .collect())
            }
            Some((format!("/why?ids={}", uids.join(",")), decode))
        }
        fn history(&self) -> crate::History {
            crate::History::Unreliable
        }
        fn known(&'static self, _: &Scope, _: &[Listed]) -> Nothing {
            Nothing
        }
    }

    static THINGS: Things = Things;

    /// An engine answering each request with `answer(target)` (status,
    /// body); the targets it was asked, in order.
    fn answering(
        name: &str,
        answer: fn(&str) -> (u16, String),
    ) -> (Engine, Arc<Mutex<Vec<String>>>, impl Future<Output = ()>) {
        let socket = std::env::temp_dir().join(format!(
            "lookout-moby-poll-{}-{name}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&socket);
        let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&asked);
        let server = async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let target = request_target(&mut conn).await;
                let (status, body) = answer(&target);
                log.lock().expect("the log").push(target);
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
            }
        };
        let engine = Engine {
            socket,
            inspections: Arc::new(AtomicUsize::new(0)),
        };
        (engine, asked, server)
    }

    const THREE: &str = r#"[{"id":"a","running":true,"desired":1,"ready":1},
        {"id":"b","running":true,"desired":2,"ready":1},
        {"id":"c","running":false,"desired":0,"ready":0}]"#;

    fn reasons(polled: &[Observation<Cursor>]) -> Vec<(&str, Option<&str>)> {
        polled
            .iter()
            .map(|o| match o {
                Observation::Polled { id, reason, .. } => (
                    id.as_str(),
                    reason.as_ref().and_then(|r| r.message.as_deref()),
                ),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// The poll asks why of the running objects that are not ready only,
    /// and hands each its failure (none: not failing).
    #[tokio::test(flavor = "current_thread")]
    async fn a_poll_tells_why_the_unready_objects_fail() {
        let (e, asked, server) = answering("why", |target| match target {
            "/things" => (200, THREE.to_owned()),
            "/why?ids=b" => (200, r#"{"b":"task: non-zero exit (7)"}"#.to_owned()),
            _ => (404, r#"{"message":"no"}"#.to_owned()),
        });
        with_server(
            Box::pin(server),
            Box::pin(async {
                let api = engine_api(&e);
                let mut poll = Poll::new(&THINGS, "/things".to_owned(), Duration::from_secs(60));
                let polled = poll.run(&api).await.expect("a poll");
                assert_eq!(
                    reasons(&polled),
                    [("a", None), ("b", Some("task: non-zero exit (7)"))]
                );
                assert_eq!(*asked.lock().expect("the log"), ["/things", "/why?ids=b"]);
            }),
        )
        .await;
    }

    /// Everything ready: no second request. An object removed before the
    /// second list (`404`): that poll tells nothing.
    #[tokio::test(flavor = "current_thread")]
    async fn a_ready_poll_asks_nothing_more_and_a_race_tells_nothing() {
        let (e, asked, server) = answering("ready", |target| match target {
            "/things" => (
                200,
                r#"[{"id":"a","running":true,"desired":1,"ready":1}]"#.to_owned(),
            ),
            _ => (404, r#"{"message":"service b not found"}"#.to_owned()),
        });
        let (gone, _, gone_server) = answering("gone", |target| match target {
            "/things" => (200, THREE.to_owned()),
            _ => (404, r#"{"message":"service b not found"}"#.to_owned()),
        });
        with_server(
            Box::pin(async {
                tokio::join!(server, gone_server);
            }),
            Box::pin(async {
                let api = engine_api;
                let mut poll = Poll::new(&THINGS, "/things".to_owned(), Duration::from_secs(60));
                let polled = poll.run(&api(&e)).await.expect("a poll");
                assert_eq!(reasons(&polled), [("a", None)]);
                assert_eq!(*asked.lock().expect("the log"), ["/things"]);
                let polled = poll.run(&api(&gone)).await.expect("a poll");
                assert_eq!(polled, []);
            }),
        )
        .await;
    }
}
