//! The fuzz harness of the Docker-API `/events` decoder
//! ([`lookout_moby::protocol::Feed`], what every session runs on the bytes it reads),
//! and its targets: Docker's and Podman's containers, Swarm's services.
//!
//! [`run`] turns arbitrary bytes into one session's `/events` body, cut into
//! chunks that the first bytes choose, feeds it through the decoder, then
//! appends one valid event and checks what must hold whatever came before:
//!
//! - no panic (the fuzzer's job);
//! - **the stream continues**: the appended event is decoded and is the last
//!   observation;
//! - **one observation per line at most**: no replay, no loop;
//! - **the fast path reads as `serde_json` does**: each line of the body
//!   (before it is fed) is decoded the same by the decoder's hand scan and
//!   by `serde_json`, or the scan gives up
//!   (`lookout_moby::protocol::fast_path_agrees`);
//! - **bounded memory**: the caller's `after_push` hook runs after every
//!   chunk, when the decoder may hold no more than one partial line; with
//!   [`retained_limit`] a fuzz target that counts allocations checks that
//!   what stays allocated does not grow with the body.
//!
//! The input: byte 0 is a set of flags (bits 0-1 the resume point, `0x04`
//! a listed object, `0x08` a label filter, bits 4-5 the chunk sizes, `0x40`
//! readiness watched), byte 1 seeds the chunk sizes (and the
//! answers to inspections), byte 2 repeats the body (`b` from `0xF8` on:
//! `2^(b - 0xEB)` times, at most [`MAX_BODY`](super::MAX_BODY) bytes in all: a few bytes make
//! a line of megabytes; below: once); the rest is the body. `fuzz/corpus/*` in the repository holds the seeds.

use std::borrow::Cow;
use std::collections::VecDeque;

use lookout_core::{EventKind, Labels, Listed, Observation};
use serde_json::{Value, json};

use lookout_moby::protocol::{Feed, FeedOutput, Inspection, MAX_LINE};
use lookout_moby::{Cursor, Mapping, Objects};

use super::{Input, MAX_CHUNK};
use crate::rng::SplitMix64;

type Obs = Observation<Cursor>;

/// The appended event's time: after any resume point the flags choose.
pub const TAIL_NANOS: i64 = 4_000_000_000_000_000_000;

/// What may stay allocated between two chunks for an input of `input_len`
/// bytes: the one partial line the decoder buffers (at most `MAX_LINE` plus
/// a chunk, twice over for a `Vec`'s growth), what the session learnt from
/// the events (never more than the input's distinct bytes can name, so a
/// multiple of its length), and some slack. It does not grow with the body:
/// a 4 MiB body without a newline fits only if the decoder drops it.
pub fn retained_limit(input_len: usize) -> usize {
    2 * (MAX_LINE + MAX_CHUNK) + (256 << 10) + 32 * input_len
}

/// One kind of objects to fuzz the decoder with: the table, what a session
/// may know when the body starts, the valid event appended after the body,
/// and the engine's answers to inspections.
pub trait Target {
    /// The table.
    type Objects: Objects;

    /// The table the sessions use.
    fn objects(&self) -> &'static Self::Objects;

    /// An object the snapshot lists when flag `0x04` is set.
    fn listed(&self) -> Listed;

    /// The caller's label filter when flag `0x08` is set.
    fn labels(&self) -> Labels;

    /// The valid event appended after the body, one line without `\n`, at
    /// [`TAIL_NANOS`].
    fn tail(&self) -> String;

