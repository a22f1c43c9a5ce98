//! A crate's `CHANGELOG.md` in the Keep a Changelog 1.1.0 shape: what its
//! `## [Unreleased]` section lists, whether a version has its section, and
//! the rewrite a release makes (Unreleased becomes `## [VERSION] - DATE`, the
//! link references follow).

use std::fmt::Write as _;

use super::version::Version;

/// Where each crate's tags and compare links live.
pub const REPOSITORY: &str = "https://github.com/lookout-rs/lookout";

const UNRELEASED: &str = "## [Unreleased]";

fn is_link_reference(line: &str) -> bool {
    line.starts_with('[') && line.contains("]: ")
}

/// The entries (non-blank lines, sub-headings included) under `## [Unreleased]`.
pub fn unreleased(text: &str) -> Result<Vec<String>, String> {
    let mut lines = text.lines();
    if !lines.any(|l| l.trim_end() == UNRELEASED) {
        return Err(format!("no `{UNRELEASED}` heading"));
    }
    Ok(lines
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| !l.trim().is_empty() && !is_link_reference(l))
        .map(str::to_owned)
        .collect())
}

/// The entries listed under `## [Unreleased]` that are changes (bullets),
/// not only `### Added`-style headings left empty.
pub fn unreleased_changes(text: &str) -> Result<usize, String> {
    Ok(unreleased(text)?
        .iter()
        .filter(|l| !l.trim_start().starts_with('#'))
        .count())
}

/// Whether `## [VERSION]` (with its date) is a section of the changelog.
pub fn has_section(text: &str, version: Version) -> bool {
    let heading = format!("## [{version}]");
    text.lines().any(|l| {
        l.strip_prefix(heading.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(" - "))
    })
}

/// The checks every published crate's changelog passes.
pub fn check(text: &str) -> Result<(), String> {
    if !text.starts_with("# Changelog") {
        return Err("does not start with `# Changelog`".to_owned());
    }
    unreleased(text)?;
    if !text.lines().any(|l| l.starts_with("[Unreleased]: ")) {
        return Err("no `[Unreleased]: …` link reference".to_owned());
    }
    Ok(())
}

/// The changelog once `new` is released on `date` (`YYYY-MM-DD`): the
/// Unreleased entries move under `## [NEW] - DATE`, an empty Unreleased
/// stays on top, and the link references name the new tag `CRATE-vNEW`.
pub fn release(
    text: &str,
    krate: &str,
    old: Option<Version>,
    new: Version,
    date: &str,
) -> Result<String, String> {
    check(text)?;
    let mut out = String::with_capacity(text.len() + 200);
    for line in text.lines() {
        if line.trim_end() == UNRELEASED {
            let _ = write!(out, "{UNRELEASED}\n\n## [{new}] - {date}\n");
        } else if line.starts_with("[Unreleased]: ") {
            let _ = writeln!(
                out,
                "[Unreleased]: {REPOSITORY}/compare/{krate}-v{new}...HEAD"
            );
            let _ = match old {
                Some(old) => writeln!(
                    out,
                    "[{new}]: {REPOSITORY}/compare/{krate}-v{old}...{krate}-v{new}"
                ),
                None => writeln!(out, "[{new}]: {REPOSITORY}/releases/tag/{krate}-v{new}"),
            };
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test's unwrap is its assertion
mod tests {
    use super::*;

    const LOG: &str = "# Changelog\n\nIntro.\n\n## [Unreleased]\n\n### Fixed\n- a reconnect bug\n\n## [0.1.0] - 2026-12-05\n\n### Added\n- everything\n\n[Unreleased]: https://github.com/lookout-rs/lookout/compare/lookout-core-v0.1.0...HEAD\n[0.1.0]: https://github.com/lookout-rs/lookout/releases/tag/lookout-core-v0.1.0\n";

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn reads_the_unreleased_entries() {
        assert_eq!(unreleased(LOG).unwrap(), ["### Fixed", "- a reconnect bug"]);
        assert_eq!(unreleased_changes(LOG).unwrap(), 1);
        let empty = LOG.replace("### Fixed\n- a reconnect bug\n", "### Added\n");
        assert_eq!(unreleased_changes(&empty).unwrap(), 0);
        assert!(has_section(LOG, v("0.1.0")));
        assert!(!has_section(LOG, v("0.1.1")));
        assert!(check(LOG).is_ok());
        assert!(check("# Changelog\n\n## [0.1.0]\n").is_err());
    }

    #[test]
    fn a_release_moves_unreleased_under_its_version() {
        let out = release(
            LOG,
            "lookout-core",
            Some(v("0.1.0")),
            v("0.1.1"),
            "2027-01-02",
        )
        .unwrap();
        assert!(out.contains(
            "## [Unreleased]\n\n## [0.1.1] - 2027-01-02\n\n### Fixed\n- a reconnect bug\n"
        ));
        assert_eq!(unreleased_changes(&out).unwrap(), 0);
        assert!(has_section(&out, v("0.1.1")));
        assert!(out.contains("[Unreleased]: https://github.com/lookout-rs/lookout/compare/lookout-core-v0.1.1...HEAD\n[0.1.1]: https://github.com/lookout-rs/lookout/compare/lookout-core-v0.1.0...lookout-core-v0.1.1\n"));
        assert!(check(&out).is_ok());
    }
}
