//! The `OpenAPI` document of `--serve` (issue #49) is true to the real server:
//! a `lookout docker --readiness --serve … --token-file …` against the real
//! dockerd is asked every route and every documented error (400 bad query,
//! 401 without or with a wrong token, 404, 405, 408), and each answer's
//! status code and content type are the ones the document gives that
//! operation, its JSON body valid against the schema (the `jsonschema`
//! crate, formats checked; NDJSON line by line, SSE frame by frame).
//!
//! Needs the engines: `cargo xtask engines up docker` (CI brings them up).
//! schemathesis fuzzes the same server in CI (`cargo xtask schemathesis`).

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

use lookout_e2e::engines;
use serde_json::Value;

mod common;
use common::{Containers, TempDir, WAIT};

/// The document as written (and embedded).
const DOCUMENT: &str = include_str!("../src/serve/openapi.json");

const TOKEN: &str = "openapi-test-token";

/// One answer, read whole.
struct Answer {
    status: u16,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The media type, without its parameters.
    fn media_type(&self) -> &str {
        self.header("content-type")
            .and_then(|c| c.split(';').next())
            .map_or("", str::trim)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `METHOD path` on a new connection (HTTP/1.1, `Connection: close`), the
/// answer read whole within [`WAIT`] (chunked or with a length).
fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        let _ = write!(head, "{k}: {v}\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).expect("a request");
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).expect("a status line");
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no status in {line:?}"));
    let mut headers = HashMap::new();
    loop {
        line.clear();
        r.read_line(&mut line).expect("a header line");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        loop {
            line.clear();
            r.read_line(&mut line).expect("a chunk size");
            let size = usize::from_str_radix(line.trim(), 16)
                .unwrap_or_else(|_| panic!("{method} {path}: chunk size {line:?}"));
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).expect("a chunk");
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(n) = headers.get("content-length") {
        body.resize(n.parse().expect("a length"), 0);
        r.read_exact(&mut body).expect("the body");
    } else {
        r.read_to_end(&mut body).expect("the body");
    }
    Answer {
        status,
        headers,
        body,
    }
}

/// The document, and what checks answers against it.
struct Spec {
    doc: Value,
}

/// `/a/b` as a JSON pointer's token (`~1` for `/`).
fn token_of(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

impl Spec {
    /// The document a server of one engine serves: the written one
    /// without `host` (which it refuses), checked here.
    fn served(answer: &Answer) -> Self {
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.media_type(), "application/json");
        let doc: Value = serde_json::from_slice(&answer.body).expect("the document is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        let mut written: Value = serde_json::from_str(DOCUMENT).expect("the document is JSON");
        let host = serde_json::json!({"$ref": "#/components/parameters/host"});
        let mut uses = 0;
        for item in written["paths"]
            .as_object_mut()
            .expect("paths")
            .values_mut()
        {
            for op in item.as_object_mut().expect("a path item").values_mut() {
                if let Some(list) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                    let before = list.len();
                    list.retain(|p| *p != host);
                    uses += before - list.len();
                }
            }
        }
        assert_eq!(uses, 3, "`host` on /events, /instances, /instances/{{id}}");
        written["components"]["parameters"]
            .as_object_mut()
            .expect("parameters")
            .remove("host");
        assert!(
            doc == written,
            "the served document is the written one without `host`"
        );
        Self { doc }
    }

    /// Whether `a` is valid against the schema at `pointer` in the
    /// document (its `$ref`s resolved in the document), else why not.
    fn validate(&self, pointer: &str, instance: &Value) -> Result<(), String> {
        let mut root = self.doc.clone();
        // A URI fragment: `{` and `}` (of `/instances/{id}`) percent-encoded.
        let fragment = pointer.replace('{', "%7B").replace('}', "%7D");
        root["$ref"] = Value::String(format!("#{fragment}"));
        root["$schema"] = Value::String("https://json-schema.org/draft/2020-12/schema".into());
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&root)
            .map_err(|e| format!("the schema at {pointer}: {e}"))?;
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{e} (at {})", e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// The response object of `status` for `path`'s GET (its pointer),
    /// `$ref` followed.
    fn response(&self, path: &str, status: u16) -> Option<String> {
        let at = format!("/paths/{}/get/responses/{status}", token_of(path));
        let r = self.doc.pointer(&at)?;
        match r.get("$ref").and_then(Value::as_str) {
            Some(to) => Some(to.trim_start_matches('#').to_owned()),
            None => Some(at),
        }
    }

    /// Checks `answer` to `GET` of the documented `path` (a template):
    /// status and content type documented, and the body valid.
    fn check(&self, path: &str, asked: &str, answer: &Answer) {
        let what = format!("GET {asked} → {}", answer.status);
        let response = self
            .response(path, answer.status)
            .unwrap_or_else(|| panic!("{what}: status not documented: {}", answer.text()));
        let media = answer.media_type();
        let at = format!("{response}/content/{}", token_of(media));
        assert!(
            self.doc.pointer(&at).is_some(),
            "{what}: content type {media:?} not documented"
        );
        let schema = format!("{at}/schema");
        let body = answer.text();
        match media {
            "application/json" => {
                let v: Value = serde_json::from_str(&body)
                    .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {body}"));
                self.validate(&schema, &v)
                    .unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
            }
            "application/x-ndjson" => {
                for line in body.lines() {
                    let v: Value = serde_json::from_str(line)
                        .unwrap_or_else(|e| panic!("{what}: a line not JSON ({e}): {line}"));
                    self.validate(&schema, &v)
                        .unwrap_or_else(|e| panic!("{what}: {e}: {line}"));
                }
            }
            "text/event-stream" => {
                for frame in body.split("\n\n").filter(|f| !f.trim().is_empty()) {
                    self.check_sse_frame(&what, frame);
                }
            }
            _ => assert!(
                self.validate(&schema, &Value::String(body.clone())).is_ok(),
                "{what}: a {media} body is not the string the document says"
            ),
        }
    }

    /// An SSE frame: `event: instance` holds an `Event`, `event: status` a
    /// `Status`; a comment is a keep-alive.
    fn check_sse_frame(&self, what: &str, frame: &str) {
        if frame.starts_with(':') {
            return;
        }
        let field = |name: &str| {
            frame
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                .unwrap_or_else(|| panic!("{what}: no `{name}` in {frame:?}"))
        };
        let schema = match field("event") {
            "instance" => "/components/schemas/Event",
            "status" => "/components/schemas/Status",
            other => panic!("{what}: an undocumented event {other:?}"),
        };
        let data: Value = serde_json::from_str(field("data"))
            .unwrap_or_else(|e| panic!("{what}: data not JSON ({e}): {frame}"));
        self.validate(schema, &data)
            .unwrap_or_else(|e| panic!("{what}: {e}: {frame}"));
    }
}

#[test]
fn every_answer_is_the_documented_one() {
    let Some(_lock) = engines::require("docker", false, engines::docker_up) else {
        return;
    };
    let label = format!("{}=1", common::unique("openapi", "label"));
    let name = common::unique("openapi", "c");
    let _containers = Containers(vec![name.clone()]);
    engines::docker_create_test_container(&name, &["--label", &label])
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = TempDir::new("openapi", "token");
    let token_file = dir.0.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("the token file");
    let token_file = token_file.to_string_lossy().into_owned();
    let (_lookout, addr) = common::serve_docker(
        &label,
        &engines::docker_host(),
        "127.0.0.1:0",
        &["--readiness", "--token-file", &token_file],
    );
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("Authorization", bearer.as_str())];
    let get = |path: &str| request(addr, "GET", path, &auth);
    let spec = Spec::served(&get("/openapi.json"));

    // Every route, answered 200 with what the document says.
    let instances = get("/instances");
    assert_eq!(instances.status, 200, "{}", instances.text());
    spec.check("/instances", "/instances", &instances);
    let listed: Value = serde_json::from_slice(&instances.body).expect("JSON");
    let id = listed[0]["instance"]
        .as_str()
        .unwrap_or_else(|| panic!("the test container is not listed: {listed}"))
        .to_owned();
    let ok: Vec<(&str, String)> = vec![
        ("/", "/".into()),
        ("/healthz", "/healthz".into()),
        ("/metrics", "/metrics".into()),
        ("/openapi.json", "/openapi.json".into()),
        ("/instances", format!("/instances?label={label}")),
        ("/instances/{id}", format!("/instances/{id}")),
        (
            "/instances/{id}",
            format!("/instances/{id}?wait=stopped&timeout=5s"),
        ),
        (
            "/instances/{id}",
            "/instances/no-such-one?wait=gone&timeout=5s".into(),
        ),
        ("/events", "/events?initial=true&follow=false".into()),
        (
            "/events",
            format!("/events?initial=true&follow=false&label={label}"),
        ),
        ("/events", "/events?follow=false".into()),
        ("/events", "/events?initial&follow=false".into()),
        ("/events", "/events?since=not-an-id&follow=false".into()),
    ];
    for (path, asked) in &ok {
        let a = get(asked);
        assert_eq!(a.status, 200, "GET {asked}: {}", a.text());
        spec.check(path, asked, &a);
    }
    // The present as NDJSON lines and as SSE frames, each an Event.
    let ndjson = get("/events?initial=true&follow=false");
    assert_eq!(ndjson.media_type(), "application/x-ndjson");
    assert!(
        ndjson.text().lines().any(|l| l.contains(&id)),
        "{}",
        ndjson.text()
    );
    let sse = request(
        addr,
        "GET",
        "/events?initial=true&follow=false",
        &[auth[0], ("Accept", "text/event-stream")],
    );
    assert_eq!(sse.status, 200);
    assert_eq!(sse.media_type(), "text/event-stream");
    assert!(sse.text().contains("event: instance"), "{}", sse.text());
    spec.check("/events", "/events (SSE)", &sse);

    errors(&spec, addr, &id);
    refusals(&spec, addr, &id);
    // Every path of the document was asked.
    let documented: Vec<&String> = spec.doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .collect();
    for path in documented {
        assert!(
            ok.iter().any(|(p, _)| *p == path.as_str()),
            "{path} is documented but not asked here"
        );
    }
}

/// The documented errors (400, 404, 408), each as the document says.
fn errors(spec: &Spec, addr: SocketAddr, id: &str) {
    let bearer = format!("Bearer {TOKEN}");
    let get = |path: &str| request(addr, "GET", path, &[("Authorization", bearer.as_str())]);
    let wait_running = format!("/instances/{id}?wait=running&timeout=100ms");
    let errors = [
        ("/", "/?nope=1", 400),
        ("/metrics", "/metrics?nope=1", 400),
        ("/openapi.json", "/openapi.json?x", 400),
        ("/instances", "/instances?label=novalue", 400),
        ("/instances", "/instances?host=a", 400),
        ("/events", "/events?initial=maybe", 400),
        ("/events", "/events?follow=sometimes", 400),
        ("/events", "/events?since=a&since=b", 400),
        ("/events", "/events?label=%ff=x", 400),
        ("/instances/{id}", "/instances/x?wait=up", 400),
        ("/instances/{id}", "/instances/x?timeout=1s", 400),
        (
            "/instances/{id}",
            "/instances/x?wait=running&timeout=2h",
            400,
        ),
        ("/instances/{id}", "/instances/no-such-one", 404),
        ("/instances/{id}", wait_running.as_str(), 408),
    ];
    for (path, asked, status) in errors {
        let a = get(asked);
        assert_eq!(a.status, status, "GET {asked}: {}", a.text());
        spec.check(path, asked, &a);
    }
}

/// 401 without or with a wrong token (`/` and `/healthz` ask for none),
/// 404 of an unknown path, 405 of another method.
fn refusals(spec: &Spec, addr: SocketAddr, id: &str) {
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("Authorization", bearer.as_str())];
    let get = |path: &str| request(addr, "GET", path, &auth);
    // 401: no token, a wrong one; `/` and `/healthz` ask for none.
    let secured = [
        "/events",
        "/instances",
        "/instances/{id}",
        "/metrics",
        "/openapi.json",
    ];
    for path in secured {
        let asked = path.replace("{id}", id);
        for headers in [&[][..], &[("Authorization", "Bearer wrong")][..]] {
            let a = request(addr, "GET", &asked, headers);
            assert_eq!(a.status, 401, "GET {asked} {headers:?}: {}", a.text());
            assert_eq!(a.header("www-authenticate"), Some("Bearer"));
            spec.check(path, &asked, &a);
        }
        let security = spec
            .doc
            .pointer(&format!("/paths/{}/get/security", token_of(path)));
        assert!(
            security.is_none(),
            "{path}: the document's global bearer security"
        );
    }
    for path in ["/", "/healthz"] {
        let open = spec
            .doc
            .pointer(&format!("/paths/{}/get/security", token_of(path)));
        assert_eq!(open, Some(&serde_json::json!([{}])), "{path} is open");
    }
    // An unknown path: 404 with the document's Error; another method: 405
    // with `Allow`, as the document's description says.
    let a = get("/nope");
    assert_eq!(a.status, 404);
    assert_eq!(a.media_type(), "application/json");
    let v: Value = serde_json::from_slice(&a.body).expect("JSON");
    spec.validate("/components/schemas/Error", &v)
        .unwrap_or_else(|e| panic!("404: {e}"));
    for path in ["/events", "/instances", "/healthz", "/openapi.json"] {
        let a = request(addr, "POST", path, &auth);
        assert_eq!(a.status, 405, "POST {path}: {}", a.text());
        assert!(
            a.header("allow").is_some_and(|m| m.contains("GET")),
            "POST {path}: {:?}",
            a.headers
        );
    }
}

