//! Fuzzing the `/events` decoder through the public path: `lookout_docker::watch`
//! against a fake engine (unix socket in a temp dir) whose `/events` body is
//! garbage interleaved with valid events, cut into arbitrary chunks.
//!
//! Garbage: malformed and truncated JSON, unknown types and actions, wrong field
//! types, invalid UTF-8, lines over the 1 MiB limit. Properties, per case:
//! - no panic;
//! - every valid event after any garbage is delivered, once, in order;
//! - no replay loop and no reconnect: one subscription (after the first dial's history), no `Disconnected`.
//!
//! `PROPTEST_CASES=N` changes the case count (default 256; ~10 s here).

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use lookout_testkit::fake_engine;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lookout_core::{EventKind, Item, Status};
use lookout_docker::{DockerConfig, watch};
use proptest::prelude::*;
use tokio_stream::StreamExt;

/// One line of the body (each ends with `\n`).
#[derive(Debug, Clone)]
enum Line {
    /// A valid `create` of container `ok-N` (N given when the body is built).
    Valid,
    /// Arbitrary bytes (no `\n`).
    Bytes(Vec<u8>),
    /// A valid event cut short.
    Truncated(usize),
    /// Valid JSON that is no container transition or lacks what one needs.
    Json(&'static str),
    /// A valid-looking event whose name holds invalid UTF-8.
    BadUtf8(Vec<u8>),
    /// A line over the 1 MiB limit (`len` bytes over it).
    Huge(usize),
}

const JSON_JUNK: &[&str] = &[
    r#"{"Type":"network","Action":"connect","Actor":{"ID":"n1","Attributes":{"name":"bridge"}},"time":1}"#,
    r#"{"Type":"container","Action":"exec_start: sh","Actor":{"ID":"x","Attributes":{"name":"junk"}},"timeNano":5}"#,
    r#"{"Type":"container","Action":"frobnicate","Actor":{"ID":"x","Attributes":{"name":"junk"}}}"#,
    r#"{"Type":"container","Action":"start","Actor":{"ID":"never-created","Attributes":{"name":"ghost"}}}"#,
    r#"{"Type":"container","Action":"create","Actor":null}"#,
    r#"{"Type":"container","Action":"create","Actor":{"ID":"","Attributes":{"name":"empty-id"}}}"#,
    r#"{"Type":"container","Action":"create","Actor":{"ID":"y","Attributes":{"name":""}}}"#,
    r#"{"Type":"container","Action":42,"Actor":{"ID":"y","Attributes":{"name":"num"}}}"#,
    r#"{"Type":"container","Action":"create","Actor":{"ID":"z","Attributes":{"name":7}},"timeNano":"soon"}"#,
    r#"{"Type":7}"#,
    "{}",
    "[]",
    "null",
    r#""just a string""#,
    r#"{"Action":"create"}"#,
    "",
    "   ",
    "\r",
];

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        6 => Just(Line::Valid),
        3 => proptest::collection::vec(any::<u8>().prop_map(|b| if b == b'\n' { b'?' } else { b }), 0..200)
            .prop_map(Line::Bytes),
        2 => (1usize..300).prop_map(Line::Truncated),
        3 => proptest::sample::select(JSON_JUNK).prop_map(Line::Json),
        1 => proptest::collection::vec(0x80u8..=0xff, 0..8)
            // A lone continuation byte first: never valid UTF-8.
            .prop_map(|mut b| { b.insert(0, 0x80); b })
            .prop_map(Line::BadUtf8),
        1 => (1usize..4096).prop_map(Line::Huge),
    ]
}

fn valid(n: usize, nanos: i64) -> String {
    fake_engine::event_line("create", &format!("{n:064x}"), &format!("/ok-{n}"), nanos)
}

