//! TLS, on private clusters of the test's own whose client URLs are
//! `https://` (the test CA's server certificate for 127.0.0.1, from
//! `crates/moby/tests/certs`): the port refuses plain http; with the CA, a
//! record written is read back as events (the plain-http metrics port
//! serves `/health`); without a CA, and with a CA that
//! did not issue the member's certificate, the watch is `Disconnected`
//! naming why. With `--client-cert-auth` (this crate's test certificates,
//! see `tests/certs/README.md`), a client without a certificate is
//! refused, and one showing the CA's client certificate reads.

// The private cluster starts (blocking, bounded waits) on a thread of the
// test's own.
#![allow(clippy::disallowed_methods)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{chain, client_of, connected_at_once, events, fast_config, next_item};
use lookout_core::{Item, Status};
use lookout_engines as engines;
use lookout_etcd::model::State;
use lookout_etcd::{ConfigError, EtcdConfig, Tls};

/// lookout-moby's test CA: `ca.pem`, `cert.pem`/`key.pem` (a client),
/// `server-cert.pem`/`server-key.pem` (127.0.0.1, server auth only).
const MOBY: &str = "crates/moby/tests/certs";
/// This crate's, the same files; the member's certificate allows client
/// auth too, which etcd's gateway needs with `--client-cert-auth` (see
/// `tests/certs/README.md`).
const ETCD: &str = "crates/provider-etcd/tests/certs";

fn certs(set: &str) -> PathBuf {
    engines::workspace_root().join(set)
}

fn cert(set: &str, f: &str) -> String {
    certs(set).join(f).display().to_string()
}

/// Member flags: the server certificate of `set`, and `more`.
fn server_flags(set: &str, more: &[String]) -> Vec<String> {
    let mut flags = vec![
        format!("--cert-file={}", cert(set, "server-cert.pem")),
        format!("--key-file={}", cert(set, "server-key.pem")),
    ];
    flags.extend(more.iter().cloned());
    flags
}

/// Starts a TLS cluster `name` on `base + 1..3` (clients), `base + 11..13`
/// (peers), `base + 21..23` (metrics, plain http for `/health`).
async fn tls_cluster(name: &'static str, base: u16, flags: Vec<String>) -> engines::EtcdCluster {
    tokio::task::spawn_blocking(move || {
        let ports = |off: u16| [base + off + 1, base + off + 2, base + off + 3];
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        engines::EtcdCluster::start_tls(
            name,
            ports(0),
            ports(10),
            ports(10).map(|p| format!("http://127.0.0.1:{p}")),
            ports(20),
            &flags,
        )
        .unwrap_or_else(|e| panic!("the private cluster {name}: {e}"))
    })
    .await
    .expect("started")
}

