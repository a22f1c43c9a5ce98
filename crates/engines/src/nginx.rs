//! A private nginx on 127.0.0.1 (Debian's `nginx-light`), for the
//! `--render` tests (issue #49): lookout renders a virtual host's config
//! into its `conf.d/` and reloads it, as docker-gen does for nginx-proxy.
//!
//! Its own process, configuration, pid file, logs and temporary files are
//! under `target/engines/nginx/` ([`nginx_dir`]); it listens on
//! 127.0.0.1:[`NGINX_PORT`], where a request for a host no `conf.d/*.conf`
//! serves gets 404. The machine's own nginx service, if any, is not
//! touched, and installing the package never starts it (a `policy-rc.d`
//! that forbids it, only when none exists, only meanwhile).

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::engines_dir;
use crate::packages::install_without_service;
use crate::process::{alive, proc_comm, read_pid, run, signal, spawn_daemon, wait_dead};

/// Its port on 127.0.0.1.
pub const NGINX_PORT: u16 = 18_480;
/// `127.0.0.1:PORT`, where the test nginx listens.
pub const ENV_NGINX_ADDR: &str = "LOOKOUT_NGINX_ADDR";
/// Its folder (`nginx.conf`, `conf.d/`, `nginx.pid`).
pub const ENV_NGINX_DIR: &str = "LOOKOUT_NGINX_DIR";

const NGINX: &str = "/usr/sbin/nginx";
const READY: Duration = Duration::from_secs(20);
const CLI: Duration = Duration::from_secs(60);

/// `target/engines/nginx`.
pub fn nginx_dir() -> Result<PathBuf, String> {
    Ok(engines_dir()?.join("nginx"))
}

/// `127.0.0.1:18480`.
pub fn nginx_addr() -> String {
    format!("127.0.0.1:{NGINX_PORT}")
}

fn file(name: &str) -> Result<PathBuf, String> {
    Ok(nginx_dir()?.join(name))
}

/// Installs nginx-light without starting Debian's nginx service.
fn install() -> Result<(), String> {
    install_without_service("nginx", NGINX, "nginx-light")
}

/// `nginx.conf`, `conf.d/`, the temporary folders: written when missing or
/// changed.
fn configure() -> Result<(), String> {
    let dir = nginx_dir()?;
    for sub in ["conf.d", "tmp", "logs"] {
        fs::create_dir_all(dir.join(sub))
            .map_err(|e| format!("nginx: cannot create {}: {e}", dir.join(sub).display()))?;
    }
    let d = dir.display();
    let conf = format!(
        "# lookout's test nginx (cargo xtask engines up nginx): loopback only.\n\
         daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\n\
         pid {d}/nginx.pid;\nerror_log {d}/logs/error.log notice;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n    access_log off;\n    client_body_temp_path {d}/tmp/body;\n\
         \x20   proxy_temp_path {d}/tmp/proxy;\n    fastcgi_temp_path {d}/tmp/fastcgi;\n\
         \x20   uwsgi_temp_path {d}/tmp/uwsgi;\n    scgi_temp_path {d}/tmp/scgi;\n\
         \x20   server {{\n        listen 127.0.0.1:{NGINX_PORT} default_server;\n\
         \x20       return 404 \"no such virtual host\\n\";\n    }}\n\
         \x20   include {d}/conf.d/*.conf;\n}}\n"
    );
    let path = dir.join("nginx.conf");
    if fs::read_to_string(&path).ok().as_deref() != Some(conf.as_str()) {
        fs::write(&path, conf)
            .map_err(|e| format!("nginx: cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// `nginx -p DIR -c DIR/nginx.conf ARGS…`: the test nginx's own command
/// line (`-s reload`, `-t`).
pub fn nginx_command(args: &[&str]) -> Result<Command, String> {
    let dir = nginx_dir()?;
    let mut cmd = Command::new(NGINX);
    cmd.arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .args(["-e", "stderr"])
        .args(args);
    Ok(cmd)
}

/// The master's pid, when it runs.
pub fn nginx_pid() -> Option<u32> {
    let pid = read_pid(&file("nginx.pid").ok()?)?;
    (alive(pid) && proc_comm(pid).as_deref() == Some("nginx")).then_some(pid)
}

/// Whether it answers HTTP on its port.
fn answers() -> bool {
    let Ok(mut s) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], NGINX_PORT).into(), Duration::from_secs(1))
    else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET / HTTP/1.0\r\nHost: lookout-engines.invalid\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 404")
}

/// Starts the test nginx (detached, `daemon off`, log `logs/nginx.log`)
/// unless it runs; waits until it answers on its port (bounded).
pub fn nginx_start() -> Result<(), String> {
    if nginx_pid().is_some() && answers() {
        return Ok(());
    }
    let dir = nginx_dir()?;
    let log = dir.join("logs/nginx.log");
    let args: Vec<String> = [
        "-p".to_owned(),
        dir.display().to_string(),
        "-c".to_owned(),
        dir.join("nginx.conf").display().to_string(),
        "-e".to_owned(),
        "stderr".to_owned(),
    ]
    .into();
    let mut child = spawn_daemon(Path::new(NGINX), &args, &[], &log, None)
        .map_err(|e| format!("nginx: {e}"))?;
    let deadline = Instant::now() + READY;
    while Instant::now() < deadline {
        if answers() && nginx_pid().is_some() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "nginx: exited ({status}) before listening; read {}:\n{}",
                log.display(),
                crate::tail_file(&log, 20)
            ));
        }
        thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "nginx: not answering on {} within {READY:?}; read {}",
        nginx_addr(),
        log.display()
    ))
}

/// Installs, configures and starts the test nginx (cheap when all is in
/// place).
pub fn nginx_up() -> Result<(), String> {
    install()?;
    configure()?;
    nginx_start()
}

/// Checks it: its configuration passes `nginx -t`, and an unknown host
/// gets its 404.
pub fn nginx_verify() -> Result<(), String> {
    run(&mut nginx_command(&["-t", "-q"])?, "nginx: nginx -t", CLI)?;
    if answers() {
        Ok(())
    } else {
        Err(format!(
            "nginx: no 404 from {} for an unknown host",
            nginx_addr()
        ))
    }
}

/// Stops the test nginx (`QUIT`, then `KILL` after 10 s); its files stay.
pub fn nginx_down() -> Result<(), String> {
    let Some(pid) = nginx_pid() else {
        return Ok(());
    };
    signal(pid, "QUIT")?;
    if !wait_dead(pid, Duration::from_secs(10)) {
        signal(pid, "KILL")?;
        if !wait_dead(pid, Duration::from_secs(10)) {
            return Err(format!("nginx: pid {pid} did not exit after SIGKILL"));
        }
    }
    if let Ok(pid_file) = file("nginx.pid") {
        let _ = fs::remove_file(pid_file);
    }
    Ok(())
}
