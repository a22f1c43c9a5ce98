//! Plain `MAJOR.MINOR.PATCH` versions and Cargo's compatibility rule for them
//! (0.x: the minor number is the breaking one). Pre-release and build
//! suffixes are refused: lookout does not publish them.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl Version {
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.trim().split('.').collect();
        let [major, minor, patch] = parts.as_slice() else {
            return Err(format!("version {s:?} is not MAJOR.MINOR.PATCH"));
        };
        let num = |p: &str| {
            p.parse::<u64>()
                .map_err(|_| format!("version {s:?}: {p:?} is not a number"))
        };
        Ok(Self {
            major: num(major)?,
            minor: num(minor)?,
            patch: num(patch)?,
        })
    }

    /// The next compatible version (a fix or an addition).
    pub fn next_patch(self) -> Self {
        Self {
            patch: self.patch + 1,
            ..self
        }
    }

    /// The next version a breaking change needs (0.x: the next minor).
    pub fn next_breaking(self) -> Self {
        if self.major == 0 {
            Self {
                major: 0,
                minor: self.minor + 1,
                patch: 0,
            }
        } else {
            Self {
                major: self.major + 1,
                minor: 0,
                patch: 0,
            }
        }
    }

    /// The next version that adds API (0.x: a patch, as Cargo sees it).
    pub fn next_addition(self) -> Self {
        if self.major == 0 {
            self.next_patch()
        } else {
            Self {
                minor: self.minor + 1,
                patch: 0,
                ..self
            }
        }
    }

    /// Whether `self` → `new` is a breaking step in Cargo's sense.
    pub fn breaks_to(self, new: Self) -> bool {
        if self.major == 0 && new.major == 0 {
            new.minor != self.minor
        } else {
            new.major != self.major
        }
    }

    /// Whether `new` is one of the versions that may follow `self`.
    pub fn may_precede(self, new: Self) -> bool {
        new == self.next_patch() || new == self.next_addition() || new == self.next_breaking()
    }

    /// The requirement a dependent writes (`0.1` for 0.1.x, `1` for 1.x).
    pub fn caret(self) -> String {
        if self.major == 0 {
            format!("0.{}", self.minor)
        } else {
            self.major.to_string()
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test's unwrap is its assertion
mod tests {
    use super::Version;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn zero_x_breaks_on_the_minor() {
        assert_eq!(v("0.1.0").next_breaking(), v("0.2.0"));
        assert_eq!(v("0.1.3").next_addition(), v("0.1.4"));
        assert!(v("0.1.3").breaks_to(v("0.2.0")));
        assert!(!v("0.1.3").breaks_to(v("0.1.4")));
        assert_eq!(v("1.2.3").next_breaking(), v("2.0.0"));
        assert_eq!(v("1.2.3").next_addition(), v("1.3.0"));
        assert!(v("0.1.0").may_precede(v("0.1.1")));
        assert!(v("0.1.0").may_precede(v("0.2.0")));
        assert!(!v("0.1.0").may_precede(v("0.3.0")));
        assert!(!v("0.1.0").may_precede(v("0.1.0")));
        assert_eq!(v("0.1.9").caret(), "0.1");
    }

    #[test]
    fn refuses_what_is_not_three_numbers() {
        assert!(Version::parse("0.1").is_err());
        assert!(Version::parse("0.1.0-alpha").is_err());
        assert!(Version::parse("0.x.0").is_err());
    }
}