/// What the member on `port` answers a plain-http `GET /health`.
fn plain_http_answer(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    // A member that closes a plain-http request unanswered may close before
    // the request is all written (a broken pipe): what it answered is the
    // finding, and a port that answers takes the whole request.
    let _ = write!(
        s,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// The TLS of the files of `set`: `ca`, and the client's `identity`.
fn tls(set: &str, ca: &str, identity: Option<(&str, &str)>) -> Tls {
    let dir = certs(set);
    let (c, k) = identity.map_or((PathBuf::new(), PathBuf::new()), |(c, k)| {
        (dir.join(c), dir.join(k))
    });
    Tls::from_files(&dir.join(ca), identity.map(|_| (c.as_path(), k.as_path())))
        .unwrap_or_else(|e| panic!("the TLS files: {e}"))
}

fn with_tls(c: EtcdConfig, tls: Option<Tls>) -> EtcdConfig {
    match tls {
        Some(tls) => c.tls(tls),
        None => c,
    }
}

/// The first item of a watch with `config`: a `Disconnected`, its error
/// chain.
async fn refused(config: EtcdConfig) -> String {
    let mut watch = lookout_etcd::watch(config).expect("config");
    match next_item(&mut watch).await {
        Item::Status(Status::Disconnected { error, .. }) => chain(&*error),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_verified_by_the_ca() {
    // A private cluster of its own: started only where the engines may run.
    if engines::skips("etcd") {
        return;
    }
    let cluster = tls_cluster("etcd-tls", 12770, server_flags(MOBY, &[])).await;
    let endpoints = cluster.endpoints();
    assert!(
        endpoints.starts_with("https://127.0.0.1:12771,"),
        "{endpoints}"
    );
    // The client port speaks TLS only (etcd closes a plain-http request
    // unanswered; the metrics port answers it).
    let plain = plain_http_answer(12771);
    assert!(!plain.contains("\"health\""), "{plain}");
    assert!(plain_http_answer(12791).contains("\"health\":\"true\""));
    let prefix = "lookout-test/tls";

    // No CA, a CA that did not issue the member's certificate: refused,
    // and the watch says why.
    let none = refused(fast_config(&endpoints, prefix, false)).await;
    assert!(none.contains("no CA certificate"), "{none}");
    let other_ca = tls(MOBY, "cert.pem", None);
    let wrong = refused(with_tls(
        fast_config(&endpoints, prefix, false),
        Some(other_ca),
    ))
    .await;
    assert!(
        wrong.contains("invalid peer certificate") && wrong.contains("UnknownIssuer"),
        "{wrong}"
    );

    // The CA: a record written over TLS is read back as events.
    let ca = tls(MOBY, "ca.pem", None);
    assert!(format!("{ca:?}").contains("ca.pem"), "{ca:?}");
    let mut watch = lookout_etcd::watch(with_tls(
        fast_config(&endpoints, prefix, false),
        Some(ca.clone()),
    ))
    .expect("config");
    connected_at_once(&mut watch, 8).await;
    let writer = client_of(&endpoints, Duration::from_secs(2)).with_tls(Some(ca));
    common::put(&writer, prefix, "a", State::Running, false).await;
    assert_eq!(
        events(&mut watch, 2).await,
        ["src/a created live", "src/a started live"]
    );
    common::put(&writer, prefix, "a", State::Stopped, false).await;
    assert_eq!(events(&mut watch, 1).await, ["src/a stopped live"]);
    drop(watch);
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate_required() {
    // A private cluster of its own: started only where the engines may run.
    if engines::skips("etcd") {
        return;
    }
    let flags = server_flags(
        ETCD,
        &[
            format!("--trusted-ca-file={}", cert(ETCD, "ca.pem")),
            "--client-cert-auth".to_owned(),
        ],
    );
    let cluster = tls_cluster("etcd-tls-client", 12870, flags).await;
    let endpoints = cluster.endpoints();
    let prefix = "lookout-test/tls-client";

    // Without a client certificate: refused.
    let anonymous = refused(with_tls(
        fast_config(&endpoints, prefix, false),
        Some(tls(ETCD, "ca.pem", None)),
    ))
    .await;
    assert!(anonymous.contains("CertificateRequired"), "{anonymous}");

    // With the test CA's client certificate: read back.
    let identity = tls(ETCD, "ca.pem", Some(("cert.pem", "key.pem")));
    let mut watch = lookout_etcd::watch(with_tls(
        fast_config(&endpoints, prefix, false),
        Some(identity.clone()),
    ))
    .expect("config");
    connected_at_once(&mut watch, 8).await;
    let writer = client_of(&endpoints, Duration::from_secs(2)).with_tls(Some(identity));
    common::put(&writer, prefix, "b", State::Running, false).await;
    assert_eq!(
        events(&mut watch, 2).await,
        ["src/b created live", "src/b started live"]
    );
    drop(watch);
    drop(cluster);
}

#[test]
fn unusable_files_are_a_config_error_naming_the_file() {
    let missing = Path::new("/nonexistent/lookout-etcd-ca.pem");
    let e = Tls::from_files(missing, None).expect_err("no such file");
    assert!(matches!(e, ConfigError::Tls(_)), "{e:?}");
    assert!(
        e.to_string().contains("/nonexistent/lookout-etcd-ca.pem"),
        "{e}"
    );
    // A key that is not the certificate's.
    let dir = certs(MOBY);
    let e = Tls::from_files(
        &dir.join("ca.pem"),
        Some((&dir.join("cert.pem"), &dir.join("server-key.pem"))),
    )
    .expect_err("a key of another certificate");
    assert!(e.to_string().contains("cert.pem"), "{e}");
}