    /// The instance id and the kind the appended event must be decoded to.
    fn tail_change(&self) -> (&'static str, EventKind);

    /// The engine's answer to `GET path`; `choice` is arbitrary (from the
    /// input), to pick among answers. The appended event's object must get
    /// an answer that reports it.
    fn inspect(&self, path: &str, choice: u64) -> Inspection {
        let _ = (path, choice);
        Inspection::Gone
    }
}

/// Docker's or Podman's containers, as a [`Mapping`] describes them.
#[derive(Debug, Clone, Copy)]
pub struct Containers(pub &'static Mapping);

impl Target for Containers {
    type Objects = Mapping;

    fn objects(&self) -> &'static Mapping {
        self.0
    }

    fn listed(&self) -> Listed {
        Listed::new("web".into(), true)
            .uid(Some("0123456789ab".into()))
            .labels(Labels::from([("app".into(), "web".into())]))
    }

    fn labels(&self) -> Labels {
        Labels::from([("app".into(), "web".into())])
    }

    fn tail(&self) -> String {
        format!(
            concat!(
                r#"{{"status":"create","id":"f0220fa11ed0","from":"busybox","Type":"container","#,
                r#""Action":"create","Actor":{{"ID":"f0220fa11ed0","Attributes":{{"app":"web","#,
                r#""image":"busybox","name":"lookout-fuzz-tail"}}}},"scope":"local","#,
                r#""time":{},"timeNano":{}}}"#
            ),
            TAIL_NANOS / 1_000_000_000,
            TAIL_NANOS
        )
    }

    fn tail_change(&self) -> (&'static str, EventKind) {
        ("lookout-fuzz-tail", EventKind::Created)
    }

    /// A container as `GET /containers/{id}/json` may answer (readiness:
    /// a start of a container not known to have a check, Podman's
    /// `health_status`, an unpause first seen in a replay): gone, an
    /// error, no state, or a health status, pause and newest check's end
    /// that `choice` picks (an end before the event is read again).
    fn inspect(&self, path: &str, choice: u64) -> Inspection {
        const STATUSES: [&str; 5] = ["starting", "healthy", "unhealthy", "none", "sideways"];
        const ENDS: [&str; 4] = [
            "2026-11-30T05:48:44.361184687Z",
            "0001-01-01T00:00:00Z",
            "soon",
            "2100-01-01T00:00:00+01:00",
        ];
        let pick =
            |shift: u32, n: usize| usize::try_from((choice >> shift) % n as u64).unwrap_or(0);
        match choice % 8 {
            0 => Inspection::Gone,
            1 => Inspection::Unusable(format!("GET {path} answered 500: boom")),
            2 => Inspection::Found(json!({ "Id": "x", "State": "running" })),
            _ => Inspection::Found(json!({
                "State": {
                    "Running": true,
                    "Paused": choice & 0x100 != 0,
                    "Health": {
                        "Status": STATUSES[pick(9, STATUSES.len())],
                        "Log": [{ "End": ENDS[pick(12, ENDS.len())], "ExitCode": 0 }],
                    },
                },
                "Config": { "Healthcheck": { "Test": if choice & 0x4000 != 0 {
                    json!(["NONE"])
                } else {
                    json!(["CMD", "true"])
                } } },
            })),
        }
    }
}

/// What one input says, decoded.
#[derive(Debug)]
struct Plan<'a> {
    resume: Option<Cursor>,
    listed: bool,
    labels: bool,
    /// Readiness watched (health, pause and unpause events mean something).
    readiness: bool,
    max_chunk: usize,
    rng: SplitMix64,
    body: &'a [u8],
    repeats: usize,
}

impl<'a> Plan<'a> {
    fn new(data: &'a [u8]) -> Self {
        let Input {
            flags,
            seed,
            max_chunk,
            body,
            repeats,
        } = Input::new(data);
        let resume = match flags & 0x03 {
            0 => None,
            1 => Some(Cursor::from_unix_nanos(1_000)),
            2 => Some(Cursor::from_unix_nanos(1_796_012_924_361_184_687)),
            _ => Some(Cursor::from_unix_nanos(TAIL_NANOS - 1)),
        };
        Self {
            resume,
            listed: flags & 0x04 != 0,
            labels: flags & 0x08 != 0,
            // Bits 4-5 are the chunk sizes (`Input`).
            readiness: flags & 0x40 != 0,
            max_chunk,
            rng: SplitMix64::new(seed),
            body,
            repeats,
        }
    }
}

