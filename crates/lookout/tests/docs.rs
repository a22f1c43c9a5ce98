//! The docs are true to the tree and to the binary. In README.md,
//! ARCHITECTURE.md, BENCHMARKS.md, CONTRIBUTING.md, `docs/*.md` and the
//! crates' READMEs:
//!
//! - every relative link points at a file or folder that exists, and a
//!   `#anchor` into a Markdown file at one of its headings (slugged as GitHub
//!   does: lower case, punctuation dropped, spaces to `-`, `-1`, `-2`… for a
//!   repeated heading);
//! - every `--flag` the docs name for `lookout` is in `lookout --help` or in
//!   the help of a subcommand (those `lookout --help` lists): on a line or in a
//!   code span that starts `lookout SUB`, SUB's own flags; elsewhere any
//!   subcommand's. A line or code span that starts with another program
//!   (`cargo`, `docker`, `curl`, … in [`OTHER_PROGRAMS`]) names that
//!   program's flags, not lookout's; the few other programs' flags named in
//!   prose are in [`OTHER_FLAGS`], each with its reason;
//! - every code block just after `<!-- compiled: FILE -->` is FILE (a
//!   contiguous part of it, indented alike), and FILE is one of the files
//!   this test compiles ([`COMPILED`]);
//! - `docs/openapi.json` is the document `--serve` serves at `/openapi.json`
//!   (`crates/lookout/src/serve/openapi.json`, inside the crate so that the
//!   published crate has it), byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

// The examples the docs show, compiled here (the crate has every provider and
// tokio-stream as dependencies) and never run: they need an engine.
#[allow(dead_code)]
#[path = "../../../docs/examples/share.rs"]
mod share_example;
#[allow(dead_code)]
#[path = "../../../docs/examples/watch.rs"]
mod watch_example;

/// The files a `<!-- compiled: FILE -->` marker may name: the modules above.
const COMPILED: &[&str] = &["docs/examples/watch.rs", "docs/examples/share.rs"];

/// Programs whose flags the docs name in their own command lines.
const OTHER_PROGRAMS: &[&str] = &[
    "apt",
    "apt-get",
    "cargo",
    "chrt",
    "curl",
    "docker",
    "dockerd",
    "etcd",
    "etcdctl",
    "git",
    "jq",
    "kubectl",
    "perf",
    "podman",
    "python3",
    "rustup",
    "ssh",
    "strace",
    "systemctl",
    "taskset",
    "valgrind",
];

