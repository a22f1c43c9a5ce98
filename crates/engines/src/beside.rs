//! A dockerd beside the main one (the second dockerd of the many-engines
//! tests, the TLS dockerd of the docker-context tests): its own run
//! directory (socket, pid file, exec root with its own containerd), data
//! root, containerd namespaces, config file, and bridge; no iptables rules.
//!
//! Not `--bridge none`: a dockerd started so *removes* the default bridge
//! `docker0`, the main dockerd's, and every later container on it — Swarm's
//! tasks — fails to start. Each gets a bridge of its own instead, made here
//! (`--bridge` takes an existing one) with an address of its own: no route
//! leaves it.
//!
//! After a `kill -9` its containerd child exits too; a stale
//! `exec/containerd/containerd.pid` (or dockerd pid file) would make the
//! next start wait for "its" containerd and fail, so both are removed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::docker::{dockerd_binary, kill9_dockerd, stop_dockerd};
use crate::ping::{ping, wait_ping};
use crate::process::{alive, proc_comm, proc_state, read_pid, run, signal, spawn_daemon};
use crate::{CLI_TIMEOUT, PING_TIMEOUT};

const READY: Duration = Duration::from_secs(90);

/// Where one dockerd beside the main one lives.
pub(crate) struct Beside {
    /// Its name in errors and logs (`docker2`, `docker-tls`).
    pub name: &'static str,
    /// Its run directory: `docker.sock`, `docker.pid`, `exec/`.
    pub run: &'static str,
    /// Its data root.
    pub data_root: &'static str,
    /// Its containerd namespace (and `NAME-p` for the plugins').
    pub namespace: &'static str,
    /// Its bridge, and the bridge's address.
    pub bridge: &'static str,
    pub bridge_address: &'static str,
    /// Its config file and its log.
    pub config: PathBuf,
    pub log: PathBuf,
}

impl Beside {
    /// Its control socket: `unix://RUN/docker.sock`.
    pub(crate) fn socket(&self) -> String {
        format!("unix://{}/docker.sock", self.run)
    }

    fn pid_file(&self) -> PathBuf {
        Path::new(self.run).join("docker.pid")
    }

    /// Its pid (from its pid file), if it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        read_pid(&self.pid_file())
            .filter(|&pid| alive(pid) && proc_comm(pid).as_deref() == Some("dockerd"))
    }

    /// Removes the pid files of dead processes (its own and its containerd's).
    fn remove_stale_pidfiles(&self) {
        for f in [
            self.pid_file(),
            Path::new(self.run).join("exec/containerd/containerd.pid"),
        ] {
            match read_pid(&f) {
                Some(pid) if alive(pid) => {}
                _ if f.exists() => {
                    let _ = fs::remove_file(&f);
                }
                _ => {}
            }
        }
    }

    /// Starts it (detached) listening on its socket and on `hosts`, with
    /// `extra` arguments, and waits until its socket answers `/_ping`. `Ok`
    /// at once if it answers already.
    pub(crate) fn start(&self, hosts: &[String], extra: &[String]) -> Result<(), String> {
        let socket = self.socket();
        if ping(&socket, PING_TIMEOUT).is_ok() {
            return Ok(());
        }
        let name = self.name;
        if let Some(pid) = self.pid() {
            // Starting (or stopped): its start gets the time a start gets.
            if proc_state(pid) == Some('T') {
                signal(pid, "CONT").map_err(|e| format!("{name}: {e}"))?;
            }
            return wait_ping(name, &socket, READY, &mut None, &self.log)
                .map(drop)
                .map_err(|e| format!("{e}\n(dockerd pid {pid} runs but does not answer)"));
        }
        fs::create_dir_all(self.run)
            .map_err(|e| format!("{name}: cannot create {}: {e}", self.run))?;
        self.remove_stale_pidfiles();
        ensure_bridge(self.bridge, self.bridge_address).map_err(|e| format!("{name}: {e}"))?;
        // A config file of its own: `/etc/docker/daemon.json` must not apply
        // (a directive there and a flag here is an error; `live-restore` on
        // would keep containers running across a kill).
        let json = "{\n  \"live-restore\": false\n}\n";
        if fs::read_to_string(&self.config).ok().as_deref() != Some(json) {
            fs::write(&self.config, json)
                .map_err(|e| format!("{name}: cannot write {}: {e}", self.config.display()))?;
        }
        let mut args: Vec<String> = vec![
            "--config-file".to_owned(),
            self.config.display().to_string(),
            "--host".to_owned(),
            socket.clone(),
        ];
        for host in hosts {
            args.extend(["--host".to_owned(), host.clone()]);
        }
        args.extend(
            [
                "--data-root",
                self.data_root,
                "--exec-root",
                &format!("{}/exec", self.run),
                "--pidfile",
                &self.pid_file().display().to_string(),
                "--containerd-namespace",
                self.namespace,
                "--containerd-plugins-namespace",
                &format!("{}-p", self.namespace),
                "--bridge",
                self.bridge,
                "--iptables=false",
                "--ip-masq=false",
            ]
            .map(str::to_owned),
        );
        args.extend(extra.iter().cloned());
        let mut child = Some(
            spawn_daemon(&dockerd_binary()?, &args, &[], &self.log, None)
                .map_err(|e| format!("{name}: {e}; read {}", self.log.display()))?,
        );
        let took = wait_ping(name, &socket, READY, &mut child, &self.log)?;
        eprintln!(
            "[engines] {name}: a dockerd beside the main one (pid {}) answers on {socket} after \
             {took:.1?} (log: {})",
            self.pid().map_or_else(|| "?".to_owned(), |p| p.to_string()),
            self.log.display()
        );
        Ok(())
    }

    /// SIGKILL it and wait until it and its containerd have exited; their
    /// pid files are removed.
    pub(crate) fn kill9(&self) -> Result<(), String> {
        let pid = self
            .pid()
            .ok_or_else(|| format!("{}: no dockerd to kill", self.name))?;
        kill9_dockerd(self.name, pid)?;
        self.remove_stale_pidfiles();
        Ok(())
    }

    /// Stops it (SIGTERM: it stops its containers; SIGKILL after 60 s); its
    /// data stays.
    pub(crate) fn down(&self) -> Result<(), String> {
        if let Some(pid) = self.pid() {
            stop_dockerd(self.name, pid)?;
        }
        self.remove_stale_pidfiles();
        Ok(())
    }
}

/// Makes the bridge `name` with `address` when it is missing.
fn ensure_bridge(name: &str, address: &str) -> Result<(), String> {
    let ip = |args: &[&str]| run(Command::new("ip").args(args), "ip", CLI_TIMEOUT);
    if ip(&["link", "show", name]).is_ok() {
        return Ok(());
    }
    ip(&["link", "add", "name", name, "type", "bridge"])?;
    ip(&["addr", "add", address, "dev", name])?;
    ip(&["link", "set", name, "up"]).map(drop)
}
