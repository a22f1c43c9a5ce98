//! The fast path against `serde_json`: real lines, hand-written corner
//! cases, every line one edit away from a real one, and random lines from a
//! small JSON grammar. Each must be read the same, or given up on.

use super::*;
use crate::protocol::cursor::Cursor;
use crate::testing::event;

/// Asserts the fast path agrees with `serde_json` on `line`; whether it
/// read it.
#[track_caller]
fn agrees(line: &[u8]) -> bool {
    if let Err(difference) = fast_path_agrees(line) {
        panic!("{difference}");
    }
    fast(line.trim_ascii()).is_some()
}

/// dockerd 27's line (the firehose bench's), Docker 29's without the legacy
/// fields, Podman's, and the unit tests' own.
fn real_lines() -> Vec<String> {
    let docker = concat!(
        r#"{"status":"create","id":"ab12","from":"nginx:1.27","Type":"container","Action":"create","#,
        r#""Actor":{"ID":"ab12","Attributes":{"com.docker.compose.project":"bench","#,
        r#""com.docker.compose.service":"web","image":"nginx:1.27","maintainer":"NGINX Docker Maintainers","#,
        r#""name":"/fh-1","tier":"frontend"}},"scope":"local","time":1764460800,"timeNano":1764460800000001000}"#
    );
    let docker_29 = concat!(
        r#"{"Type":"container","Action":"die","Actor":{"ID":"ab12","Attributes":{"exitCode":"137","#,
        r#""image":"nginx","name":"web"}},"scope":"local","time":1764460800,"timeNano":1764460800000001000}"#
    );
    let podman = concat!(
        r#"{"status":"died","id":"5d1f","from":"quay.io/podman/hello:latest","Type":"container","#,
        r#""Action":"died","Actor":{"ID":"5d1f","Attributes":{"containerExitCode":"0","image":"quay.io/podman/hello:latest","#,
        r#""name":"hello","podId":""}},"scope":"local","time":1700000000,"timeNano":1700000000123456789}"#
    );
    vec![
        docker.to_owned(),
        docker_29.to_owned(),
        podman.to_owned(),
        event("start", "abc", "/web", 5_000_000_001),
    ]
}