/// Other programs' flags that the docs name in prose, outside a command line.
const OTHER_FLAGS: &[(&str, &str)] = &[
    (
        "--url",
        "podman's flag, beside lookout's in the table of docs/engines.md",
    ),
    (
        "--tlsverify",
        "dockerd's flag: how CI's TLS dockerd is started (docs/development.md)",
    ),
    (
        "--auth-token-ttl",
        "etcd's flag: how long its simple tokens live (docs/etcd.md)",
    ),
    (
        "--client-cert-auth",
        "etcd's flag: an etcd that asks for client certificates (docs/etcd.md)",
    ),
    (
        "--unsafe-no-fsync",
        "etcd's flag: how the test etcds run (BENCHMARKS.md)",
    ),
    (
        "--watch-cache",
        "kube-apiserver's flag: how the test apiserver runs (BENCHMARKS.md)",
    ),
    (
        "--network",
        "docker run's flag: the bench containers' network (BENCHMARKS.md)",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, ARCHITECTURE.md, BENCHMARKS.md, CONTRIBUTING.md, docs/*.md and
/// crates/*/README.md, as paths from the workspace root.
fn doc_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "CONTRIBUTING.md",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is there")
        .map(|e| e.expect("docs/ is readable").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| Path::new("docs").join(p.file_name().expect("a file name")))
        .collect();
    pages.sort();
    assert!(!pages.is_empty(), "docs/ holds the reference pages");
    files.extend(pages);
    // The crates' own READMEs (crates.io shows them; they link to the pages).
    let mut readmes: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates/ is there")
        .map(|e| {
            Path::new("crates")
                .join(e.expect("crates/ is readable").file_name())
                .join("README.md")
        })
        .filter(|p| root().join(p).is_file())
        .collect();
    readmes.sort();
    files.extend(readmes);
    files
}

fn read(rel: &Path) -> String {
    std::fs::read_to_string(root().join(rel))
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", rel.display()))
}

// ---------------------------------------------------------------- Markdown

/// A Markdown file cut into what the checks read: paragraphs of prose
/// (consecutive non-blank lines outside code blocks) and fenced code blocks.
#[derive(Debug)]
enum Block {
    Prose {
        line: usize,
        text: String,
    },
    Code {
        line: usize,
        lines: Vec<String>,
        /// FILE of a `<!-- compiled: FILE -->` line just before the fence.
        compiled: Option<String>,
    },
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut prose: Option<(usize, Vec<&str>)> = None;
    let mut code: Option<(usize, String, Vec<String>, Option<String>)> = None;
    let mut last_prose_line: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        if let Some((start, fence, lines, compiled)) = &mut code {
            let closes = trimmed.starts_with(fence.as_str())
                && trimmed
                    .trim_end()
                    .chars()
                    .all(|c| c == fence.chars().next().unwrap_or('`'));
            if closes {
                out.push(Block::Code {
                    line: *start,
                    lines: std::mem::take(lines),
                    compiled: compiled.take(),
                });
                code = None;
            } else {
                lines.push(line.to_owned());
            }
            continue;
        }
        let fence: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if fence.len() >= 3
            && fence
                .chars()
                .all(|c| c == fence.chars().next().unwrap_or('`'))
        {
            if let Some((start, lines)) = prose.take() {
                out.push(Block::Prose {
                    line: start,
                    text: lines.join("\n"),
                });
            }
            let compiled = last_prose_line.and_then(|l| {
                l.trim()
                    .strip_prefix("<!-- compiled:")
                    .and_then(|r| r.strip_suffix("-->"))
                    .map(|f| f.trim().to_owned())
            });
            code = Some((n, fence, Vec::new(), compiled));
            last_prose_line = None;
            continue;
        }
        if trimmed.is_empty() {
            if let Some((start, lines)) = prose.take() {
                out.push(Block::Prose {
                    line: start,
                    text: lines.join("\n"),
                });
            }
            last_prose_line = None;
            continue;
        }
        prose.get_or_insert((n, Vec::new())).1.push(line);
        last_prose_line = Some(line);
    }
    if let Some((start, lines)) = prose.take() {
        out.push(Block::Prose {
            line: start,
            text: lines.join("\n"),
        });
    }
    assert!(code.is_none(), "a code block is not closed");
    out
}

/// The code spans of a paragraph (`CommonMark`: a run of N backticks up to
/// the next run of N), with their byte ranges (backticks included).
fn code_spans(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let open = i;
        while i < bytes.len() && bytes[i] == b'`' {
            i += 1;
        }
        let run = i - open;
        let mut j = i;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let s = j;
                while j < bytes.len() && bytes[j] == b'`' {
                    j += 1;
                }
                if j - s == run {
                    close = Some(s);
                    break;
                }
            } else {
                j += 1;
            }
        }
        match close {
            Some(c) => {
                spans.push((open..c + run, text[i..c].trim()));
                i = c + run;
            }
            None => i = open + run,
        }
    }
    spans
}

/// The paragraph with its code spans blanked out (same length, same lines).
fn without_code_spans(text: &str) -> String {
    let mut out = text.to_owned();
    for (range, _) in code_spans(text) {
        // Same bytes: a space per byte, the line ends kept.
        let blank: String = text[range.clone()]
            .chars()
            .map(|c| {
                if c == '\n' {
                    "\n".to_owned()
                } else {
                    " ".repeat(c.len_utf8())
                }
            })
            .collect();
        out.replace_range(range, &blank);
    }
    out
}

