//! A unix connect's errors: refused on a socket that nothing listens on
//! (the stale bind mount's hint), a missing path and a path that is no
//! socket (the OS's error as it is).

use super::*;
use std::error::Error as _;

/// A path in the temp dir, removed before and after.
struct TempPath(std::path::PathBuf);

impl TempPath {
    fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "lookout-transport-connect-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        Self(path)
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn connect_error(r: Result<Socket, TransportError>) -> std::io::Error {
    match r {
        Err(TransportError::Connect(e)) => e,
        Err(other) => panic!("not a connect error: {other}"),
        Ok(_) => panic!("connected"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_refused_socket_that_exists_says_a_bind_mounted_file_goes_stale() {
    let path = TempPath::new("stale");
    // Bound, then closed: the socket file stays, nothing listens on it (what
    // a container's bind mount of a restarted engine's socket file sees).
    drop(std::os::unix::net::UnixListener::bind(&path.0).expect("a socket"));
    assert!(path.0.exists());
    let e = connect_error(Socket::unix(&path.0).await);
    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    let said = e.to_string();
    for part in [
        "Connection refused",
        &format!(
            "{} exists and is a socket, but it refuses connections",
            path.0.display()
        ),
        "bind-mounted into a container, which goes stale when the engine restarts",
        "mount the socket's directory instead",
    ] {
        assert!(said.contains(part), "{part:?} not in {said:?}");
    }
    // The OS's error is its source.
    let source = e.source().expect("a source");
    let os = source.downcast_ref::<io::Error>().expect("the OS's error");
    assert_eq!(os.raw_os_error(), Some(111), "{os}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_missing_path_keeps_the_os_message() {
    let path = TempPath::new("missing");
    let e = connect_error(Socket::unix(&path.0).await);
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    assert_eq!(e.to_string(), "No such file or directory (os error 2)");
    assert!(e.source().is_none());
}

#[tokio::test(flavor = "current_thread")]
async fn a_path_that_is_no_socket_keeps_the_os_message() {
    let path = TempPath::new("file");
    std::fs::write(&path.0, b"not a socket").expect("a file");
    let e = connect_error(Socket::unix(&path.0).await);
    // Linux refuses a connect to a file that is no socket.
    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    assert_eq!(e.to_string(), "Connection refused (os error 111)");
}
