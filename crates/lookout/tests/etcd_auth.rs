//! `lookout etcd` and `lookout docker --publish etcd://USER@…` against a
//! private 3-member cluster of the test's own with etcd's authentication
//! enabled: without credentials `lookout etcd` says etcd requires them;
//! with `--user`/`--password-file` it reads what a publisher given
//! `etcd://root@…` and `--etcd-password-file` wrote. A password is never an
//! argument: the usage errors say what is missing.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{TempDir, publish_and_read_back, refusal, unique, usage_error};
use lookout_e2e::engines;

/// The private cluster's client ports.
const CLIENTS: [u16; 3] = [12671, 12672, 12673];
/// Its peer ports.
const PEERS: [u16; 3] = [12681, 12682, 12683];
const PASSWORD: &str = "cli-s3cret";

#[test]
fn an_auth_enabled_etcd_refuses_lookout_without_credentials_and_serves_it_with_them() {
    let Some(_docker) = common::require_docker(false) else {
        return;
    };
    let cluster = engines::EtcdCluster::start(
        "etcd-cli-auth",
        CLIENTS,
        PEERS,
        PEERS.map(|p| format!("http://127.0.0.1:{p}")),
    )
    .unwrap_or_else(|e| panic!("the private cluster: {e}"));
    cluster.enable_auth(PASSWORD).expect("auth enabled");
    let endpoints = cluster.endpoints();
    let dir = TempDir::new("etcd_auth", "pw");
    let password_file = dir.0.join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).expect("written");
    let password_file = password_file.to_str().expect("utf-8").to_owned();
    let prefix = unique("etcd_auth", "p");

    // No credentials: a disconnected status saying etcd requires them.
    let error = refusal(&endpoints, &prefix, &[]);
    assert!(
        error.contains("etcd requires authentication") && error.contains("user name is empty"),
        "{error}"
    );
    // A wrong password: said as such, the password not told.
    let wrong_file = dir.0.join("wrong");
    std::fs::write(&wrong_file, "nope\n").expect("written");
    let wrong_file = wrong_file.to_str().expect("utf-8").to_owned();
    let error = refusal(
        &endpoints,
        &prefix,
        &["--user", "root", "--password-file", &wrong_file],
    );
    assert!(
        error.contains("cannot authenticate to etcd as `root`")
            && error.contains("authentication failed")
            && !error.contains("nope"),
        "{error}"
    );

    // With them: the publisher writes, lookout etcd reads.
    let target = format!("etcd://root@{}/{prefix}", endpoints.replace("http://", ""));
    publish_and_read_back(
        &endpoints,
        &prefix,
        &target,
        &["--etcd-password-file", &password_file],
        &["--user", "root", "--password-file", &password_file],
        "rt",
    );
    drop(cluster);
}

#[test]
fn credentials_are_given_whole_and_never_as_an_argument() {
    let e = usage_error(&["etcd", "--user", "root"]);
    assert!(e.contains("--password-file"), "{e}");
    let e = usage_error(&["etcd", "--password-file", "/nonexistent"]);
    assert!(e.contains("--user"), "{e}");
    let e = usage_error(&[
        "etcd",
        "--user",
        "root",
        "--password-file",
        "/nonexistent/lookout-password",
    ]);
    assert!(e.contains("cannot read the etcd password file"), "{e}");
    let e = usage_error(&["docker", "--publish", "etcd://root:pw@127.0.0.1:1"]);
    assert!(e.contains("--etcd-password-file"), "{e}");
    let e = usage_error(&[
        "docker",
        "--host",
        "unix:///nonexistent/lookout.sock",
        "--publish",
        "etcd://root@127.0.0.1:1",
    ]);
    assert!(e.contains("without --etcd-password-file"), "{e}");
}
