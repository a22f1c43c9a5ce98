//! The MSRV checks that clippy's `incompatible_msrv` cannot make: no package
//! a published crate needs to build (normal and build dependencies, as
//! resolved in a `Cargo.lock`) declares a `rust-version` above the crate's;
//! and the crates built with that Rust itself, when rustup can install it
//! (language features, a dependency's undeclared needs).

use super::workspace::Metadata;

/// `1.89` → (1, 89, 0).
fn parse(v: &str) -> Option<(u64, u64, u64)> {
    let mut it = v.trim().split('.').map(|p| p.parse::<u64>().ok());
    let major = it.next()??;
    let minor = it.next().flatten().unwrap_or(0);
    let patch = it.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// The violations of the lock `meta` describes, for each member named in
/// `roots` (every published member when empty), as lines to print; and the
/// number of (crate, dependency) pairs checked.
pub fn check(meta: &Metadata, roots: &[&str]) -> Result<(usize, Vec<String>), String> {
    let mut checked = 0;
    let mut bad = Vec::new();
    let members: Vec<_> = meta
        .packages
        .iter()
        .filter(|p| {
            if roots.is_empty() {
                p.publish
            } else {
                roots.contains(&p.name.as_str())
            }
        })
        .collect();
    for member in members {
        let Some(own) = member.rust_version.as_deref() else {
            bad.push(format!("{} declares no rust-version", member.name));
            continue;
        };
        let own_v = parse(own).ok_or_else(|| format!("{}: rust-version {own:?}", member.name))?;
        for dep in meta.closure(&member.id) {
            if dep.id == member.id {
                continue;
            }
            checked += 1;
            if let Some(theirs) = dep.rust_version.as_deref()
                && parse(theirs).is_some_and(|t| t > own_v)
            {
                bad.push(format!(
                    "{} (rust-version {own}) needs {} {} (rust-version {theirs})",
                    member.name, dep.name, dep.version
                ));
            }
        }
    }
    Ok((checked, bad))
}

/// Build the published crates with the declared `rust-version` itself, where
/// rustup can install it here: `rustup toolchain install VERSION --profile
/// minimal`, then `cargo check --locked` of every published crate with it
/// (their libraries and the `lookout` binary; tests and benches may use newer
/// Rust). Returns what it did, for the log; a toolchain rustup cannot fetch
/// is said, not failed (the dependency check above still holds).
pub fn build_with_toolchain(root: &std::path::Path, meta: &Metadata) -> Result<String, String> {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let published: Vec<_> = meta.packages.iter().filter(|p| p.publish).collect();
    let mut versions: Vec<&str> = published
        .iter()
        .filter_map(|p| p.rust_version.as_deref())
        .collect();
    versions.sort_by_key(|v| parse(v));
    versions.dedup();
    let [version] = versions.as_slice() else {
        return Err(format!(
            "the published crates declare different rust-versions ({}): one toolchain checks one",
            versions.join(", ")
        ));
    };
    let t = Instant::now();
    let mut install = Command::new("rustup");
    install
        .args(["toolchain", "install", version, "--profile", "minimal"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let installed = crate::process::run_inherited(&mut install, Duration::from_secs(5 * 60))
        .is_ok_and(|s| s.success());
    if !installed {
        return Ok(format!(
            "rustup cannot install Rust {version} here: the crates were NOT built with it \
             (only the dependencies' declared rust-versions were checked)"
        ));
    }
    let mut cmd = Command::new("rustup");
    cmd.args(["run", version, "cargo", "check", "--locked"])
        .current_dir(root)
        // The outer cargo's own toolchain must not leak into this one.
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC_WRAPPER")
        .env(
            "CARGO_TARGET_DIR",
            super::package::target_dir(root).join("msrv"),
        )
        .stdin(Stdio::null());
    for p in &published {
        cmd.args(["-p", &p.name]);
    }
    let status = crate::process::run_inherited(&mut cmd, Duration::from_secs(30 * 60))?;
    if !status.success() {
        return Err(format!(
            "the published crates do not build with Rust {version}, their declared rust-version \
             (`rustup run {version} cargo check --locked -p …` above)"
        ));
    }
    Ok(format!(
        "every published crate builds with Rust {version} itself ({:.1?})",
        t.elapsed()
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test's unwrap is its assertion
mod tests {
    use super::parse;

    #[test]
    fn compares_short_and_long_versions() {
        assert!(parse("1.89").unwrap() < parse("1.89.1").unwrap());
        assert!(parse("1.90").unwrap() > parse("1.89.9").unwrap());
        assert_eq!(parse("1.85.0"), parse("1.85"));
        assert_eq!(parse("x"), None);
    }
}