#[test]
fn real_lines_take_the_fast_path() {
    for line in real_lines() {
        assert!(agrees(line.as_bytes()), "the fast path gave up on {line}");
        let fast = fast(line.as_bytes()).expect("read");
        assert!(fast.facts.is_some() && fast.wire.attributes.is_some());
    }
    let lines = real_lines();
    let d = fast(lines[1].as_bytes()).expect("read");
    assert_eq!(d.wire.action.str(), Some("die"));
    assert_eq!(
        d.wire.time(),
        Some(Cursor::from_unix_nanos(1_764_460_800_000_001_000))
    );
    assert_eq!(
        d.wire.attributes,
        Some(r#"{"exitCode":"137","image":"nginx","name":"web"}"#)
    );
    let facts = d.facts.expect("facts");
    assert_eq!((facts.name, facts.exit_code()), (Some("web"), Some(137)));
}

#[test]
fn corner_cases_agree_or_give_up() {
    // Read by the fast path.
    for line in [
        "{}",
        r#" { "Type" : "container" , "Actor" : { } } "#,
        r#"{"Actor":{"ID":"a","Attributes":null},"Actor":{"ID":"b"}}"#,
        r#"{"Actor":{"Attributes":{"name":"a"}},"Actor":{"ID":"b","Attributes":[1,{"name":"x"}]}}"#,
        r#"{"Actor":{"Attributes":{"x":{"a":[[],{},[{"b":"\"]}\\\/\b\f\n\r\t\u00e9"}]]},"name":"n","name":"m"}}}"#,
        r#"{"a":-0.5e+10,"b":[true,false,null,0,-1,1.25,3E7,2e-3],"c":"é😀","timeNano":0,"time":9223372036854775807}"#,
        r#"{"Type":"a","Type":"b","Action":"","status":"s","id":"i"}"#,
        "{\"Actor\":{\"Attributes\":\t{ }\n}}",
    ] {
        assert!(agrees(line.as_bytes()), "the fast path gave up on {line}");
    }
    // Given up (serde_json reads them, or refuses them).
    for line in [
        r#"{"Type":"con\u0074ainer"}"#,
        r#"{"Ty\u0070e":"container"}"#,
        r#"{"Type":7}"#,
        r#"{"Actor":"x"}"#,
        r#"{"Actor":{"ID":null}}"#,
        r#"{"timeNano":-5}"#,
        r#"{"timeNano":1.5}"#,
        r#"{"timeNano":1e3}"#,
        r#"{"timeNano":9223372036854775808}"#,
        r#"{"timeNano":01}"#,
        r#"{"Actor":{"Attributes":{"name":7}}}"#,
        r#"{"Actor":{"Attributes":{"name":"\/x"}}}"#,
        r#"{"Actor":{"Attributes":{"exitCode":"\u0031"}}}"#,
        r#"{"a":"\x"}"#,
        r#"{"a":"\u00g0"}"#,
        "{\"a\":\"\u{1}\"}",
        r#"{"a":01}"#,
        r#"{"a":1.}"#,
        r#"{"a":1e}"#,
        r#"{"a":-}"#,
        r#"{"a":tru}"#,
        r#"{"a":[1,]}"#,
        r#"{"a":{"b":1,}}"#,
        r#"{"a":1,}"#,
        r#"{"a" 1}"#,
        r#"{"a":[1}"#,
        r#"{"a":{"b"}}"#,
        "{} x",
        "[1]",
    ] {
        assert!(!agrees(line.as_bytes()), "the fast path read {line}");
    }
    // Invalid UTF-8 in a skipped string, and nesting past the bound.
    assert!(!agrees(b"{\"a\":\"\xff\"}"));
    let deep = format!(r#"{{"a":{}{}}}"#, "[".repeat(65), "]".repeat(65));
    assert!(!agrees(deep.as_bytes()));
    let deep = format!(r#"{{"a":{}{}}}"#, "[".repeat(64), "]".repeat(64));
    assert!(agrees(deep.as_bytes()));
}

/// Bytes an edit puts in a line: JSON's structure and the starts of its
/// tokens, escapes, controls and invalid UTF-8.
const EDITS: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"0",
    b"1",
    b"-",
    b".",
    b"e",
    b"+",
    b" ",
    b"\t",
    b"\x01",
    b"\xff",
    b"u",
    b"n",
    b"t",
    b"f",
    b"\\u0041",
    b"\\\"",
    b"null",
    b"{}",
    b"[]",
    b"\"x\"",
    b"1.5",
    b"-0",
    b"99999999999999999999",
];

#[test]
fn every_line_one_edit_away_agrees() {
    let mut read = 0usize;
    let mut total = 0usize;
    for line in real_lines() {
        let line = line.as_bytes();
        for at in 0..=line.len() {
            let (head, tail) = line.split_at(at);
            let mut edited = Vec::with_capacity(line.len() + 24);
            let mut check = |edited: &[u8]| {
                total += 1;
                read += usize::from(agrees(edited));
            };
            // Deleted, and each edit put in place of the byte or before it.
            if let Some((_, rest)) = tail.split_first() {
                edited.extend_from_slice(head);
                edited.extend_from_slice(rest);
                check(&edited);
                for e in EDITS {
                    for rest in [rest, tail] {
                        edited.clear();
                        edited.extend_from_slice(head);
                        edited.extend_from_slice(e);
                        edited.extend_from_slice(rest);
                        check(&edited);
                    }
                }
            }
        }
    }
    // Most edits break the JSON; those in a string's text do not.
    assert!(read > total / 20, "the fast path read {read} of {total}");
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

const KEYS: &[&str] = &[
    "Type",
    "Action",
    "status",
    "id",
    "timeNano",
    "time",
    "Actor",
    "ID",
    "Attributes",
    "name",
    "exitCode",
    "containerExitCode",
    "scope",
    "x",
    "na\\u006de",
    "",
];

const SCALARS: &[&str] = &[
    "\"container\"",
    "\"\"",
    "\"/web\"",
    "\"\\/web\"",
    "\"a\\\"b\"",
    "\"137\"",
    "\" 3 \"",
    "0",
    "-1",
    "17",
    "1.5",
    "2e3",
    "9223372036854775807",
    "9223372036854775808",
    "1e999",
    "true",
    "false",
    "null",
    "\"é\"",
    "\"\\ud800\"",
];

fn value(rng: &mut Rng, depth: u32, out: &mut String) {
    let ws = [" ", "", "", "\n"];
    out.push_str(rng.pick(&ws));
    match (depth, rng.below(6)) {
        (0, _) | (_, 0..=2) => out.push_str(rng.pick(SCALARS)),
        (_, 3) => {
            out.push('[');
            for i in 0..rng.below(4) {
                if i > 0 {
                    out.push(',');
                }
                value(rng, depth - 1, out);
            }
            out.push(']');
        }
        _ => object(rng, depth - 1, out),
    }
    out.push_str(rng.pick(&ws));
}

fn object(rng: &mut Rng, depth: u32, out: &mut String) {
    out.push('{');
    for i in 0..rng.below(6) {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        out.push_str(rng.pick(KEYS));
        out.push_str("\":");
        value(rng, depth, out);
    }
    out.push('}');
}

#[test]
fn random_lines_agree() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut read = 0;
    let mut line = String::new();
    for _ in 0..20_000 {
        line.clear();
        object(&mut rng, 3, &mut line);
        read += usize::from(agrees(line.as_bytes()));
    }
    assert!(read > 1_000, "the fast path read {read} of 20 000");
}

#[test]
fn a_string_stops_at_its_first_quote_backslash_or_control() {
    for len in 0..50 {
        for stop in [b'"', b'\\', b'\n', 0x1f] {
            for at in 0..len {
                let mut text = vec![b'a'; len];
                text[at] = stop;
                if at + 1 < len {
                    text[at + 1] = b'"';
                }
                assert_eq!(string_stop(&text), Some(at), "{len} bytes, {stop} at {at}");
            }
        }
        assert_eq!(string_stop(&vec![b' '; len]), None);
        assert_eq!(string_stop("é😀".repeat(len).as_bytes()), None);
    }
}

#[test]
fn the_word_at_a_time_stop_is_the_first_stop() {
    let mut rng = Rng(7);
    // Bytes around the stops' values, and high ones.
    let pool = [
        b'"', b'\\', 0, 0x1f, 0x20, 0x21, b'!', b'#', b'[', b']', 0x7f, 0x80, 0xa2, 0xdc, 0xff,
        b'a',
    ];
    for _ in 0..50_000 {
        let len = rng.below(40);
        let bytes: Vec<u8> = (0..len).map(|_| pool[rng.below(pool.len())]).collect();
        let expected = bytes
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
        assert_eq!(string_stop(&bytes), expected, "{bytes:?}");
    }
}
