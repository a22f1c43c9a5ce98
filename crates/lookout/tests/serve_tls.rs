//! `lookout … --serve ADDR --serve-cert … --serve-key … [--serve-client-ca …]`
//! (issue #36): the built binary against the real dockerd over HTTPS, with
//! a CA, server and client certificates made here by rcgen. The clients:
//! curl, a rustls client of the test's (to see which certificate the server
//! shows), a plain TCP socket (a stalled handshake, plain HTTP), headless
//! Chromium (the page). Each `/metrics` read is parsed by
//! `prometheus-parse`.
//!
//! Needs the engines: `cargo xtask engines up docker chromium` (CI brings
//! them up), and curl.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]
// The metrics compared are counts and whole seconds: exact in f64.
#![allow(clippy::float_cmp)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use lookout_e2e::engines;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData, SerialNumber,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use sha2::Digest as _;
use tokio_rustls::rustls;

mod common;
use common::{Containers, Process, TempDir, WAIT, lines};

// ------------------------------------------------------------------ certificates

/// A test CA: its certificate (PEM) and what signs with it.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate signed by a [`Ca`], and its key.
struct Leaf {
    cert: String,
    key: String,
    der: Vec<u8>,
    /// The key's `SubjectPublicKeyInfo` (DER).
    spki: Vec<u8>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("CA certificate");
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(
        &self,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        serial: u64,
        not_after: Option<(i32, u8, u8)>,
    ) -> Leaf {
        let key = KeyPair::generate().expect("key");
        let sans: Vec<String> = names.iter().map(|&n| n.to_owned()).collect();
        let mut params = CertificateParams::new(sans).expect("params");
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![usage];
        params.serial_number = Some(SerialNumber::from(serial));
        if let Some((y, m, d)) = not_after {
            params.not_after = rcgen::date_time_ymd(y, m, d);
        }
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
            spki: key.subject_public_key_info(),
        }
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    fn server(&self, serial: u64, not_after: Option<(i32, u8, u8)>) -> Leaf {
        self.leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            serial,
            not_after,
        )
    }

    fn client(&self, name: &str) -> Leaf {
        self.leaf(&[name], ExtendedKeyUsagePurpose::ClientAuth, 1, None)
    }
}

/// The test's files, in a directory removed on drop.
struct Files(TempDir);

impl Files {
    fn new(what: &str) -> Self {
        Self(TempDir::new("serve_tls", what))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.0.join(name)
    }

    fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// Writes `name` as cert-manager and the kubelet do: a temporary file,
    /// renamed over it.
    fn put(&self, name: &str, text: &str) {
        let tmp = self.path(&format!(".{name}.tmp"));
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, self.path(name)).expect("rename");
    }

    /// `cert.pem` and `key.pem` of `leaf`, the key first.
    fn install(&self, leaf: &Leaf) {
        self.put("key.pem", &leaf.key);
        self.put("cert.pem", &leaf.cert);
    }
}

// ------------------------------------------------------------------ lookout

/// A running `lookout docker --json --serve 127.0.0.1:0 --serve-cert
/// cert.pem --serve-key key.pem EXTRA…`, once it serves and is connected.
struct Lookout {
    process: Process,
    addr: SocketAddr,
}

impl Lookout {
    fn start(label: &str, files: &Files, extra: &[&str]) -> Self {
        let (cert, key) = (files.arg("cert.pem"), files.arg("key.pem"));
        let mut args = vec!["--serve-cert", &cert, "--serve-key", &key];
        args.extend_from_slice(extra);
        let (process, addr) =
            common::serve_docker(label, &engines::docker_host(), "127.0.0.1:0", &args);
        Self { process, addr }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }
}

// ------------------------------------------------------------------ clients

/// What `curl` made of one request.
#[derive(Debug)]
struct Curl {
    /// curl's exit code (0: a response).
    exit: Option<i32>,
    /// The HTTP status (0: none).
    status: u16,
    body: String,
    stderr: String,
}

