//! `lookout etcd --cacert/--cert/--key` and `lookout docker --publish
//! etcds://… --etcd-cacert/--etcd-cert/--etcd-key` against a private
//! 3-member cluster of the test's own on `https://` client URLs that
//! requires client certificates (`--client-cert-auth`; lookout-etcd's test
//! certificates, see `crates/provider-etcd/tests/certs/README.md`): with a
//! CA that did not issue the members' certificates `lookout etcd` prints a
//! `disconnected` naming the certificate error; with the right files the
//! publisher writes over TLS and `lookout etcd` reads the same events.
//! TLS endpoints without a CA file are a usage error.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{publish_and_read_back, refusal, unique, usage_error};
use lookout_e2e::engines;

/// The private cluster's client ports (https), peer ports, metrics ports
/// (plain http `/health`).
const CLIENTS: [u16; 3] = [12971, 12972, 12973];
const PEERS: [u16; 3] = [12981, 12982, 12983];
const METRICS: [u16; 3] = [12991, 12992, 12993];

fn cert(set: &str, f: &str) -> String {
    engines::workspace_root()
        .join(set)
        .join(f)
        .display()
        .to_string()
}

/// lookout-etcd's test certificates (the cluster's).
fn etcd_cert(f: &str) -> String {
    cert("crates/provider-etcd/tests/certs", f)
}

#[test]
fn lookout_publishes_and_reads_over_tls_with_a_client_certificate() {
    let Some(_docker) = common::require_docker(false) else {
        return;
    };
    let flags = [
        format!("--cert-file={}", etcd_cert("server-cert.pem")),
        format!("--key-file={}", etcd_cert("server-key.pem")),
        format!("--trusted-ca-file={}", etcd_cert("ca.pem")),
        "--client-cert-auth".to_owned(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let cluster = engines::EtcdCluster::start_tls(
        "etcd-cli-tls",
        CLIENTS,
        PEERS,
        PEERS.map(|p| format!("http://127.0.0.1:{p}")),
        METRICS,
        &flags,
    )
    .unwrap_or_else(|e| panic!("the private cluster: {e}"));
    let endpoints = cluster.endpoints();
    assert!(endpoints.starts_with("https://"), "{endpoints}");
    let prefix = unique("etcd_tls", "p");
    let (ca, client_cert, client_key) = (
        etcd_cert("ca.pem"),
        etcd_cert("cert.pem"),
        etcd_cert("key.pem"),
    );
    let identity = ["--cert", client_cert.as_str(), "--key", client_key.as_str()];

    // A CA that did not issue the members' certificates: disconnected,
    // naming the certificate error.
    let other_ca = cert("crates/moby/tests/certs", "ca.pem");
    let error = refusal(&endpoints, &prefix, &["--cacert", &other_ca]);
    assert!(
        error.contains("invalid peer certificate") && error.contains("UnknownIssuer"),
        "{error}"
    );

    // The publisher writes over TLS, lookout etcd reads.
    let target = format!("etcds://{}/{prefix}", endpoints.replace("https://", ""));
    let mut reader = vec!["--cacert", ca.as_str()];
    reader.extend_from_slice(&identity);
    publish_and_read_back(
        &endpoints,
        &prefix,
        &target,
        &[
            "--etcd-cacert",
            &ca,
            "--etcd-cert",
            &client_cert,
            "--etcd-key",
            &client_key,
        ],
        &reader,
        "tls",
    );
    drop(cluster);
}

#[test]
fn tls_files_are_asked_for_where_they_are_needed() {
    let e = usage_error(&["etcd", "--endpoints", "https://127.0.0.1:1"]);
    assert!(e.contains("--cacert"), "{e}");
    let e = usage_error(&[
        "etcd",
        "--endpoints",
        "http://127.0.0.1:1",
        "--cacert",
        "/nonexistent/ca.pem",
    ]);
    assert!(e.contains("no TLS endpoint"), "{e}");
    let e = usage_error(&[
        "etcd",
        "--endpoints",
        "https://127.0.0.1:1",
        "--cacert",
        "/nonexistent/lookout-ca.pem",
    ]);
    assert!(e.contains("/nonexistent/lookout-ca.pem"), "{e}");
    let e = usage_error(&["etcd", "--endpoints", "https://127.0.0.1:1", "--cert", "/c"]);
    assert!(e.contains("--key"), "{e}");
    let e = usage_error(&[
        "docker",
        "--host",
        "unix:///nonexistent/lookout.sock",
        "--publish",
        "etcds://127.0.0.1:1",
    ]);
    assert!(e.contains("--etcd-cacert"), "{e}");
}