/// Link targets of a paragraph without its code spans: `[text](target)`,
/// `![alt](target)` and `[label]: target`, with their byte offsets.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = text[from..].find("](") {
        let start = from + k + 2;
        let mut depth = 1;
        let mut end = None;
        for (o, c) in text[start..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(start + o);
                        break;
                    }
                }
                '\n' => break,
                _ => {}
            }
        }
        let Some(end) = end else {
            from = start;
            continue;
        };
        let inner = text[start..end].trim();
        let target = inner
            .strip_prefix('<')
            .and_then(|t| t.split_once('>').map(|(t, _)| t))
            .unwrap_or_else(|| inner.split_whitespace().next().unwrap_or(""));
        out.push((start, target.to_owned()));
        from = end;
    }
    let mut offset = 0;
    for line in text.split('\n') {
        let t = line.trim_start();
        if t.starts_with('[')
            && let Some((_, rest)) = t.split_once("]:")
            && let Some(target) = rest.split_whitespace().next()
        {
            out.push((offset, target.to_owned()));
        }
        offset += line.len() + 1;
    }
    out
}

/// GitHub's anchor of a heading: the text without links' targets and
/// Markdown punctuation, lower case, every character but letters, digits,
/// `-`, `_` and spaces dropped, spaces turned to `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](target)` reads as its text.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if let Some((m, e)) = after
            .find("](")
            .and_then(|m| after[m..].find(')').map(|e| (m, m + e)))
        {
            text.push_str(&after[..m]);
            rest = &after[e + 1..];
        } else {
            text.push('[');
            rest = after;
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings (ATX headings outside code).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for block in blocks(text) {
        let Block::Prose { text, .. } = block else {
            continue;
        };
        for line in text.lines() {
            let t = line.trim_start();
            let hashes = t.chars().take_while(|&c| c == '#').count();
            if !(1..=6).contains(&hashes) || !t[hashes..].starts_with(' ') {
                continue;
            }
            let title = t[hashes..].trim().trim_end_matches('#').trim();
            let base = slug(title);
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
    }
    out
}

// ---------------------------------------------------------------- links

/// What is wrong with the relative links of `text`, the file `doc` (a path
/// from the workspace root).
fn link_errors(doc: &Path, text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let dir = doc.parent().unwrap_or(Path::new(""));
    for block in blocks(text) {
        let Block::Prose { line, text } = block else {
            continue;
        };
        let plain = without_code_spans(&text);
        for (at, target) in link_targets(&plain) {
            let n = line + plain[..at].matches('\n').count();
            let here = format!("{}:{n}: link `{target}`", doc.display());
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.to_path_buf()
            } else {
                normalize(&dir.join(path))
            };
            if file.starts_with("..") {
                errors.push(format!("{here}: leaves the repository"));
                continue;
            }
            if !root().join(&file).exists() {
                errors.push(format!("{here}: no such file or folder {}", file.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                if file.extension().is_none_or(|x| x != "md") {
                    continue;
                }
                let known = anchors(&read(&file));
                if !known.contains(anchor) {
                    errors.push(format!(
                        "{here}: {} has no heading #{anchor} (its anchors: {})",
                        file.display(),
                        known
                            .iter()
                            .map(String::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
    }
    errors
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir
                if out
                    .components()
                    .next_back()
                    .is_some_and(|l| l != Component::ParentDir) =>
            {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------- flags

/// `lookout`'s flags: per subcommand, as its `--help` lists them.
#[derive(Debug)]
struct Flags {
    per_sub: BTreeMap<String, BTreeSet<String>>,
}

impl Flags {
    fn of_binary() -> Self {
        let help = |args: &[&str]| {
            let out = Command::new(env!("CARGO_BIN_EXE_lookout"))
                .args(args)
                .output()
                .expect("lookout runs");
            assert!(out.status.success(), "lookout {args:?} fails");
            String::from_utf8(out.stdout).expect("the help is UTF-8")
        };
        let top = help(&["--help"]);
        let subs: Vec<String> = top
            .lines()
            .skip_while(|l| l.trim() != "Commands:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_whitespace().next())
            .filter(|s| *s != "help")
            .map(str::to_owned)
            .collect();
        assert!(
            subs.len() >= 5,
            "lookout --help lists its subcommands: {top}"
        );
        let mut per_sub = BTreeMap::new();
        for sub in subs {
            let mut set = options(&top);
            set.extend(options(&help(&[&sub, "--help"])));
            per_sub.insert(sub, set);
        }
        Flags { per_sub }
    }

    fn any(&self) -> BTreeSet<&str> {
        self.per_sub
            .values()
            .flatten()
            .map(String::as_str)
            .collect()
    }
}

/// The long options a `--help` text defines: those that begin a line, as
/// clap prints them (`-h, --help  Print help`), not those its descriptions
/// name.
fn options(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in help.lines() {
        for word in line.split_whitespace().map(|w| w.trim_end_matches(',')) {
            if !word.starts_with('-') {
                break;
            }
            out.extend(flags_in(word).into_iter().map(|(_, f)| f.to_owned()));
        }
    }
    out
}

/// The `--flag` words of a text, with their byte offsets: `--` then a
/// letter, not after a letter, digit or `-` (`a--b` and `---x` are none).
fn flags_in(text: &str) -> Vec<(usize, &str)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(k) = text[i..].find("--") {
        let at = i + k;
        let before_ok =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'-');
        let end = at
            + 2
            + text[at + 2..]
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'-')
                .count();
        if before_ok && bytes.get(at + 2).is_some_and(u8::is_ascii_alphabetic) {
            out.push((at, text[at..end].trim_end_matches('-')));
        }
        i = end.max(at + 2);
    }
    out
}

/// Whose flags a piece of a command line names.
#[derive(Clone, Debug, PartialEq)]
enum Owner {
    /// Another program's: not checked.
    Other,
    /// lookout's, of these subcommands (empty: any).
    Lookout(Vec<String>),
}

/// What is wrong with the flags one line of a code block, or one code span,
/// names. `inherited`: the owner a continuation line takes from the line
/// above it. Returns the owner of this line's last piece.
fn command_flag_errors(
    text: &str,
    inherited: Option<&Owner>,
    flags: &Flags,
    errors: &mut Vec<String>,
    here: &str,
) -> Option<Owner> {
    let mut last = None;
    for (k, piece) in text
        .split(" | ")
        .flat_map(|p| p.split(" && "))
        .flat_map(|p| p.split("; "))
        .enumerate()
    {
        let words: Vec<&str> = piece
            .split_whitespace()
            .skip_while(|w| *w == "$" || *w == "#" || (w.contains('=') && !w.starts_with('-')))
            .collect();
        let first = words.first().map(|w| w.trim_start_matches(['(', '[']));
        if first.is_some_and(|w| OTHER_PROGRAMS.contains(&w)) {
            last = Some(Owner::Other);
            continue;
        }
        // A piece after ` | ` goes on the line's command (a synopsis'
        // alternatives), a continuation line on the one above it.
        let mut owner = match (k, inherited, &last) {
            (0, Some(o), _) | (1.., _, Some(o)) => o.clone(),
            _ => Owner::Lookout(Vec::new()),
        };
        for (i, w) in words.iter().enumerate() {
            if w.rsplit('/').next() == Some("lookout") {
                let subs: Vec<String> = words
                    .get(i + 1)
                    .map(|s| s.split('|').map(str::to_owned).collect())
                    .unwrap_or_default();
                owner = if !subs.is_empty() && subs.iter().all(|s| flags.per_sub.contains_key(s)) {
                    Owner::Lookout(subs)
                } else {
                    Owner::Lookout(Vec::new())
                };
                continue;
            }
            for (_, flag) in flags_in(w) {
                if let Some(e) = flag_error(flag, &owner, flags) {
                    errors.push(format!("{here}: {e}"));
                }
            }
        }
        last = Some(owner);
    }
    last
}

fn flag_error(flag: &str, owner: &Owner, flags: &Flags) -> Option<String> {
    match owner {
        Owner::Other => None,
        Owner::Lookout(subs) if subs.is_empty() => {
            if flags.any().contains(flag) || OTHER_FLAGS.iter().any(|(f, _)| *f == flag) {
                None
            } else {
                Some(format!(
                    "`{flag}` is no flag of lookout (`lookout SUB --help`)"
                ))
            }
        }
        Owner::Lookout(subs) => subs
            .iter()
            .find(|s| !flags.per_sub[*s].contains(flag))
            .map(|s| format!("`{flag}` is no flag of `lookout {s}` (`lookout {s} --help`)")),
    }
}

/// What is wrong with the flags a Markdown text names for lookout.
fn flag_errors(doc: &Path, text: &str, flags: &Flags) -> Vec<String> {
    let mut errors = Vec::new();
    for block in blocks(text) {
        match block {
            Block::Code { line, lines, .. } => {
                let mut above: Option<Owner> = None;
                for (i, l) in lines.iter().enumerate() {
                    let here = format!("{}:{}", doc.display(), line + 1 + i);
                    let continues = l.starts_with([' ', '\t']) && !l.trim().is_empty();
                    let inherited = if continues { above.as_ref() } else { None };
                    above = command_flag_errors(l, inherited, flags, &mut errors, &here);
                }
            }
            Block::Prose { line, text } => {
                for (range, span) in code_spans(&text) {
                    let n = line + text[..range.start].matches('\n').count();
                    let here = format!("{}:{n}", doc.display());
                    let span = span.replace('\n', " ");
                    command_flag_errors(&span, None, flags, &mut errors, &here);
                }
                // Flags in plain prose (outside code spans and link targets).
                let mut plain = without_code_spans(&text);
                for (at, target) in link_targets(&plain.clone()) {
                    if let Some(p) = plain[at..].find(&target) {
                        plain.replace_range(
                            at + p..at + p + target.len(),
                            &" ".repeat(target.len()),
                        );
                    }
                }
                for (at, flag) in flags_in(&plain) {
                    let n = line + plain[..at].matches('\n').count();
                    if let Some(e) = flag_error(flag, &Owner::Lookout(Vec::new()), flags) {
                        errors.push(format!("{}:{n}: {e}", doc.display()));
                    }
                }
            }
        }
    }
    errors
}

// ---------------------------------------------------------------- compiled

/// What is wrong with the code blocks marked `<!-- compiled: FILE -->`.
fn compiled_errors(doc: &Path, text: &str) -> (Vec<String>, usize) {
    let mut errors = Vec::new();
    let mut marked = 0;
    for block in blocks(text) {
        let Block::Code {
            line,
            lines,
            compiled: Some(file),
        } = block
        else {
            continue;
        };
        marked += 1;
        let here = format!("{}:{line}: the block compiled from `{file}`", doc.display());
        let path = normalize(&doc.parent().unwrap_or(Path::new("")).join(&file));
        if !COMPILED.iter().any(|c| Path::new(c) == path) {
            errors.push(format!(
                "{here}: {} is not one of the files this test compiles",
                path.display()
            ));
            continue;
        }
        if !is_excerpt(&lines, &read(&path)) {
            errors.push(format!(
                "{here}: is not {} as it is (a contiguous part of it)",
                path.display()
            ));
        }
    }
    (errors, marked)
}

/// Whether `block` is a run of `source`'s lines, each indented by the same
/// extra amount in `source`.
fn is_excerpt(block: &[String], source: &str) -> bool {
    let src: Vec<&str> = source.lines().collect();
    let Some(first) = block.first() else {
        return false;
    };
    (0..src.len()).any(|i| {
        let Some(indent) = src[i].len().checked_sub(first.len()) else {
            return false;
        };
        let pad = &src[i][..indent];
        !pad.chars().any(|c| c != ' ')
            && block.iter().enumerate().all(|(k, b)| {
                src.get(i + k).is_some_and(|s| {
                    (b.is_empty() && s.trim().is_empty())
                        || (s.strip_prefix(pad) == Some(b.as_str()))
                })
            })
    })
}

// ---------------------------------------------------------------- the tests

#[test]
fn every_relative_link_resolves() {
    let errors: Vec<String> = doc_files()
        .iter()
        .flat_map(|d| link_errors(d, &read(d)))
        .collect();
    assert!(errors.is_empty(), "dead links:\n{}", errors.join("\n"));
}

#[test]
fn every_flag_named_for_lookout_exists() {
    let flags = Flags::of_binary();
    let mut errors = Vec::new();
    let mut named = String::new();
    for doc in doc_files() {
        let text = read(&doc);
        errors.extend(flag_errors(&doc, &text, &flags));
        named.push_str(&text);
    }
    assert!(
        errors.is_empty(),
        "stale or made-up flags:\n{}",
        errors.join("\n")
    );
    // The allow-list stays small and true: each entry named, none lookout's.
    for (flag, why) in OTHER_FLAGS {
        assert!(
            flags_in(&named).iter().any(|(_, f)| f == flag),
            "{flag} ({why}) is no longer named in the docs: drop it from OTHER_FLAGS"
        );
        assert!(
            !flags.any().contains(flag),
            "{flag} is lookout's own: drop it from OTHER_FLAGS"
        );
    }
}

#[test]
fn compiled_examples_are_shown_as_they_are() {
    let mut errors = Vec::new();
    let mut marked = 0;
    for doc in doc_files() {
        let (e, n) = compiled_errors(&doc, &read(&doc));
        errors.extend(e);
        marked += n;
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(marked >= COMPILED.len(), "each compiled example is shown");
}

// The checks can fail: a made-up link, anchor and flag are each found.

/// `errors` are one per `expected` text, in order, each containing it.
fn assert_found(errors: &[String], expected: &[&str]) {
    assert_eq!(errors.len(), expected.len(), "{errors:#?}");
    for (e, x) in errors.iter().zip(expected) {
        assert!(e.contains(x), "{e:?} does not say {x:?}");
    }
}

#[test]
fn the_openapi_document_in_docs_is_the_one_served() {
    let served = read(Path::new("crates/lookout/src/serve/openapi.json"));
    let docs = read(Path::new("docs/openapi.json"));
    assert!(
        served == docs,
        "docs/openapi.json differs from crates/lookout/src/serve/openapi.json: \
         cp crates/lookout/src/serve/openapi.json docs/openapi.json"
    );
}

#[test]
fn a_dead_link_or_anchor_is_found() {
    let text =
        "See [cli](cli.md#no-such-heading), [gone](no/such/page.md) and [ok](cli.md#synopsis).\n";
    let errors = link_errors(Path::new("docs/x.md"), text);
    assert_found(
        &errors,
        &[
            "no heading #no-such-heading",
            "no such file or folder docs/no/such/page.md",
        ],
    );
}

#[test]
fn a_made_up_flag_is_found() {
    let flags = Flags::of_binary();
    let text = "\
Run `lookout docker --no-such-flag` or `lookout etcd --label a=b`; `cargo build --release` is cargo's.
In prose, --frobnicate is found too.

```text
$ lookout k8s --kubeconfig PATH
            [--made-up N]
$ docker run --rm busybox
```
";
    let errors = flag_errors(Path::new("x.md"), text, &flags);
    assert_found(
        &errors,
        &[
            "`--no-such-flag` is no flag of `lookout docker`",
            "`--label` is no flag of `lookout etcd`",
            "x.md:2: `--frobnicate` is no flag of lookout",
            "x.md:6: `--made-up` is no flag of `lookout k8s`",
        ],
    );
}

#[test]
fn slugs_are_githubs() {
    let text = "# Serve: `--serve ADDR`\n## The page at `/`\n## `lookout etcd --serve`\n## Exits\n```sh\n# not a heading\n```\n## Exits\n";
    let expected: BTreeSet<String> = [
        "serve---serve-addr",
        "the-page-at-",
        "lookout-etcd---serve",
        "exits",
        "exits-1",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(anchors(text), expected);
}

#[test]
fn an_edited_example_is_found() {
    let source = "fn f() {\n    let a = 1;\n\n    let b = 2;\n}\n";
    let shown = |s: &str| s.lines().map(str::to_owned).collect::<Vec<_>>();
    assert!(is_excerpt(&shown("let a = 1;\n\nlet b = 2;"), source));
    assert!(!is_excerpt(&shown("let a = 1;\nlet b = 2;"), source));
    assert!(!is_excerpt(&shown("let a = 2;"), source));
}
