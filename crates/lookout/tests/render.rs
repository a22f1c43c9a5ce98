//! `--render`, `--notify`, `--wait` (issue #49): a real nginx (the
//! engines' own, on 127.0.0.1) in front of two busybox httpd containers,
//! its virtual host rendered by `lookout docker --readiness --render …
//! --notify … --wait 300ms:2s`; and what a template that does not parse,
//! or fails to render, does.
//!
//! After dockerd is killed -9 and restarted, the file is right again:
//! that test holds the docker lock exclusively, as the other tests that
//! restart dockerd do.

// The helpers read output on threads of their own (tests may spawn).
#![allow(clippy::disallowed_methods)]

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::{Containers, Process, TempDir, require_docker, unique, usage_error};
use lookout_e2e::engines;

/// Bound of each wait for nginx to reach what lookout should have rendered.
const SETTLE: Duration = Duration::from_secs(30);

/// The test nginx, up (`None` without engines).
fn require_nginx() -> Option<engines::EngineLock> {
    engines::require("nginx", false, engines::nginx_up)
}

/// A busybox httpd container serving its own name on 8080 (published on
/// 127.0.0.1), ready while `/www/ok` exists (checked every 300 ms), labelled
/// `label`; created through the Engine API (the docker CLI's
/// `--health-cmd` needs a shell in the form it writes).
fn create_web(name: &str, label: &str) {
    create_web_restarting(name, label, "no");
}

/// [`create_web`], restarted by dockerd as `policy` says (`always`: also
/// when dockerd itself comes back).
fn create_web_restarting(name: &str, label: &str, policy: &str) {
    let (key, value) = label.split_once('=').expect("KEY=VALUE");
    let body = serde_json::json!({
        "Image": engines::test_image(),
        "Cmd": ["sh", "-c", format!(
            "mkdir -p /www && echo {name} > /www/index.html && touch /www/ok && \
             exec /bin/busybox httpd -f -p 8080 -h /www")],
        "Labels": { key: value },
        "ExposedPorts": { "8080/tcp": {} },
        "HostConfig": {
            "PortBindings": { "8080/tcp": [{ "HostIp": "127.0.0.1", "HostPort": "" }] },
            "RestartPolicy": { "Name": policy },
        },
        "Healthcheck": {
            "Test": ["CMD", "/bin/busybox", "test", "-f", "/www/ok"],
            "Interval": 300_000_000,
            "Retries": 1,
        },
    });
    common::docker_create(name, &body);
}

fn docker(args: &[&str]) {
    engines::docker(args).unwrap_or_else(|e| panic!("docker {args:?}: {e}"));
}

/// One `GET /` through nginx for `vhost`: the body on 200 (the container
/// reached), else the status (503: the rendered "no container ready").
fn get(vhost: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(engines::nginx_addr()).expect("nginx answers");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(s, "GET / HTTP/1.0\r\nHost: {vhost}\r\n\r\n").expect("sent");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    if status.starts_with("HTTP/1.1 200") {
        Ok(body.trim().to_owned())
    } else {
        Err(status)
    }
}

/// The containers nginx reaches for `vhost` over 6 requests (round robin
/// over at most two); `"503"` for a 503 (none ready), any other status as
/// it is (a container gone before its reload: 502).
fn reached(vhost: &str) -> BTreeSet<String> {
    (0..6)
        .map(|_| match get(vhost) {
            Ok(body) => body,
            Err(status) if status.starts_with("HTTP/1.1 503") => "503".to_owned(),
            Err(status) => status,
        })
        .collect()
}