/// The harness: feeds `data` (see the [module](self)) and then one valid
/// event through a `Feed` of `target`'s objects; panics when an invariant
/// does not hold. `after_push` runs after every chunk.
pub fn run<T: Target>(target: &T, data: &[u8], after_push: &mut dyn FnMut()) {
    let mut plan = Plan::new(data);
    let listed = if plan.listed {
        vec![target.listed()]
    } else {
        Vec::new()
    };
    let labels = if plan.labels {
        target.labels()
    } else {
        Labels::new()
    };
    // Each line of the body read by the decoder's fast path as by
    // `serde_json` (or given up on): the decoded line is the same either way.
    for line in plan.body.split(|b| *b == b'\n') {
        if let Err(difference) = lookout_moby::protocol::fast_path_agrees(line) {
            panic!("{difference}");
        }
    }
    let scope = lookout_moby::Scope::new(labels, plan.readiness);
    let mut feed = Feed::new(target.objects(), &scope, plan.resume, &listed);
    let mut out = VecDeque::new();
    let mut seen = Seen::default();
    // The body, `repeats` times over, in chunks: each a slice of `window`
    // (the body repeated past a chunk's length), so that no per-byte loop
    // of the harness weighs on the fuzzer (it instruments every comparison).
    let body = plan.body;
    let total = body.len() * plan.repeats;
    let window: Cow<'_, [u8]> = if plan.repeats > 1 {
        Cow::Owned(body.repeat(MAX_CHUNK.div_ceil(body.len()) + 1))
    } else {
        Cow::Borrowed(body)
    };
    // A harness: clarity over speed (once per input).
    #[allow(clippy::naive_bytecount)]
    let mut newlines = body.iter().filter(|b| **b == b'\n').count() * plan.repeats;
    let mut bytes_fed = total;
    let mut pos = 0;
    while pos < total {
        // At most 2^16 chunks: a body of megabytes in bytes would take seconds.
        let size = plan
            .rng
            .upto(plan.max_chunk)
            .max(total >> 16)
            .min(total - pos);
        let start = pos % body.len();
        feed.push(&window[start..start + size], &mut out);
        drain(target, &mut feed, &mut out, &mut plan.rng, &mut seen);
        after_push();
        pos += size;
    }
    drop(window);

    // Then a valid event, on a line of its own.
    let tail = format!("\n{}\n", target.tail());
    newlines += 2;
    bytes_fed += tail.len();
    feed.push(tail.as_bytes(), &mut out);
    feed.finish(&mut out);
    drain(target, &mut feed, &mut out, &mut plan.rng, &mut seen);
    after_push();

    // One observation per line at most (and one per skipped over-long line).
    let bound = newlines + 1 + bytes_fed / MAX_LINE + 1;
    assert!(
        seen.count <= bound,
        "{} observations from {newlines} lines ({bytes_fed} bytes)",
        seen.count
    );
    let (id, kind) = target.tail_change();
    match &seen.last {
        Some(Observation::Change(c)) if c.id.as_str() == id && c.kind == kind => {}
        other => panic!(
            "the valid event after the garbage was not decoded as {kind} of {id}: last \
             observation {other:?}"
        ),
    }
}

/// Turns the steps into observations, answering inspections as the target says.
fn drain<T: Target>(
    target: &T,
    feed: &mut Feed<<T::Objects as Objects>::Known>,
    out: &mut VecDeque<FeedOutput>,
    rng: &mut SplitMix64,
    seen: &mut Seen,
) {
    while let Some(step) = out.pop_front() {
        let obs = match step {
            FeedOutput::Obs(obs) => obs,
            FeedOutput::Inspect {
                mut event,
                mut path,
            } => loop {
                // Read again while asked (the feed bounds the reads).
                match feed.inspected(event, &target.inspect(&path, rng.next_u64())) {
                    FeedOutput::Obs(obs) => break obs,
                    FeedOutput::Inspect {
                        event: again,
                        path: at,
                    } => (event, path) = (again, at),
                }
            },
        };
        assert!(
            matches!(obs, Observation::Change(_) | Observation::Progress(_)),
            "a feed yields changes and progress only: {obs:?}"
        );
        // The count and the last one only: a long body makes millions.
        seen.count += 1;
        seen.last = Some(obs);
    }
    // As a session does between two chunks.
    FeedOutput::trim(out);
}

/// What the feed yielded: how many observations, and the last one.
#[derive(Debug, Default)]
struct Seen {
    count: usize,
    last: Option<Obs>,
}

/// Docker's containers ([`lookout_docker::MAPPING`]).
pub fn docker_events(data: &[u8]) {
    run(&Containers(&lookout_docker::MAPPING), data, &mut || {});
}

