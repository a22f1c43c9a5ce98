//! The MSRV check that clippy's `incompatible_msrv` cannot make: no package a
//! published crate needs to build (normal and build dependencies, as
//! resolved in a `Cargo.lock`) declares a `rust-version` above the crate's.
//! Language features and what a dependency uses without declaring it stay
//! unchecked: no older toolchain can be fetched here.

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