/// The body and the names of the valid events in it, in order.
fn body(lines: &[Line]) -> (Vec<u8>, Vec<String>) {
    let mut out = Vec::new();
    let mut names = Vec::new();
    let mut nanos = 1_700_000_000_000_000_000i64;
    for l in lines {
        nanos += 1_000;
        match l {
            Line::Valid => {
                out.extend_from_slice(valid(names.len(), nanos).as_bytes());
                names.push(format!("ok-{}", names.len()));
            }
            Line::Bytes(b) => {
                out.extend_from_slice(b);
                out.push(b'\n');
            }
            Line::Truncated(at) => {
                let v = valid(999_999, nanos);
                let cut = (*at).min(v.len() - 2);
                out.extend_from_slice(&v.as_bytes()[..cut]);
                out.push(b'\n');
            }
            Line::Json(j) => {
                out.extend_from_slice(j.as_bytes());
                out.push(b'\n');
            }
            Line::BadUtf8(b) => {
                let v = fake_engine::event_line("create", "bad", "/bad-NAME", nanos);
                let (head, tail) = v.split_once("NAME").expect("placeholder");
                out.extend_from_slice(head.as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(tail.as_bytes());
            }
            Line::Huge(over) => {
                // Starts like an event, so a decoder that buffered it all would try.
                out.extend_from_slice(br#"{"Type":"container","Action":"create","pad":""#);
                out.resize(out.len() + (1 << 20) + over, b'x');
                out.extend_from_slice(b"\"}\n");
            }
        }
    }
    // The sentinel: always last, always valid.
    nanos += 1_000;
    out.extend_from_slice(valid(names.len(), nanos).as_bytes());
    names.push(format!("ok-{}", names.len()));
    (out, names)
}

/// Cut `body` at the given points (fractions of its length).
fn chunks(body: &[u8], cuts: &[f64]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|f| ((body.len() as f64) * f) as usize)
        .collect();
    at.push(0);
    at.push(body.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| body[w[0]..w[1]].to_vec()).collect()
}

fn check(lines: &[Line], cuts: &[f64]) -> Result<(), TestCaseError> {
    let (body, names) = body(lines);
    let chunks = chunks(&body, cuts);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let engine = fake_engine::start(fake_engine::Script {
            chunks: Arc::new(chunks),
            close: false,
        });
        let mut w = watch(DockerConfig::default().host(engine.host.clone()))
            .map_err(|e| TestCaseError::fail(format!("config: {e}")))?;
        let mut got = Vec::new();
        let run = async {
            while got.len() < names.len() {
                match w.next().await {
                    Some(Item::Event(e)) => {
                        prop_assert_eq!(e.kind, EventKind::Created);
                        got.push(e.id.to_string());
                    }
                    Some(Item::Status(Status::Disconnected { .. })) => {
                        prop_assert!(false, "disconnected after {} events", got.len());
                    }
                    Some(Item::Status(_)) => {}
                    None => prop_assert!(false, "the stream ended"),
                }
            }
            Ok(())
        };
        match tokio::time::timeout(Duration::from_secs(20), run).await {
            Ok(r) => r?,
            Err(_) => prop_assert!(false, "timed out with {:?} of {:?}", got, names),
        }
        prop_assert_eq!(&got, &names);
        // The first dial's history (which corrects its list) and its one
        // subscription.
        prop_assert_eq!(engine.events_requests.load(Ordering::SeqCst), 2);
        Ok(())
    })
}

proptest! {
    #[test]
    fn garbage_never_stops_or_loops_the_stream(
        lines in proptest::collection::vec(line(), 0..24),
        cuts in proptest::collection::vec(0.0f64..1.0, 0..16),
    ) {
        check(&lines, &cuts)?;
    }
}

/// The fixed worst case: every kind of garbage, then the sentinel, one byte per chunk
/// around the boundaries.
#[test]
fn every_kind_of_garbage_then_a_valid_event() {
    let mut lines = vec![Line::Valid, Line::Huge(1), Line::Valid];
    lines.extend(JSON_JUNK.iter().map(|j| Line::Json(j)));
    lines.push(Line::BadUtf8(vec![0xff, 0xfe]));
    lines.push(Line::Truncated(40));
    lines.push(Line::Bytes(vec![0, 1, 2, 0xc3]));
    let cuts: Vec<f64> = (1..200).map(|i| f64::from(i) / 200.0).collect();
    check(&lines, &cuts).expect("property");
}
