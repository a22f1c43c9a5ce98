//! `cargo xtask structure`: no import circle between the files of a crate,
//! and no library file too long to hold in one's head.
//!
//! For every crate in `crates/` and for `xtask`, each crate root (`lib.rs`,
//! `main.rs`) and the files its `mod NAME;` declarations reach (`#[path]`
//! honoured) are read without their test code: `#[cfg(test)]` items (a
//! `mod tests;` line, a `mod tests { … }` block), and files named `tests.rs`
//! or under a `tests/` folder. Each file's paths that start with `crate::`,
//! `super::` or `self::` — in `use` trees (`use super::{a, b::C}`), in
//! expressions, in doc links — are resolved to the file that defines the
//! longest module prefix; that makes an edge between two files, except an
//! edge to the crate root (the root re-exports what the files define). A
//! strongly connected set of more than one file is a circle.
//!
//! Each file of a published crate (one without `publish = false`: the
//! libraries and the CLI) may hold at most [`LIMIT`] lines of non-test code,
//! a line being one that is neither blank nor a `//` comment.
//!
//! The rules are those of the lead's `modcycles.py`, so that both agree;
//! beyond it, this check reads grouped `use` trees (`use super::{x, y}`) and
//! checks `testkit`, `engines` and `xtask` for circles too.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::engines;

/// The most lines of non-test code a file of a published crate may hold.
pub const LIMIT: usize = 500;

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!(
            "`cargo xtask structure` takes no arguments (got {a:?})"
        ));
    }
    check(&engines::workspace_root())
}

/// The whole check over the workspace at `root`: prints each finding and a
/// summary line on stdout, and fails when there is any finding.
pub fn check(root: &Path) -> Result<(), String> {
    let mut findings = Vec::new();
    for krate in crates(root)? {
        findings.extend(check_crate(
            &krate.name,
            &krate.src,
            krate.published,
            &read_tree(root, &krate.src)?,
        ));
    }
    for f in &findings {
        println!("{f}");
    }
    let cycles = findings
        .iter()
        .filter(|f| matches!(f, Finding::Cycle { .. }))
        .count();
    let summary = format!(
        "{cycles} file cycles, {} files over {LIMIT} lines of non-test code",
        findings.len() - cycles
    );
    println!("{summary}");
    if findings.is_empty() {
        Ok(())
    } else {
        Err(format!("structure: {summary}"))
    }
}

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Files of `krate` that import each other, around a loop.
    Cycle { krate: String, files: Vec<PathBuf> },
    /// A file of a published crate over [`LIMIT`] lines of non-test code.
    Big { file: PathBuf, lines: usize },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Cycle { krate, files } => {
                let files: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
                write!(f, "cycle: {krate}: {}", files.join(" <-> "))
            }
            Finding::Big { file, lines } => {
                write!(f, "big: {} {lines} lines of non-test code", file.display())
            }
        }
    }
}

/// A crate to check.
struct Crate {
    /// Its folder's name (`core-stream`, `lookout`, `xtask`).
    name: String,
    /// Its `src/`, from the workspace root.
    src: PathBuf,
    published: bool,
}

/// The crates in `crates/` (sorted) and `xtask`.
fn crates(root: &Path) -> Result<Vec<Crate>, String> {
    let dir = root.join("crates");
    let entries = fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| Path::new("crates").join(e.file_name()))
        .collect();
    dirs.sort();
    dirs.push(PathBuf::from("xtask"));
    let mut out = Vec::new();
    for d in dirs {
        let Ok(manifest) = fs::read_to_string(root.join(&d).join("Cargo.toml")) else {
            continue;
        };
        if !root.join(&d).join("src").is_dir() {
            continue;
        }
        let published = !manifest
            .lines()
            .any(|l| l.split_whitespace().collect::<String>() == "publish=false");
        let name = d
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        out.push(Crate {
            name,
            src: d.join("src"),
            published,
        });
    }
    Ok(out)
}