/// [`docker_events`], calling `after_push` after every chunk.
pub fn docker_events_with(data: &[u8], after_push: &mut dyn FnMut()) {
    run(&Containers(&lookout_docker::MAPPING), data, after_push);
}

/// Podman's containers ([`lookout_podman::MAPPING`]).
pub fn podman_events(data: &[u8]) {
    run(&Containers(&lookout_podman::MAPPING), data, &mut || {});
}

/// [`podman_events`], calling `after_push` after every chunk.
pub fn podman_events_with(data: &[u8], after_push: &mut dyn FnMut()) {
    run(&Containers(&lookout_podman::MAPPING), data, after_push);
}

/// The service of the valid event appended after the garbage.
const TAIL_ID: &str = "f0220fa11ed0";

/// Swarm's services ([`lookout_swarm::SERVICES`]), with inspections answered
/// from the input.
#[derive(Debug, Clone, Copy)]
struct Swarm;

impl Target for Swarm {
    type Objects = lookout_swarm::Services;

    fn objects(&self) -> &'static lookout_swarm::Services {
        &lookout_swarm::SERVICES
    }

    fn listed(&self) -> Listed {
        Listed::new("web".into(), true)
            .uid(Some("kq2x9m3v0w4t".into()))
            .labels(Labels::from([("app".into(), "web".into())]))
    }

    fn labels(&self) -> Labels {
        Labels::from([("app".into(), "web".into())])
    }

    fn tail(&self) -> String {
        format!(
            concat!(
                r#"{{"Type":"service","Action":"create","Actor":{{"ID":"{}","#,
                r#""Attributes":{{"name":"lookout-fuzz-tail"}}}},"scope":"swarm","#,
                r#""time":{},"timeNano":{}}}"#
            ),
            TAIL_ID,
            TAIL_NANOS / 1_000_000_000,
            TAIL_NANOS
        )
    }

    fn tail_change(&self) -> (&'static str, EventKind) {
        // One replica: running.
        ("lookout-fuzz-tail", EventKind::Started)
    }

    fn inspect(&self, path: &str, choice: u64) -> Inspection {
        let id = path.strip_prefix("/services/").unwrap_or(path);
        if id == TAIL_ID {
            return Inspection::Found(service(id, "lookout-fuzz-tail", Some(1), true));
        }
        let replicas = Some((choice >> 8) % 3);
        let labelled = choice & (1 << 12) != 0;
        Inspection::Found(match choice % 7 {
            0 => return Inspection::Gone,
            1 => return Inspection::Unusable(format!("GET {path} answered 500: boom")),
            2 => service(id, &format!("svc-{id}"), replicas, labelled),
            3 => service(id, &format!("svc-{id}"), None, labelled),
            4 => json!({ "ID": id }),
            5 => service("someoneelse", "other", replicas, labelled),
            _ => json!({ "ID": id, "Spec": { "Name": 7, "Labels": "app=web", "Mode": [] } }),
        })
    }
}

/// A service as `GET /services/{id}` answers it: replicated with `replicas`,
/// or global when `None`.
fn service(id: &str, name: &str, replicas: Option<u64>, labelled: bool) -> Value {
    let mode = match replicas {
        Some(n) => json!({ "Replicated": { "Replicas": n } }),
        None => json!({ "Global": {} }),
    };
    let labels = if labelled {
        json!({ "app": "web" })
    } else {
        json!({})
    };
    json!({
        "ID": id,
        "Version": { "Index": 42 },
        "CreatedAt": "2026-11-30T05:15:27.249852166Z",
        "UpdatedAt": "2026-11-30T05:15:27.249852166Z",
        "Spec": {
            "Name": name,
            "Labels": labels,
            "TaskTemplate": { "ContainerSpec": { "Image": "busybox:latest" } },
            "Mode": mode,
        },
    })
}

/// Feeds `data` (see the [module](self)) and then one valid
/// service event through the decoder of a Swarm session; panics when an
/// invariant does not hold.
pub fn swarm_events(data: &[u8]) {
    run(&Swarm, data, &mut || {});
}

/// [`swarm_events`], calling `after_push` after every chunk.
pub fn swarm_events_with(data: &[u8], after_push: &mut dyn FnMut()) {
    run(&Swarm, data, after_push);
}
