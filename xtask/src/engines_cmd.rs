//! `cargo xtask engines up|down|status|env`: the engines of the end-to-end tests.

use std::time::Instant;

use crate::engines;

/// The engines in the order they come up (podman and the second dockerd load
/// the image from docker; swarm runs on docker; sshd, the `ssh://` tests'
/// private sshd on 127.0.0.1, is checked with both; docker-tls, another
/// dockerd on 127.0.0.1 with `--tlsverify`, for the TLS docker context tests;
/// podman-rootless, a non-root user's own Podman service, loads the image from
/// docker too; etcd, a 3-member cluster on loopback from the k8s testbed's
/// etcd binary; chromium, headless, for the `--serve` page's tests; nginx,
/// on 127.0.0.1, for the `--render` tests).
pub const ALL: [&str; 11] = [
    "docker",
    "docker2",
    "docker-tls",
    "podman",
    "podman-rootless",
    "sshd",
    "swarm",
    "k8s",
    "etcd",
    "chromium",
    "nginx",
];

pub fn run(args: &[String]) -> Result<(), String> {
    let (cmd, names) = args
        .split_first()
        .ok_or("usage: cargo xtask engines up|down|status|env [ENGINE]...")?;
    let selected = select(names)?;
    match cmd.as_str() {
        "up" => {
            up(&selected)?;
            print_env();
            Ok(())
        }
        "down" => down(&selected),
        "status" => {
            status();
            Ok(())
        }
        "env" => {
            print_env();
            Ok(())
        }
        other => Err(format!(
            "unknown `engines` command {other:?} (up, down, status, env)"
        )),
    }
}

fn select(names: &[String]) -> Result<Vec<&'static str>, String> {
    if names.is_empty() || names.iter().any(|n| n == "all") {
        return Ok(ALL.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let known = ALL.iter().find(|a| **a == n.as_str()).ok_or_else(|| {
            format!(
                "unknown engine {n:?} (docker, docker2, docker-tls, podman, podman-rootless, \
                 sshd, swarm, k8s, etcd, chromium, nginx, all)"
            )
        })?;
        if !out.contains(known) {
            out.push(*known);
        }
    }
    // Keep the dependency order whatever order they were named in.
    out.sort_by_key(|n| ALL.iter().position(|a| a == n));
    Ok(out)
}

/// Bring `engines` up and check each for real (a container runs and stops; a
/// service scales; the apiserver is healthy). The first failure stops it.
pub fn up(engines: &[&str]) -> Result<(), String> {
    for name in engines {
        let t = Instant::now();
        eprintln!("==> engine {name}: up");
        // Shared locks: no test of another checkout kills the daemon mid-check.
        let lock_names: Vec<&str> = if *name == "swarm" {
            vec!["docker", "swarm"]
        } else {
            vec![name]
        };
        let _locks = lock_names
            .into_iter()
            .map(|l| engines::lock_engine(l, false))
            .collect::<Result<Vec<_>, _>>()?;
        let result = match *name {
            "docker" => engines::docker_up().and_then(|()| engines::docker_verify()),
            "docker2" => engines::docker_up()
                .and_then(|()| engines::docker2_up())
                .and_then(|()| engines::docker2_verify()),
            "podman" => engines::podman_up().and_then(|()| engines::podman_verify()),
            "podman-rootless" => {
                engines::podman_rootless_up().and_then(|()| engines::podman_rootless_verify())
            }
            "sshd" => engines::sshd_up().and_then(|()| engines::sshd_verify()),
            "docker-tls" => engines::docker_tls_up(),
            "swarm" => engines::swarm_up().and_then(|()| engines::swarm_verify()),
            "k8s" => engines::k8s_up().and_then(|()| engines::k8s_status().map(drop)),
            "etcd" => engines::etcd_up().and_then(|()| engines::etcd_leader().map(drop)),
            "chromium" => engines::chromium_up(),
            "nginx" => engines::nginx_up().and_then(|()| engines::nginx_verify()),
            other => Err(format!("unknown engine {other:?}")),
        };
        result.map_err(|e| {
            format!(
                "engine {name} failed to come up after {:.1?}:\n{e}",
                t.elapsed()
            )
        })?;
        eprintln!("==> engine {name}: up and verified in {:.1?}", t.elapsed());
    }
    Ok(())
}

fn down(selected: &[&str]) -> Result<(), String> {
    let mut errors = Vec::new();
    for name in selected.iter().rev() {
        let t = Instant::now();
        let result = match *name {
            "k8s" => engines::k8s_down(),
            "etcd" => engines::etcd_down(),
            // Nothing runs between tests: each starts (and ends) its own.
            "chromium" => Ok(()),
            "nginx" => engines::nginx_down(),
            "swarm" => engines::swarm_down(),
            "podman" => engines::podman_down(),
            "podman-rootless" => engines::podman_rootless_down(),
            "docker2" => engines::docker2_down(),
            "sshd" => engines::sshd_down(),
            "docker-tls" => engines::docker_tls_down(),
            "docker" => engines::docker_down(),
            other => Err(format!("unknown engine {other:?}")),
        };
        match result {
            Ok(()) => eprintln!("==> engine {name}: down ({:.1?})", t.elapsed()),
            Err(e) => errors.push(format!("engine {name}: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

fn status() {
    let answer = |host: &str| match engines::ping(host, std::time::Duration::from_secs(2)) {
        Ok(()) => "answers".to_owned(),
        Err(e) => format!("down ({e})"),
    };
    println!(
        "docker  {} {}",
        engines::docker_host(),
        answer(&engines::docker_host())
    );
    println!(
        "docker2 {} {}",
        engines::docker2_host(),
        answer(&engines::docker2_host())
    );
    println!(
        "podman  {} {}",
        engines::podman_host(),
        answer(&engines::podman_host())
    );
    match engines::podman_rootless_host() {
        Ok(host) => println!("podman-rootless {host} {}", answer(&host)),
        Err(e) => println!("podman-rootless down ({e})"),
    }
    println!(
        "docker-tls {} {}",
        engines::docker_tls_host(),
        answer(&engines::docker_tls_socket())
    );
    println!(
        "sshd    {} {}",
        engines::sshd_docker_host(),
        engines::sshd_pid().map_or_else(|| "down".to_owned(), |p| format!("runs (pid {p})"))
    );
    let swarm =
        engines::docker(&["info", "--format", "{{.Swarm.LocalNodeState}}"]).unwrap_or_else(|e| e);
    println!("swarm   {swarm}");
    let k8s = engines::k8s_status().unwrap_or_else(|e| e);
    println!("k8s     {}", k8s.lines().next().unwrap_or(""));
    println!(
        "nginx   {} {}",
        engines::nginx_addr(),
        engines::nginx_pid().map_or_else(|| "down".to_owned(), |p| format!("runs (pid {p})"))
    );
    for line in engines::etcd_status().lines() {
        println!("etcd    {line}");
    }
}

fn print_env() {
    for (k, v) in engines::env_vars() {
        println!("export {k}='{}'", v.replace('\'', r"'\''"));
    }
}