/// The check is not vacuous: what the document does not say is refused.
#[test]
fn the_validator_refuses_what_the_document_does_not_say() {
    let spec = Spec {
        doc: serde_json::from_str(DOCUMENT).expect("the document is JSON"),
    };
    let event = serde_json::json!({"provider": "docker", "instance": "web", "kind": "started",
        "origin": "live", "at": "2026-12-07T10:00:03.500000000Z", "labels": {"app": "web"}});
    assert_eq!(spec.validate("/components/schemas/Event", &event), Ok(()));
    for (key, bad) in [
        ("kind", serde_json::json!("exploded")),
        ("at", serde_json::json!("yesterday")),
        ("labels", serde_json::json!({"app": 1})),
        ("exit_code", serde_json::json!("137")),
    ] {
        let mut e = event.clone();
        e[key] = bad;
        assert!(
            spec.validate("/components/schemas/Event", &e).is_err(),
            "{e}"
        );
    }
    let pointer = "/paths/~1instances~1{id}/get/responses/200/content/application~1json/schema";
    let gone = serde_json::json!({"provider": "docker", "instance": "web", "state": "gone"});
    assert_eq!(spec.validate(pointer, &gone), Ok(()));
    assert!(
        spec.validate(pointer, &serde_json::json!({"state": "gone"}))
            .is_err()
    );
    let error = "/components/schemas/Error";
    assert!(
        spec.validate(error, &serde_json::json!({"error": "x", "more": 1}))
            .is_err()
    );
}