/// Every `.rs` file under `src` (a path from `root`), by its path from `src`.
fn read_tree(root: &Path, src: &Path) -> Result<BTreeMap<PathBuf, String>, String> {
    fn walk(abs: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, String>) -> Result<(), String> {
        let entries =
            fs::read_dir(abs).map_err(|e| format!("cannot read {}: {e}", abs.display()))?;
        for entry in entries.filter_map(Result::ok) {
            let (path, name) = (entry.path(), entry.file_name());
            if path.is_dir() {
                walk(&path, &rel.join(&name), out)?;
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                out.insert(rel.join(&name), text);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(&root.join(src), Path::new(""), &mut out)?;
    Ok(out)
}

/// One file of a crate's module tree.
#[derive(Debug)]
struct Module {
    /// Its path from `src/`.
    file: PathBuf,
    /// Its text without test code.
    code: String,
}

/// The findings of one crate: `files` maps each `.rs` file's path from
/// `src` (the crate's `src/`, from the workspace root) to its text.
pub fn check_crate(
    krate: &str,
    src: &Path,
    published: bool,
    files: &BTreeMap<PathBuf, String>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for root in ["lib.rs", "main.rs"] {
        let Some(text) = files.get(Path::new(root)) else {
            continue;
        };
        let tree = module_tree(Path::new(root), text, files);
        if published {
            for m in tree.values() {
                let lines = code_lines(&m.code);
                if lines > LIMIT && !is_test_file(&m.file) {
                    findings.push(Finding::Big {
                        file: src.join(&m.file),
                        lines,
                    });
                }
            }
        }
        let graph: BTreeMap<&[String], BTreeSet<Vec<String>>> = tree
            .iter()
            .map(|(path, m)| {
                let to = paths(&m.code)
                    .iter()
                    .filter_map(|p| resolve(p, path, &tree))
                    .collect();
                (path.as_slice(), to)
            })
            .collect();
        for cycle in cycles(&graph) {
            let mut files: Vec<PathBuf> = cycle.iter().map(|m| src.join(&tree[*m].file)).collect();
            // As strings (`hub.rs` before `hub/store.rs`), as modcycles.py.
            files.sort_by_key(|f| f.display().to_string());
            findings.push(Finding::Cycle {
                krate: krate.to_owned(),
                files,
            });
        }
    }
    findings
}

fn is_test_file(file: &Path) -> bool {
    file.file_name().is_some_and(|n| n == "tests.rs")
        || file.components().any(|c| c.as_os_str() == "tests")
}

/// The crate's modules by their path (`["hub", "store"]`), from the root
/// file through its non-test `mod NAME;` declarations; test files left out.
fn module_tree(
    root: &Path,
    text: &str,
    files: &BTreeMap<PathBuf, String>,
) -> BTreeMap<Vec<String>, Module> {
    let mut tree = BTreeMap::new();
    let mut todo = vec![(Vec::new(), root.to_path_buf(), strip_tests(text))];
    while let Some((path, file, code)) = todo.pop() {
        // A `mod x;` of `a/b.rs` is `a/b/x.rs`; of a `lib.rs`, `main.rs` or
        // `mod.rs`, the `x.rs` beside it; `#[path]` is from the file's folder.
        let folder = file.parent().unwrap_or(Path::new("")).to_path_buf();
        let owns_folder = path.is_empty() || file.file_name().is_some_and(|n| n == "mod.rs");
        let children = if owns_folder {
            folder.clone()
        } else {
            folder.join(file.file_stem().unwrap_or_default())
        };
        for (name, at) in mod_declarations(&code) {
            let candidates = match at {
                Some(p) => vec![folder.join(p)],
                None => vec![
                    children.join(format!("{name}.rs")),
                    children.join(&name).join("mod.rs"),
                ],
            };
            let Some(child) = candidates.into_iter().find(|c| files.contains_key(c)) else {
                continue;
            };
            if is_test_file(&child) {
                continue;
            }
            let mut child_path = path.clone();
            child_path.push(name);
            let child_code = strip_tests(&files[&child]);
            todo.push((child_path, child, child_code));
        }
        tree.insert(path, Module { file, code });
    }
    tree
}

/// The `mod NAME;` declarations of a file's code, each with its
/// `#[path = "…"]` if it has one.
fn mod_declarations(code: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut path_attr: Option<String> = None;
    for line in code.lines() {
        let mut t = line.trim();
        if let Some(p) = t.strip_prefix("#[path") {
            path_attr = p.split('"').nth(1).map(str::to_owned);
            continue;
        }
        if t.starts_with("#[") {
            continue;
        }
        if let Some(rest) = t.strip_prefix("pub") {
            t = rest.trim_start();
            if t.starts_with('(') {
                t = t.split_once(')').map_or("", |(_, r)| r.trim_start());
            }
        }
        if let Some(decl) = t.strip_prefix("mod ")
            && let Some(name) = decl.trim().strip_suffix(';')
        {
            out.push((name.trim().to_owned(), path_attr.take()));
        }
        path_attr = None;
    }
    out
}

/// The text without its `#[cfg(test)]` items: a `mod tests;` line, a
/// `mod tests { … }` block (to its closing brace, braces counted per line),
/// any other item so marked. Lines stay lines.
pub fn strip_tests(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        let Some(after) = t.strip_prefix("#[cfg(test)]") else {
            out.push(lines[i]);
            i += 1;
            continue;
        };
        // The item: the rest of this line, else the lines after its attributes.
        let mut j = if after.trim().is_empty() { i + 1 } else { i };
        while j > i && j < lines.len() && lines[j].trim().starts_with("#[") {
            j += 1;
        }
        let first = if j == i {
            after
        } else {
            lines.get(j).copied().unwrap_or("")
        };
        if first.trim_end().ends_with(';') {
            i = j + 1;
            continue;
        }
        let (mut depth, mut started) = (0_i64, false);
        while j < lines.len() {
            let l = if j == i { after } else { lines[j] };
            depth += count(l, '{') - count(l, '}');
            started |= l.contains('{');
            j += 1;
            if started && depth <= 0 {
                break;
            }
        }
        i = j;
    }
    out.join("\n")
}

fn count(s: &str, c: char) -> i64 {
    i64::try_from(s.matches(c).count()).unwrap_or(i64::MAX)
}

/// Lines that are neither blank nor a `//` comment.
pub fn code_lines(code: &str) -> usize {
    code.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

/// Every path of `code` that starts with `crate`, `super` or `self` and goes
/// on with `::`, as its segments; a `use` tree gives one path per leaf
/// (`use super::{a, b::{self, C}}`: `super::a`, `super::b`, `super::b::C`).
pub fn paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident_start(bytes[i]) || (i > 0 && is_ident(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let end = ident_end(bytes, i);
        let word = &code[i..end];
        if matches!(word, "crate" | "super" | "self") && code[end..].starts_with("::") {
            let mut prefix = vec![word.to_owned()];
            i = path_rest(code, end, &mut prefix, &mut out);
        } else {
            i = end;
        }
    }
    out
}

/// Reads what follows a path's `prefix` from `at`: `::name`…, `::*`,
/// `::{tree, …}`; pushes each complete path to `out`; returns where it ends.
fn path_rest(
    code: &str,
    mut at: usize,
    prefix: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let bytes = code.as_bytes();
    while code[at..].starts_with("::") {
        let next = skip_blank(code, at + 2);
        match bytes.get(next) {
            Some(b'{') => {
                let mut k = next + 1;
                loop {
                    k = skip_blank(code, k);
                    match bytes.get(k) {
                        None => return k,
                        Some(b'}') => return k + 1,
                        Some(b',') => k += 1,
                        Some(&b) if is_ident_start(b) => {
                            let end = ident_end(bytes, k);
                            let mut sub = prefix.clone();
                            if &code[k..end] != "self" {
                                sub.push(code[k..end].to_owned());
                            }
                            k = path_rest(code, end, &mut sub, out);
                            // `name as alias`
                            let after = skip_blank(code, k);
                            if code[after..].starts_with("as ") {
                                let alias = skip_blank(code, after + 3);
                                k = ident_end(bytes, alias);
                            }
                        }
                        Some(b'*') => {
                            out.push(prefix.clone());
                            k += 1;
                        }
                        Some(_) => k += 1,
                    }
                }
            }
            Some(b'*') => {
                out.push(prefix.clone());
                return next + 1;
            }
            Some(&b) if is_ident_start(b) => {
                let end = ident_end(bytes, next);
                prefix.push(code[next..end].to_owned());
                at = end;
            }
            _ => break,
        }
    }
    out.push(prefix.clone());
    at
}

/// Past whitespace and `//` comments.
fn skip_blank(code: &str, mut at: usize) -> usize {
    loop {
        let rest = &code[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if trimmed.starts_with("//") {
            at += trimmed.find('\n').unwrap_or(trimmed.len());
        } else {
            return at;
        }
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn ident_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && is_ident(bytes[at]) {
        at += 1;
    }
    at
}

/// The module a path from the module `here` lands in: the longest prefix of
/// it that is a module of the tree. `None` for the module itself and for the
/// crate root.
fn resolve<T>(
    path: &[String],
    here: &[String],
    tree: &BTreeMap<Vec<String>, T>,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let target: Vec<String> = match first.as_str() {
        "crate" => rest.to_vec(),
        "self" => here.iter().chain(rest).cloned().collect(),
        _ => {
            let ups = 1 + rest.iter().take_while(|s| *s == "super").count();
            let mut up = here.to_vec();
            up.truncate(here.len().saturating_sub(ups));
            up.extend(rest[ups - 1..].iter().cloned());
            up
        }
    };
    let best = (0..=target.len())
        .rev()
        .map(|n| &target[..n])
        .find(|t| tree.contains_key(*t))?;
    (!best.is_empty() && best != here).then(|| best.to_vec())
}

/// The strongly connected sets of more than one node (Tarjan).
fn cycles<'a>(graph: &BTreeMap<&'a [String], BTreeSet<Vec<String>>>) -> Vec<Vec<&'a [String]>> {
    struct Tarjan<'g, 'a> {
        graph: &'g BTreeMap<&'a [String], BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a [String], usize>,
        low: BTreeMap<&'a [String], usize>,
        stack: Vec<&'a [String]>,
        on_stack: BTreeSet<&'a [String]>,
        found: Vec<Vec<&'a [String]>>,
    }
    impl<'a> Tarjan<'_, 'a> {
        fn visit(&mut self, v: &'a [String]) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in &self.graph[v] {
                let Some((&w, _)) = self.graph.get_key_value(w.as_slice()) else {
                    continue;
                };
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    set.push(w);
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    self.found.push(set);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

#[cfg(test)]
mod tests;
