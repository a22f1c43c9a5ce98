//! `release/versions.toml`: each published crate's last release, its version
//! and the commit it was packaged from. cargo-semver-checks compares the
//! crate against that commit (`--baseline-rev`), so the check needs neither
//! tags nor a registry.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use super::version::Version;

pub const FILE: &str = "release/versions.toml";

#[derive(Debug, Clone, Deserialize)]
pub struct Released {
    pub version: String,
    pub commit: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct Baseline {
    #[serde(default)]
    pub crates: BTreeMap<String, Released>,
}

impl Baseline {
    pub fn read(root: &Path) -> Result<Self, String> {
        let path = root.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let baseline: Self = toml::from_str(&text).map_err(|e| format!("{FILE}: {e}"))?;
        for (name, r) in &baseline.crates {
            Version::parse(&r.version).map_err(|e| format!("{FILE}: {name}: {e}"))?;
            if r.commit.len() != 40 || !r.commit.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "{FILE}: {name}: commit {:?} is not a full hash",
                    r.commit
                ));
            }
        }
        Ok(baseline)
    }

    pub fn get(&self, name: &str) -> Option<(Version, &str)> {
        self.crates
            .get(name)
            .and_then(|r| Some((Version::parse(&r.version).ok()?, r.commit.as_str())))
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# The last release of each published crate: its version and the commit it was\n\
             # packaged from. `cargo xtask release` checks every change against these\n\
             # (cargo-semver-checks --baseline-rev COMMIT) and its real mode rewrites them.\n",
        );
        for (name, r) in &self.crates {
            let _ = write!(
                out,
                "\n[crates.{name}]\nversion = \"{}\"\ncommit = \"{}\"\n",
                r.version, r.commit
            );
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test's unwrap is its assertion
mod tests {
    use super::*;

    #[test]
    fn renders_what_it_reads() {
        let mut b = Baseline::default();
        b.crates.insert(
            "lookout-core".to_owned(),
            Released {
                version: "0.1.0".to_owned(),
                commit: "0123456789abcdef0123456789abcdef01234567".to_owned(),
            },
        );
        let back: Baseline = toml::from_str(&b.render()).unwrap();
        let (v, c) = back.get("lookout-core").unwrap();
        assert_eq!(v.to_string(), "0.1.0");
        assert_eq!(c, "0123456789abcdef0123456789abcdef01234567");
    }
}