/// `curl -sS ARGS URL`, within 10 s.
fn curl(url: &str, args: &[&str]) -> Curl {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("run curl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (body, status) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    Curl {
        exit: out.status.code(),
        status: status.trim().parse().unwrap_or(0),
        body: body.to_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The samples of `/metrics` (curl with `args`).
fn scrape(lookout: &Lookout, args: &[&str]) -> prometheus_parse::Scrape {
    let r = curl(&lookout.url("/metrics"), args);
    assert_eq!(r.status, 200, "{r:?}");
    prometheus_parse::Scrape::parse(r.body.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("not the Prometheus text format ({e}): {}", r.body))
}

fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map_or(f64::NAN, |s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

const REFUSED: &str = "lookout_serve_tls_handshakes_refused_total";

/// Polls `check` every 20 ms until it holds, at most `WAIT`.
fn eventually(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + WAIT;
    loop {
        match check() {
            Ok(()) => return,
            Err(last) if Instant::now() >= deadline => {
                panic!("{what}: not within {WAIT:?}; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Waits until `/metrics` (curl with `args`) shows `want` for the metric.
fn metric_is(lookout: &Lookout, args: &[&str], name: &str, labels: &[(&str, &str)], want: f64) {
    eventually(&format!("{name}{labels:?} = {want}"), || {
        let got = sample(&scrape(lookout, args), name, labels);
        if (got - want).abs() < f64::EPSILON {
            Ok(())
        } else {
            Err(format!("{got}"))
        }
    });
}

/// A TLS handshake of the test's own (rustls, trusting `ca`, as
/// `localhost`): the certificate the server shows (DER), or why not.
fn peer_certificate(addr: SocketAddr, ca: &str) -> Result<Vec<u8>, String> {
    let provider = lookout_transport::shared_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::from_pem_slice(ca.as_bytes()).map_err(|e| e.to_string())?;
    roots.add(ca).map_err(|e| e.to_string())?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let mut tls =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    let mut tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(WAIT))
        .map_err(|e| e.to_string())?;
    while tls.is_handshaking() {
        tls.complete_io(&mut tcp).map_err(|e| e.to_string())?;
    }
    let chain = tls.peer_certificates().ok_or("no certificate")?;
    Ok(chain.first().ok_or("an empty chain")?.to_vec())
}

/// Waits until a new connection is shown `want`; how long that took.
fn shown(addr: SocketAddr, ca: &str, want: &[u8], what: &str) -> Duration {
    let start = Instant::now();
    eventually(what, || match peer_certificate(addr, ca) {
        Ok(der) if der == want => Ok(()),
        Ok(der) => Err(format!("another certificate ({} bytes)", der.len())),
        Err(e) => Err(e),
    });
    start.elapsed()
}

/// A stderr line of lookout's log (`--json`: `{"log":LEVEL,…}`) whose
/// message holds `part`.
fn log_line(p: &mut Process, level: &str, part: &str) -> Value {
    p.stderr(&format!("a {level} log with {part:?}"), |v| {
        v["log"] == level && v["message"].as_str().is_some_and(|m| m.contains(part))
    })
}

/// `curl -N` reading an SSE `/events` stream, its lines read on a thread;
/// killed on drop.
struct Stream {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Stream {
    fn open(url: &str, args: &[&str]) -> Self {
        let mut child = Command::new("curl")
            .args(["-sSN", "-H", "Accept: text/event-stream"])
            .args(args)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run curl");
        let lines = lines(child.stdout.take().expect("stdout"));
        Self { child, lines }
    }

    /// Waits for a `data:` line holding `part`.
    fn data_with(&self, part: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no data line with {part} within {WAIT:?}"));
            if line.starts_with("data:") && line.contains(part) {
                return line;
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------ tests

/// HTTPS with curl (`/healthz`, `/instances`, by name and by address, TLS
/// 1.2 and 1.3), the token on top; plain HTTP on the port answered 400, a
/// client that does not trust the certificate refused, each counted; a
/// pair that cannot load at start is exit 2 naming the file, flags without
/// their pair are refused.
#[test]
#[allow(clippy::too_many_lines)]
fn https_with_curl_token_and_bad_setup() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let files = Files::new("basics");
    let ca = Ca::new("lookout test CA");
    files.install(&ca.server(1, None));
    files.put("ca.pem", &ca.pem);
    files.put("token", "tls-T0ken\n");
    let label = format!("lookout.serve={}", common::unique("serve_tls", "basics"));
    let lookout = Lookout::start(&label, &files, &["--token-file", &files.arg("token")]);
    let cacert = files.arg("ca.pem");
    let trust = ["--cacert", cacert.as_str()];
    let with_token = ["--cacert", &cacert, "-H", "Authorization: Bearer tls-T0ken"];

    let r = curl(&lookout.url("/healthz"), &trust);
    assert_eq!((r.status, r.exit), (200, Some(0)), "{r:?}");
    let v: Value = serde_json::from_str(&r.body).expect("JSON");
    assert_eq!(v["status"], "connected");
    let by_name = format!("https://localhost:{}/healthz", lookout.addr.port());
    assert_eq!(curl(&by_name, &trust).status, 200);
    for version in [
        ["--tlsv1.2", "--tls-max", "1.2"],
        ["--tlsv1.3", "--tls-max", "1.3"],
    ] {
        let mut args = trust.to_vec();
        args.extend(version);
        assert_eq!(
            curl(&lookout.url("/healthz"), &args).status,
            200,
            "{version:?}"
        );
    }
    assert_eq!(curl(&lookout.url("/instances"), &trust).status, 401);
    let r = curl(&lookout.url("/instances"), &with_token);
    assert_eq!((r.status, r.body.as_str()), (200, "[]"), "{r:?}");

    // Plain HTTP on the TLS port: a plain answer that says what to do.
    let plain = curl(&format!("http://{}/healthz", lookout.addr), &[]);
    assert_eq!(plain.status, 400, "{plain:?}");
    assert!(plain.body.contains("https://"), "{plain:?}");
    // A client that does not trust the certificate gives up.
    let untrusted = curl(&lookout.url("/healthz"), &[]);
    assert_eq!(
        (untrusted.status, untrusted.exit),
        (0, Some(60)),
        "{untrusted:?}"
    );
    assert!(untrusted.stderr.contains("certificate"), "{untrusted:?}");
    metric_is(
        &lookout,
        &with_token,
        REFUSED,
        &[("reason", "not_tls")],
        1.0,
    );
    metric_is(
        &lookout,
        &with_token,
        REFUSED,
        &[("reason", "client_alert")],
        1.0,
    );
    let s = scrape(&lookout, &with_token);
    for reason in [
        "timeout",
        "no_client_cert",
        "bad_client_cert",
        "protocol",
        "other",
    ] {
        assert_eq!(sample(&s, REFUSED, &[("reason", reason)]), 0.0, "{reason}");
    }
    assert_eq!(sample(&s, "lookout_serve_tls_reloads_total", &[]), 0.0);
    // rcgen's default notAfter: 4096-01-01.
    let not_after = sample(
        &s,
        "lookout_serve_tls_cert_not_after_timestamp_seconds",
        &[],
    );
    assert!((not_after - 67_090_118_400.0).abs() < 1.0, "{not_after}");
    drop(lookout);

    // At start: exit 2, the file named, and why.
    files.put("other-key.pem", &ca.server(2, None).key);
    files.put("empty.pem", "");
    let (cert, key) = (files.arg("cert.pem"), files.arg("key.pem"));
    let (other_key, empty) = (files.arg("other-key.pem"), files.arg("empty.pem"));
    let missing = files.arg("missing.pem");
    let serve = ["docker", "--serve", "127.0.0.1:0"];
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--serve-cert", &cert, "--serve-key", &other_key],
            &["does not match", "other-key.pem", "cert.pem"],
        ),
        (
            &["--serve-cert", &missing, "--serve-key", &key],
            &["certificate file", "missing.pem"],
        ),
        (
            &["--serve-cert", &cert, "--serve-key", &empty],
            &["key file", "empty.pem", "PRIVATE KEY"],
        ),
        (
            &[
                "--serve-cert",
                &cert,
                "--serve-key",
                &key,
                "--serve-client-ca",
                &empty,
            ],
            &["client CA file", "empty.pem"],
        ),
        (&["--serve-cert", &cert], &["--serve-key"]),
        (&["--serve-key", &key], &["--serve-cert"]),
        (&["--serve-client-ca", &cert], &["--serve-cert"]),
    ];
    for (extra, says) in cases {
        let mut args = serve.to_vec();
        args.extend_from_slice(extra);
        let stderr = common::usage_error(&args);
        for part in *says {
            assert!(stderr.contains(part), "{extra:?}: {part:?} in {stderr}");
        }
        assert!(!stderr.contains("PRIVATE KEY-----"), "no key in {stderr}");
    }
    let stderr = common::usage_error(&["docker", "--serve-cert", &cert, "--serve-key", &key]);
    assert!(stderr.contains("--serve"), "{stderr}");
}

/// `lookout probe https://…`, the image's health check over TLS: against
/// the CA, or `--insecure`; under `--serve-client-ca` with the client
/// certificate only; plain `http://` to the TLS port is answered 400, a
/// failure; an `https://` URL without `--cacert` or `--insecure` exits 2.
#[test]
fn probe_over_https() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let files = Files::new("probe");
    let ca = Ca::new("lookout test CA");
    files.install(&ca.server(1, None));
    files.put("ca.pem", &ca.pem);
    let client = ca.client("probe");
    files.put("client.pem", &client.cert);
    files.put("client-key.pem", &client.key);
    let label = format!("lookout.serve={}", common::unique("serve_tls", "probe"));
    let lookout = Lookout::start(&label, &files, &["--serve-client-ca", &files.arg("ca.pem")]);
    let url = lookout.url("/healthz");
    let (cacert, cert, key) = (
        files.arg("ca.pem"),
        files.arg("client.pem"),
        files.arg("client-key.pem"),
    );
    let probe = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_lookout"))
            .arg("probe")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run lookout probe");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = probe(&[&url, "--cacert", &cacert, "--cert", &cert, "--key", &key]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("200"), "{out}");
    let (code, out, err) = probe(&[&url, "--insecure", "--cert", &cert, "--key", &key]);
    assert_eq!(code, Some(0), "{out}{err}");
    // No client certificate: the handshake is refused.
    let (code, _, err) = probe(&[&url, "--cacert", &cacert]);
    assert_eq!(code, Some(1), "{err}");
    // Plain HTTP to the TLS port.
    let plain = format!("http://127.0.0.1:{}/healthz", lookout.addr.port());
    let (code, _, err) = probe(&[&plain]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("400"), "{err}");
    // A server certificate from another CA is not trusted.
    let other = Ca::new("another CA");
    files.put("other.pem", &other.pem);
    let (code, _, err) = probe(&[
        &url,
        "--cacert",
        &files.arg("other.pem"),
        "--cert",
        &cert,
        "--key",
        &key,
    ]);
    assert_eq!(code, Some(1), "{err}");
    // Usage errors.
    for args in [vec![url.as_str()], vec![plain.as_str(), "--insecure"]] {
        let (code, _, err) = probe(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
    }
}

/// `--serve-client-ca`: a client certificate of that CA is let in (the
/// token still asked for on top); none, or one of another CA, is refused
/// in the handshake and counted by reason.
#[test]
fn client_certificates() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let files = Files::new("mtls");
    let ca = Ca::new("lookout test CA");
    let other = Ca::new("another CA");
    files.install(&ca.server(1, None));
    files.put("ca.pem", &ca.pem);
    let (client, stranger) = (ca.client("client"), other.client("stranger"));
    files.put("client.pem", &client.cert);
    files.put("client-key.pem", &client.key);
    files.put("stranger.pem", &stranger.cert);
    files.put("stranger-key.pem", &stranger.key);
    files.put("token", "tls-T0ken\n");
    let label = format!("lookout.serve={}", common::unique("serve_tls", "mtls"));
    let lookout = Lookout::start(
        &label,
        &files,
        &[
            "--serve-client-ca",
            &files.arg("ca.pem"),
            "--token-file",
            &files.arg("token"),
        ],
    );
    let cacert = files.arg("ca.pem");
    let (cert, key) = (files.arg("client.pem"), files.arg("client-key.pem"));
    let me = ["--cacert", &cacert, "--cert", &cert, "--key", &key];
    let mut me_with_token = me.to_vec();
    me_with_token.extend(["-H", "Authorization: Bearer tls-T0ken"]);

    let r = curl(&lookout.url("/healthz"), &me);
    assert_eq!((r.status, r.exit), (200, Some(0)), "{r:?}");
    assert_eq!(
        curl(&lookout.url("/instances"), &me).status,
        401,
        "the token on top"
    );
    assert_eq!(curl(&lookout.url("/instances"), &me_with_token).status, 200);
    for version in ["1.2", "1.3"] {
        let mut args = me.to_vec();
        args.extend(["--tls-max", version]);
        assert_eq!(
            curl(&lookout.url("/healthz"), &args).status,
            200,
            "TLS {version}"
        );
    }

    // No certificate: refused in the handshake (TLS 1.2 and 1.3).
    for version in ["1.2", "1.3"] {
        let r = curl(
            &lookout.url("/healthz"),
            &["--cacert", &cacert, "--tls-max", version],
        );
        assert_eq!(r.status, 0, "TLS {version}: {r:?}");
        assert_ne!(r.exit, Some(0), "{r:?}");
    }
    // One of another CA: refused too.
    let (scert, skey) = (files.arg("stranger.pem"), files.arg("stranger-key.pem"));
    let r = curl(
        &lookout.url("/healthz"),
        &["--cacert", &cacert, "--cert", &scert, "--key", &skey],
    );
    assert_eq!(r.status, 0, "{r:?}");
    metric_is(
        &lookout,
        &me_with_token,
        REFUSED,
        &[("reason", "no_client_cert")],
        2.0,
    );
    metric_is(
        &lookout,
        &me_with_token,
        REFUSED,
        &[("reason", "bad_client_cert")],
        1.0,
    );
    let s = scrape(&lookout, &me_with_token);
    assert_eq!(sample(&s, REFUSED, &[("reason", "client_alert")]), 0.0);
}

/// Rotation as cert-manager does it (key and certificate renamed over the
/// old, one after the other): an open SSE stream goes on over the old
/// handshake and still delivers a container change; new connections get
/// the new certificate (its notAfter in `/metrics`). How soon is printed.
#[test]
fn rotation_keeps_open_streams() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let files = Files::new("rotation");
    let ca = Ca::new("lookout test CA");
    let (old, new) = (ca.server(1, None), ca.server(2, Some((2040, 1, 1))));
    files.install(&old);
    files.put("ca.pem", &ca.pem);
    let name = common::unique("serve_tls", "rotation");
    let label = format!("lookout.serve={name}");
    let _containers = Containers(vec![name.clone()]);
    let lookout = Lookout::start(&label, &files, &[]);
    let cacert = files.arg("ca.pem");
    let trust = ["--cacert", cacert.as_str()];
    assert_eq!(
        peer_certificate(lookout.addr, &ca.pem).as_deref(),
        Ok(&old.der[..])
    );

    let stream = Stream::open(&lookout.url("/events"), &trust);
    // Open: the hub counts it (stdout is the other subscription).
    metric_is(&lookout, &trust, "lookout_subscribers", &[], 2.0);

    files.install(&new);
    let took = shown(lookout.addr, &ca.pem, &new.der, "the new certificate");
    eprintln!("rotation: new handshakes use the new certificate {took:?} after the rename");
    engines::docker_create_test_container(&name, &["--label", &label])
        .unwrap_or_else(|e| panic!("{e}"));
    let line = stream.data_with(&name);
    assert!(line.contains("\"created\""), "{line}");
    metric_is(&lookout, &trust, "lookout_subscribers", &[], 2.0);
    let s = scrape(&lookout, &trust);
    // One reload (a check between the two renames would also have seen a
    // key without its certificate: a failure, then this).
    assert_eq!(sample(&s, "lookout_serve_tls_reloads_total", &[]), 1.0);
    // 2040-01-01T00:00:00Z.
    let not_after = sample(
        &s,
        "lookout_serve_tls_cert_not_after_timestamp_seconds",
        &[],
    );
    assert!((not_after - 2_208_988_800.0).abs() < 1.0, "{not_after}");
}

/// A reload that fails (the new key written, its certificate not yet)
/// keeps the pair in use: handshakes go on with the old certificate, a
/// warning (a JSON line under --json) and the failure metric say so; the
/// certificate written next loads. SIGHUP reloads too (and does not end
/// lookout).
#[test]
fn broken_pair_on_reload_keeps_the_old_and_sighup() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let files = Files::new("broken");
    let ca = Ca::new("lookout test CA");
    let (old, new) = (ca.server(1, None), ca.server(2, None));
    files.install(&old);
    files.put("ca.pem", &ca.pem);
    let label = format!("lookout.serve={}", common::unique("serve_tls", "broken"));
    let mut lookout = Lookout::start(&label, &files, &[]);
    let cacert = files.arg("ca.pem");
    let trust = ["--cacert", cacert.as_str()];

    // Step one of two: the key alone.
    files.put("key.pem", &new.key);
    let warning = log_line(&mut lookout.process, "warn", "TLS reload failed");
    let message = warning["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("does not match") && message.contains("key.pem"),
        "{warning}"
    );
    metric_is(
        &lookout,
        &trust,
        "lookout_serve_tls_reload_failures_total",
        &[],
        1.0,
    );
    assert_eq!(
        peer_certificate(lookout.addr, &ca.pem).as_deref(),
        Ok(&old.der[..]),
        "the old pair still serves"
    );
    // Step two: its certificate.
    files.put("cert.pem", &new.cert);
    let took = shown(lookout.addr, &ca.pem, &new.der, "the new pair");
    eprintln!("reload after a failed one: {took:?}");
    log_line(&mut lookout.process, "info", "reloaded (changed)");
    let s = scrape(&lookout, &trust);
    assert_eq!(sample(&s, "lookout_serve_tls_reloads_total", &[]), 1.0);
    assert_eq!(
        sample(&s, "lookout_serve_tls_reload_failures_total", &[]),
        1.0
    );

    // SIGHUP: read again, though nothing changed.
    lookout.process.signal("HUP");
    log_line(&mut lookout.process, "info", "reloaded (SIGHUP)");
    metric_is(
        &lookout,
        &trust,
        "lookout_serve_tls_reloads_total",
        &[],
        2.0,
    );
    assert_eq!(curl(&lookout.url("/healthz"), &trust).status, 200);
    assert!(
        lookout
            .process
            .child
            .try_wait()
            .expect("try_wait")
            .is_none(),
        "SIGHUP does not end lookout"
    );
}

/// A client that sends half a `ClientHello` and stalls is closed after the
/// head timeout (10 s) and counted as `timeout`; meanwhile other clients
/// are served at once (the handshake is not in the accept loop).
#[test]
fn stalled_handshake_times_out() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let files = Files::new("stall");
    let ca = Ca::new("lookout test CA");
    files.install(&ca.server(1, None));
    files.put("ca.pem", &ca.pem);
    let label = format!("lookout.serve={}", common::unique("serve_tls", "stall"));
    let lookout = Lookout::start(&label, &files, &[]);
    let cacert = files.arg("ca.pem");
    let trust = ["--cacert", cacert.as_str()];
    // Warm (one handshake done), then what lookout holds before.
    assert_eq!(curl(&lookout.url("/healthz"), &trust).status, 200);
    let (fds, rss) = (lookout.process.fds(), lookout.process.rss_kib());

    let mut stalled = TcpStream::connect(lookout.addr).expect("connect");
    let since = Instant::now();
    // A handshake record announcing 512 bytes, of which 9 come.
    stalled
        .write_all(&[
            0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0, 0, 0,
        ])
        .expect("half a hello");
    stalled
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a read timeout");
    let started = Instant::now();
    let r = curl(&lookout.url("/healthz"), &trust);
    assert_eq!(r.status, 200, "{r:?}");
    let beside = started.elapsed();
    assert!(beside < Duration::from_secs(5), "{beside:?}");
    let mut buf = [0u8; 64];
    let read = stalled.read(&mut buf);
    let closed_after = since.elapsed();
    assert!(
        matches!(read, Ok(0)) || read.is_err(),
        "closed without an answer: {read:?}"
    );
    assert!(
        (Duration::from_secs(9)..Duration::from_secs(13)).contains(&closed_after),
        "{closed_after:?}"
    );
    metric_is(&lookout, &trust, REFUSED, &[("reason", "timeout")], 1.0);
    drop(stalled);
    let deadline = Instant::now() + Duration::from_secs(10);
    while lookout.process.fds() > fds {
        assert!(
            Instant::now() < deadline,
            "descriptors: {fds} before, {} now",
            lookout.process.fds()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "stalled handshake closed after {closed_after:?}; another client served in {beside:?} \
         meanwhile; RSS {rss} -> {} KiB, fds {fds} -> {}",
        lookout.process.rss_kib(),
        lookout.process.fds()
    );
}

const STATUS: &str = "document.getElementById('status')?.dataset.state ?? null";

/// The page at `/` over HTTPS in headless Chromium, which trusts the test
/// certificate's key alone (`--ignore-certificate-errors-spki-list`): it
/// goes live and shows a container created after.
#[test]
fn page_in_chromium_over_https() {
    use lookout_e2e::browser::Browser;
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let files = Files::new("chromium");
    let ca = Ca::new("lookout test CA");
    let server = ca.server(1, None);
    files.install(&server);
    let name = common::unique("serve_tls", "page");
    let label = format!("lookout.serve={name}");
    let _containers = Containers(vec![name.clone()]);
    let lookout = Lookout::start(&label, &files, &[]);
    let spki = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&server.spki));
    let trust = format!("--ignore-certificate-errors-spki-list={spki}");
    let browser = Browser::start_with(&[&trust]).unwrap_or_else(|e| panic!("{e}"));
    let mut page = browser.page().unwrap_or_else(|e| panic!("{e}"));
    page.navigate(&lookout.url("/"))
        .unwrap_or_else(|e| panic!("{e}"));
    let is = |want: &'static str| move |v: &Value| v == want;
    page.wait_for(STATUS, WAIT, is("connected"))
        .unwrap_or_else(|e| panic!("the page goes live over https: {e}"));
    let protocol = page
        .eval("location.protocol")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(protocol, "https:");
    engines::docker_create_test_container(&name, &["--label", &label])
        .unwrap_or_else(|e| panic!("{e}"));
    let row = format!(
        "(() => {{ const r = document.querySelector('#instances tbody tr[data-instance=\"{name}\"]'); \
         return r ? r.cells[2].textContent : null; }})()"
    );
    page.wait_for(&row, WAIT, is("stopped"))
        .unwrap_or_else(|e| panic!("the created container in the table: {e}"));
}