/// Waits (bounded) until nginx reaches exactly `want` for `vhost` (none:
/// it answers 503, as rendered for no container ready).
fn until_reached(vhost: &str, want: &[&str], step: &str) {
    let want: BTreeSet<String> = if want.is_empty() {
        BTreeSet::from(["503".to_owned()])
    } else {
        want.iter().map(|s| (*s).to_owned()).collect()
    };
    let deadline = Instant::now() + SETTLE;
    let mut last = BTreeSet::new();
    while Instant::now() < deadline {
        last = reached(vhost);
        if last == want {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
    panic!("{step}: nginx reaches {last:?}, not {want:?} within {SETTLE:?}");
}

/// The configurations nginx was reloaded with, in order (the notify
/// wrapper keeps a copy of each).
fn reloads(dir: &Path) -> Vec<String> {
    (1..)
        .map(|n| dir.join(format!("reload-{n}.conf")))
        .map_while(|p| std::fs::read_to_string(p).ok())
        .collect()
}

/// Removes the test's virtual host from nginx whatever happens.
struct VirtualHost(PathBuf);

impl Drop for VirtualHost {
    fn drop(&mut self) {
        if std::fs::remove_file(&self.0).is_ok()
            && let Ok(mut reload) = engines::nginx_command(&["-s", "reload"])
        {
            let _ = reload.output();
        }
    }
}

/// The virtual host's template: an upstream of the ready containers'
/// published 8080s, else a 503.
fn write_template(template: &Path, vhost: &str, upstream: &str) {
    std::fs::write(
        template,
        format!(
            "# {vhost}: rendered by lookout\n\
             {{% set ready = instances | selectattr(\"ready\") | list %}}\n\
             {{% if ready %}}\n\
             upstream {upstream} {{\n\
             {{% for i in ready %}}\n\
             {{% for p in i.ports if p.port == 8080 and p.published %}}\n\
             \x20   server 127.0.0.1:{{{{ p.published }}}}; # {{{{ i.id }}}} on {{{{ i.networks | list | join(\",\") }}}}\n\
             {{% endfor %}}\n\
             {{% endfor %}}\n\
             }}\n\
             {{% endif %}}\n\
             server {{\n\
             \x20   listen {addr};\n\
             \x20   server_name {vhost};\n\
             {{% if ready %}}\n\
             \x20   location / {{ proxy_pass http://{upstream}; }}\n\
             {{% else %}}\n\
             \x20   return 503;\n\
             {{% endif %}}\n\
             }}\n",
            addr = engines::nginx_addr(),
        ),
    )
    .expect("template written");
}

/// The notify command: counts the reloads (a copy of the file each, in
/// `dir`), then reloads nginx.
fn write_notify(dir: &Path, dest: &Path) -> PathBuf {
    // The notify command: counts the reloads (a copy of the file each), then
    // reloads nginx.
    let notify = dir.join("notify.sh");
    let reload = engines::nginx_command(&["-s", "reload"]).expect("nginx's command");
    let argv: Vec<String> = std::iter::once(reload.get_program())
        .chain(reload.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect();
    std::fs::write(
        &notify,
        format!(
            "#!/bin/sh\nn=$(ls {dir}/reload-*.conf 2>/dev/null | wc -l)\n\
             cp {dest} {dir}/reload-$((n + 1)).conf\nexec {argv}\n",
            dir = dir.display(),
            dest = dest.display(),
            argv = argv.join(" "),
        ),
    )
    .expect("notify written");
    let chmod = Command::new("chmod").arg("755").arg(&notify).status();
    assert!(chmod.is_ok_and(|s| s.success()), "chmod the notify script");
    notify
}

/// The test's virtual host file in the test nginx's `conf.d/`.
fn vhost_file(id: &str) -> PathBuf {
    let dir = std::env::var(engines::ENV_NGINX_DIR).map_or_else(
        |_| engines::nginx_dir().expect("the nginx folder"),
        PathBuf::from,
    );
    dir.join("conf.d").join(format!("{id}.conf"))
}

/// `lookout docker --readiness --label LABEL --render … --notify … --wait
/// 300ms:2s`, connected, rendering the virtual host `{id}.test` into the
/// test nginx (its file, removed with the guard) and counting the reloads
/// in `tmp`.
fn render_vhost(tmp: &TempDir, id: &str, label: &str) -> (PathBuf, VirtualHost, Process) {
    let dest = vhost_file(id);
    let vhost = VirtualHost(dest.clone());
    let template = tmp.0.join("vhost.conf.j2");
    write_template(&template, &format!("{id}.test"), &id.replace('-', "_"));
    let notify = write_notify(&tmp.0, &dest);
    let render = format!("{}:{}", template.display(), dest.display());
    let notify_arg = notify.display().to_string();
    let mut lookout = Process::spawn(
        &[
            "docker",
            "--json",
            "--readiness",
            "--label",
            label,
            "--render",
            &render,
            "--notify",
            &notify_arg,
            "--wait",
            "300ms:2s",
        ],
        &[("DOCKER_HOST", engines::docker_host())],
    );
    lookout.connected();
    (dest, vhost, lookout)
}

/// The reloads after each step (`counts`), and each reload's file (`all`):
/// one reload per change, none for an unchanged file.
fn check_reloads(counts: &[(&str, usize)], all: &[String], a: &str, b: &str) {
    eprintln!("reloads after each step: {counts:?}");
    for pair in all.windows(2) {
        assert_ne!(pair[0], pair[1], "a reload for an unchanged file: {all:#?}");
    }
    let delta = |i: usize| counts[i].1 - counts[i - 1].1;
    assert_eq!(counts[0].1, 1, "one reload for the first file");
    assert!((1..=2).contains(&delta(1)), "{counts:?}");
    assert_eq!(delta(2), 1, "a unhealthy: one reload: {counts:?}");
    assert_eq!(delta(3), 1, "a recovered: one reload: {counts:?}");
    assert_eq!(
        delta(4),
        1,
        "both stopped in one burst: one reload: {counts:?}"
    );
    assert!((1..=2).contains(&delta(5)), "{counts:?}");
    assert_eq!(delta(6), 0, "an unchanged file: no reload: {counts:?}");
    assert_eq!(delta(7), 1, "removed: one reload: {counts:?}");
    // What each reload's file said of the containers it routes to.
    let last_ready = &all[all.len() - 2];
    assert!(
        last_ready.contains(&format!("# {a} on bridge"))
            && last_ready.contains(&format!("# {b} on bridge")),
        "{last_ready}"
    );
}

/// dockerd's and nginx's locks, held for as long as a test binds them.
type Held = (engines::EngineLock, engines::EngineLock);

/// What each nginx test starts from: the engines held (`exclusive`: the
/// test breaks dockerd), a temp dir, the test's id, the label its
/// containers carry and its virtual host; `None` without engines.
fn nginx_case(what: &str, exclusive: bool) -> Option<(Held, TempDir, String, String, String)> {
    let held = (require_docker(exclusive)?, require_nginx()?);
    let id = unique("render", what);
    let label = format!("lookout.render={id}");
    let vhost = format!("{id}.test");
    Some((held, TempDir::new("render", what), id, label, vhost))
}

#[test]
fn nginx_reaches_exactly_the_ready_containers_reloaded_once_per_change() {
    let Some((_held, tmp, id, label, vhost)) = nginx_case("nginx", false) else {
        return;
    };
    let (a, b, c) = (format!("{id}-a"), format!("{id}-b"), format!("{id}-c"));
    let _containers = Containers(vec![a.clone(), b.clone(), c.clone()]);
    let (_dest, _vhost, mut lookout) = render_vhost(&tmp, &id, &label);

    // No container yet: the virtual host answers 503.
    let deadline = Instant::now() + SETTLE;
    while reloads(&tmp.0).is_empty() {
        assert!(Instant::now() < deadline, "no first render and reload");
        thread::sleep(Duration::from_millis(50));
    }
    until_reached(&vhost, &[], "no container");
    let mut counts = vec![("first render", reloads(&tmp.0).len())];

    create_web(&a, &label);
    create_web(&b, &label);
    docker(&["start", &a, &b]);
    until_reached(&vhost, &[&a, &b], "both started and healthy");
    counts.push(("both ready", reloads(&tmp.0).len()));

    docker(&["exec", &a, "/bin/busybox", "rm", "/www/ok"]);
    until_reached(&vhost, &[&b], "a unhealthy");
    counts.push(("a unhealthy", reloads(&tmp.0).len()));

    docker(&["exec", &a, "/bin/busybox", "touch", "/www/ok"]);
    until_reached(&vhost, &[&a, &b], "a healthy again");
    counts.push(("a recovered", reloads(&tmp.0).len()));

    // Both stopped at once (httpd as pid 1 ignores SIGTERM: both are
    // killed after 1 s together): one burst, one reload.
    docker(&["stop", "-t", "1", &a, &b]);
    until_reached(&vhost, &[], "both stopped");
    counts.push(("both stopped", reloads(&tmp.0).len()));

    docker(&["start", &a, &b]);
    until_reached(&vhost, &[&a, &b], "both restarted");
    counts.push(("both restarted", reloads(&tmp.0).len()));

    // A change that leaves the file as it is (a container created, not
    // started): rendered (within MAX, 2 s), not written, no reload.
    create_web(&c, &label);
    let seen = (0..200).any(|_| {
        let e = lookout.event();
        e["instance"] == c.as_str() && e["kind"] == "created"
    });
    assert!(seen, "c's created told");
    // Nothing to await: the absence of a reload over more than MAX.
    thread::sleep(Duration::from_secs(3));
    counts.push(("c created", reloads(&tmp.0).len()));

    docker(&["rm", "-f", &a, &b, &c]);
    until_reached(&vhost, &[], "all removed");
    counts.push(("all removed", reloads(&tmp.0).len()));

    check_reloads(&counts, &reloads(&tmp.0), &a, &b);
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn a_template_that_does_not_parse_exits_2_naming_its_line_and_column() {
    let tmp = TempDir::new("render", "syntax");
    let template = tmp.0.join("bad.j2");
    std::fs::write(
        &template,
        "upstream x {\n{% for i in instances %}\n  server {{ i.id }:80;\n{% endfor %}\n}\n",
    )
    .expect("written");
    let render = format!("{}:{}", template.display(), tmp.0.join("out").display());
    let stderr = usage_error(&["docker", "--render", &render]);
    assert!(stderr.contains("line 3, column "), "{stderr}");
    assert!(stderr.contains("bad.j2"), "{stderr}");
    assert!(!tmp.0.join("out").exists(), "nothing written");
    // A destination in a folder that does not exist, a notify with an
    // unclosed quote: refused too.
    let good = tmp.0.join("good.j2");
    std::fs::write(&good, "{{ instances | length }}\n").expect("written");
    let missing = format!("{}:{}", good.display(), tmp.0.join("no/such/out").display());
    usage_error(&["docker", "--render", &missing]);
    let fine = format!("{}:{}", good.display(), tmp.0.join("out").display());
    usage_error(&["docker", "--render", &fine, "--notify", "sh -c 'unclosed"]);
    usage_error(&["docker", "--notify", "true"]);
    usage_error(&["docker", "--render", &fine, "--wait", "2s:1s"]);
}

#[test]
fn a_render_error_keeps_the_last_good_file_and_warns() {
    let Some(_docker) = require_docker(false) else {
        return;
    };
    let tmp = TempDir::new("render", "runtime");
    let id = unique("render", "runtime");
    let label = format!("lookout.render={id}");
    let _containers = Containers(vec![id.clone()]);
    let template = tmp.0.join("t.j2");
    // Renders while there is no instance; fails (an unknown function) once
    // there is one.
    std::fs::write(
        &template,
        "{% for i in instances %}{{ nosuch(i.id) }}{% endfor %}good\n",
    )
    .expect("written");
    let dest = tmp.0.join("out");
    let render = format!("{}:{}", template.display(), dest.display());
    let mut lookout = Process::spawn(
        &[
            "docker", "--json", "--label", &label, "--render", &render, "--wait", "50ms",
        ],
        &[("DOCKER_HOST", engines::docker_host())],
    );
    lookout.connected();
    let deadline = Instant::now() + SETTLE;
    while std::fs::read_to_string(&dest).ok().as_deref() != Some("good\n") {
        assert!(Instant::now() < deadline, "no first render");
        thread::sleep(Duration::from_millis(20));
    }
    docker(&[
        "create",
        "--name",
        &id,
        "--label",
        &label,
        "--network",
        "none",
        &engines::test_image(),
        "sleep",
        "3600",
    ]);
    let warning = lookout.stderr("a render warning", |v| {
        v["warning"]
            .as_str()
            .is_some_and(|w| w.starts_with("render:"))
    });
    let said = warning["warning"].as_str().unwrap_or_default();
    assert!(
        said.contains("is kept") && said.contains("nosuch"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(&dest).ok().as_deref(),
        Some("good\n"),
        "the last good file kept"
    );
}

/// Runs `f` when dropped (dockerd started again whatever happens).
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

#[test]
fn after_dockerd_is_killed_and_restarted_the_file_is_right_again() {
    // Breaks dockerd: holds the docker lock exclusively.
    let Some((_held, tmp, id, label, vhost)) = nginx_case("restart", true) else {
        return;
    };
    // a comes back with dockerd (restart always), b does not.
    let (a, b) = (format!("{id}-a"), format!("{id}-b"));
    let _containers = Containers(vec![a.clone(), b.clone()]);
    let (dest, _vhost, mut lookout) = render_vhost(&tmp, &id, &label);
    create_web_restarting(&a, &label, "always");
    create_web(&b, &label);
    docker(&["start", &a, &b]);
    until_reached(&vhost, &[&a, &b], "both started and healthy");
    let before = std::fs::read_to_string(&dest).expect("the rendered file");

    engines::docker_kill9().unwrap_or_else(|e| panic!("{e}"));
    let restart = OnDrop(Some(|| {
        let _ = engines::docker_start();
    }));
    lookout.stderr("disconnected", |v| v["status"] == "disconnected");
    engines::docker_start().unwrap_or_else(|e| panic!("{e}"));
    drop(restart);
    lookout.connected();
    // dockerd started a again (on a port of its own choosing), not b:
    // nginx reaches a alone, through the file rendered after the restart.
    until_reached(&vhost, &[&a], "after dockerd's restart");
    let after = std::fs::read_to_string(&dest).expect("the rendered file");
    assert_ne!(before, after, "rendered again");
    assert!(after.contains(&format!("# {a} on bridge")), "{after}");
    assert!(!after.contains(&format!("# {b} ")), "{after}");
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}
