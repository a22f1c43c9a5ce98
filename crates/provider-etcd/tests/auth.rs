//! etcd's authentication, on a private cluster of the test's own with auth
//! enabled and tokens that expire 2 s after their last use
//! (`--auth-token-ttl=2`): without credentials the watch is refused (a
//! `Disconnected` naming etcd's error), with a wrong password the client says
//! it cannot authenticate, and with the user's credentials a record written
//! is told; once the tokens have expired, a write authenticates again, and
//! so does a watch whose connection was cut (its redial's first request is
//! refused, authenticates again, and the watch resumes without a
//! `Disconnected`).

// The relay runs on threads of the test's own.
#![allow(clippy::disallowed_methods)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{
    Relay, chain, client_of, connected_at_once, events, fast_config, next_item, until_connected,
};
use lookout_core::{Item, Status};
use lookout_engines as engines;
use lookout_etcd::model::State;
use lookout_etcd::{Client, Credentials, EtcdConfig};

/// The private cluster's client ports.
const CLIENTS: [u16; 3] = [12571, 12572, 12573];
/// Its peer ports.
const PEERS: [u16; 3] = [12581, 12582, 12583];
/// The token TTL the members are given (seconds).
const TOKEN_TTL: u64 = 2;
const PASSWORD: &str = "s3cret-root";

/// `POST path` with `body` (and `token`) to the member on `port`, over a
/// connection of its own: the status and the body.
fn post(port: u16, path: &str, body: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    let auth = token.map_or(String::new(), |t| format!("Authorization: {t}\r\n"));
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("sends");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("reads");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

/// Waits until the tokens of now have expired: a raw one taken now is
/// refused after the TTL (the wait is the scenario, a token's life, not a
/// synchronisation).
async fn tokens_expire(port: u16) {
    let (_, answer) = post(
        port,
        "/v3/auth/authenticate",
        &format!(r#"{{"name":"root","password":"{PASSWORD}"}}"#),
        None,
    );
    let token = answer
        .split("\"token\":\"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .expect("a token")
        .to_owned();
    tokio::time::sleep(Duration::from_secs(TOKEN_TTL + 2)).await;
    let (status, answer) = post(port, "/v3/kv/range", r#"{"key":"YQ=="}"#, Some(&token));
    assert_eq!(status, 401, "the token did not expire: {answer}");
    assert!(answer.contains("invalid auth token"), "{answer}");
}

/// Without credentials, with a wrong password: refused, and said so; a
/// password is never shown.
async fn refusals(endpoints: &str, prefix: &str) {
    // Without credentials: refused, and the watch says why.
    let anonymous = client_of(endpoints, Duration::from_secs(2));
    let refused = anonymous
        .put(b"lookout-test/auth/x", b"1", 0)
        .await
        .expect_err("auth is enabled");
    assert!(
        refused
            .to_string()
            .contains("etcd requires authentication (etcdserver: user name is empty)"),
        "{refused}"
    );
    let mut watch = lookout_etcd::watch(fast_config(endpoints, prefix, false)).expect("config");
    match next_item(&mut watch).await {
        Item::Status(Status::Disconnected { error, .. }) => {
            let why = chain(&*error);
            assert!(why.contains("etcd requires authentication"), "{why}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    drop(watch);

    // A wrong password: the client says it cannot authenticate.
    let wrong = client_of(endpoints, Duration::from_secs(2))
        .with_credentials(Some(Credentials::new("root", "wrong")));
    let e = wrong
        .put(b"lookout-test/auth/x", b"1", 0)
        .await
        .expect_err("a wrong password");
    let why = chain(&e);
    assert!(
        why.contains("cannot authenticate to etcd as `root`")
            && why.contains("authentication failed"),
        "{why}"
    );
    assert!(!format!("{wrong:?}").contains("wrong"), "{wrong:?}");
    let credentials = Credentials::new("root", PASSWORD);
    assert!(!format!("{credentials:?}").contains(PASSWORD));
}

fn with_credentials(c: EtcdConfig, password: &str) -> EtcdConfig {
    c.credentials(Credentials::new("root", password))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_is_required_told_and_renewed() {
    // A private cluster of its own: started only where the engines may run.
    if engines::skips("etcd") {
        return;
    }
    let cluster = tokio::task::spawn_blocking(|| {
        engines::EtcdCluster::start_with(
            "etcd-auth",
            CLIENTS,
            PEERS,
            PEERS.map(|p| format!("http://127.0.0.1:{p}")),
            &["--auth-token-ttl=2"],
        )
        .unwrap_or_else(|e| panic!("the private cluster: {e}"))
    })
    .await
    .expect("started");
    let endpoints = cluster.endpoints();
    let port = CLIENTS[0];
    // Credentials given to an etcd without auth: requests go without a
    // token; once auth is enabled, the same client authenticates.
    let early = client_of(&endpoints, Duration::from_secs(2))
        .with_credentials(Some(Credentials::new("root", PASSWORD)));
    early
        .put(b"lookout-test/auth/early", b"1", 0)
        .await
        .expect("no auth yet");
    cluster.enable_auth(PASSWORD).expect("auth enabled");
    early
        .put(b"lookout-test/auth/early", b"2", 0)
        .await
        .expect("authenticated once auth is enabled");
    let prefix = "lookout-test/auth";

    refusals(&endpoints, prefix).await;
    let credentials = Credentials::new("root", PASSWORD);

    // With them: a watch through a relay (to cut it later), a writer.
    let relay = Relay::start(SocketAddr::from(([127, 0, 0, 1], CLIENTS[0])));
    let config = with_credentials(fast_config(&relay.url(), prefix, false), PASSWORD);
    assert!(!format!("{config:?}").contains(PASSWORD));
    let mut watch = lookout_etcd::watch(config).expect("config");
    connected_at_once(&mut watch, 8).await;
    let writer: Client =
        client_of(&endpoints, Duration::from_secs(2)).with_credentials(Some(credentials.clone()));
    common::put(&writer, prefix, "a", State::Running, false).await;
    // A client of its own for a lease (its keepalive is a stream).
    let keeper: Client =
        client_of(&endpoints, Duration::from_secs(2)).with_credentials(Some(credentials.clone()));
    let lease = keeper.lease_grant(60).await.expect("a lease").id;
    let told = events(&mut watch, 2).await;
    assert_eq!(told, ["src/a created live", "src/a started live"]);

    // Every token expires (a raw one taken now is refused after the TTL).
    tokens_expire(port).await;

    // The writer's token expired too: it authenticates again and writes;
    // so does the keeper's keepalive (refused in its stream's first line).
    common::put(&writer, prefix, "a", State::Stopped, false).await;
    let ttl = keeper.lease_keepalive(lease).await.expect("renewed");
    assert!(ttl > 0, "the lease is gone: {ttl}");
    assert_eq!(events(&mut watch, 1).await, ["src/a stopped live"]);

    // The watch's connection is cut once its token expired: the redial's
    // first request is refused, authenticates again, the watch resumes.
    tokens_expire(port).await;
    relay.cut();
    match next_item(&mut watch).await {
        Item::Status(Status::Disconnected { .. }) => {}
        other => panic!("expected the cut, got {other:?}"),
    }
    let again = until_connected(&mut watch, 8).await;
    assert_eq!(
        again
            .iter()
            .filter(|i| matches!(i, Item::Status(Status::Disconnected { .. })))
            .count(),
        0,
        "the redial was refused: {again:?}"
    );
    common::put(&writer, prefix, "a", State::Running, false).await;
    assert_eq!(events(&mut watch, 1).await, ["src/a started live"]);
    drop(watch);
    drop(cluster);
}
