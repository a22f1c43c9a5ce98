//! A TCP relay on 127.0.0.1 in front of one server (an etcd member): cut
//! its connections, refuse new ones, freeze them, see what they carried.
//! The etcd cluster tests and the `etcd_fleet` bench put it between a
//! watch and the cluster. Threads of its own; dropping it stops it.

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};

/// A TCP relay on 127.0.0.1 in front of one etcd member: cut its
/// connections, refuse new ones. Threads of its own; dropping it stops it.
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    /// Connections numbered below this are frozen: what they carry is dropped.
    frozen_below: AtomicUsize,
    refuse: AtomicBool,
    stop: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
    accepted: AtomicUsize,
    /// What each connection carried (its first 64 KiB each way): (serial,
    /// to the server, bytes).
    carried: Mutex<Vec<(usize, bool, Vec<u8>)>>,
}

impl Relay {
    /// Relays to `target` (`host:port`).
    pub fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let addr = listener.local_addr().expect("its address");
        let shared = Arc::new(Shared {
            frozen_below: AtomicUsize::new(0),
            refuse: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            accepted: AtomicUsize::new(0),
            carried: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&shared);
        // A test's relay runs on threads of its own (the library spawns nothing).
        #[allow(clippy::disallowed_methods)]
        let accept = thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                if s.refuse.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let serial = s.accepted.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let mut conns = s.conns.lock().unwrap_or_else(PoisonError::into_inner);
                for sock in [&client, &server] {
                    if let Ok(c) = sock.try_clone() {
                        conns.push(c);
                    }
                }
                drop(conns);
                pipe(&client, &server, (serial, true), Arc::clone(&s));
                pipe(&server, &client, (serial, false), Arc::clone(&s));
            }
        });
        Self {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections relayed so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Closes new connections at once (`true`), or relays them again.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Freezes the connections open now: they stay open and carry nothing
    /// more (a connection that died without a sign); new ones are relayed.
    pub fn freeze(&self) {
        self.shared
            .frozen_below
            .store(self.accepted(), Ordering::SeqCst);
    }

    /// What the connections carried, as text: `(serial, to the server, text)`.
    pub fn carried(&self) -> Vec<(usize, bool, String)> {
        self.shared
            .carried
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(s, up, b)| (*s, *up, String::from_utf8_lossy(b).into_owned()))
            .collect()
    }

    /// Closes every relayed connection.
    pub fn cut(&self) {
        let mut conns = self
            .shared
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for c in conns.drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

fn pipe(from: &TcpStream, to: &TcpStream, (serial, up): (usize, bool), shared: Arc<Shared>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    #[allow(clippy::disallowed_methods)]
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                // A frozen connection: alive, silent.
                Ok(_) if serial < shared.frozen_below.load(Ordering::SeqCst) => {}
                Ok(n) => {
                    let mut carried = shared
                        .carried
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    let index = carried
                        .iter()
                        .position(|(s, u, _)| *s == serial && *u == up)
                        .unwrap_or_else(|| {
                            carried.push((serial, up, Vec::new()));
                            carried.len() - 1
                        });
                    let log = &mut carried[index].2;
                    let room = (64 * 1024usize).saturating_sub(log.len()).min(n);
                    log.extend_from_slice(&buf[..room]);
                    drop(carried);
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        self.cut();
    }
}
