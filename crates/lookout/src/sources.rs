//! Several engines in one run: `--host [NAME=]URI` and `--context NAME`,
//! each repeatable and mixable, every source a watch of its own, merged
//! into one stream (`lookout_core::Merge`) whose items say their source.

use std::collections::HashSet;

/// One source the flags name, before its endpoint is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// `--host [NAME=]URI`: NAME defaults to the URI.
    Host { name: String, uri: String },
    /// `--context NAME`: named after the context.
    Context { name: String },
}

impl Named {
    pub fn name(&self) -> &str {
        match self {
            Self::Host { name, .. } | Self::Context { name } => name,
        }
    }
}

/// `NAME=URI`, or a bare `URI` named after itself. A NAME is what comes
/// before the first `=` when that holds neither `:` nor `/` (so that a URI
/// with an `=` in its query stays whole).
pub fn parse_host(arg: &str) -> Result<Named, String> {
    let (name, uri) = match arg.split_once('=') {
        Some((name, uri)) if !name.contains([':', '/']) => {
            if name.is_empty() {
                return Err(format!("`{arg}`: an empty NAME before `=`"));
            }
            (name.to_owned(), uri.to_owned())
        }
        _ => (arg.to_owned(), arg.to_owned()),
    };
    if uri.is_empty() {
        return Err(format!("`{arg}`: no URI after `{name}=`"));
    }
    Ok(Named::Host { name, uri })
}

/// The sources of `--host` and `--context` (or `--connection`), in the
/// order given (hosts first, then contexts); an error names a NAME given
/// twice. An unnamed `--host URI` with a context is refused, as the docker
/// CLI refuses `-H` with `--context` (one engine, two answers): named
/// (`--host NAME=URI`), both are watched.
pub fn sources(hosts: &[Named], contexts: &[String]) -> Result<Vec<Named>, String> {
    if !contexts.is_empty()
        && let Some(Named::Host { uri, .. }) = hosts
            .iter()
            .find(|h| matches!(h, Named::Host { name, uri } if name == uri))
    {
        return Err(format!(
            "an unnamed --host ({uri}) with --context/--connection: which engine is it? \
             (the docker CLI refuses -H with --context); to watch both, name the host: \
             --host NAME={uri}"
        ));
    }
    let all: Vec<Named> = hosts
        .iter()
        .cloned()
        .chain(contexts.iter().map(|c| Named::Context { name: c.clone() }))
        .collect();
    let mut seen = HashSet::new();
    for s in &all {
        if !seen.insert(s.name()) {
            return Err(format!(
                "the source name `{}` is given twice: name each source once \
                 (`--host NAME=URI`)",
                s.name()
            ));
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, uri: &str) -> Named {
        Named::Host {
            name: name.into(),
            uri: uri.into(),
        }
    }

    #[test]
    fn a_host_is_named_or_named_after_itself() {
        assert_eq!(
            parse_host("a=unix:///run/a.sock"),
            Ok(host("a", "unix:///run/a.sock"))
        );
        assert_eq!(
            parse_host("unix:///run/a.sock"),
            Ok(host("unix:///run/a.sock", "unix:///run/a.sock"))
        );
        assert_eq!(
            parse_host("tcp://h:2376"),
            Ok(host("tcp://h:2376", "tcp://h:2376"))
        );
        // An `=` after a `:` or `/` is the URI's.
        assert_eq!(
            parse_host("ssh://u@h/x=y"),
            Ok(host("ssh://u@h/x=y", "ssh://u@h/x=y"))
        );
        assert!(parse_host("=unix:///a").is_err());
        assert!(parse_host("a=").is_err());
    }

    #[test]
    fn an_unnamed_host_with_a_context_is_refused_a_named_one_is_watched_too() {
        let err = sources(&[host("unix:///x", "unix:///x")], &["a".into()]).expect_err("bare");
        assert!(err.contains("--host NAME=unix:///x"), "{err}");
        let both = sources(&[host("x", "unix:///x")], &["a".into()]).expect("named");
        assert_eq!(both.len(), 2);
        let two_bare = [
            host("unix:///1", "unix:///1"),
            host("unix:///2", "unix:///2"),
        ];
        assert_eq!(sources(&two_bare, &[]).map(|s| s.len()), Ok(2));
    }

    #[test]
    fn a_name_given_twice_is_refused() {
        let hosts = [host("a", "unix:///a"), host("b", "unix:///b")];
        assert_eq!(sources(&hosts, &["c".into()]).map(|s| s.len()), Ok(3));
        let err = sources(&hosts, &["a".into()]).expect_err("a twice");
        assert!(err.contains("`a` is given twice"), "{err}");
        let err =
            sources(&[host("x", "unix:///1"), host("x", "unix:///2")], &[]).expect_err("x twice");
        assert!(err.contains("`x`"), "{err}");
    }
}
