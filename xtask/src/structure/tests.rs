//! The structure check's parser and graph on small crates in memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Finding, LIMIT, check_crate, code_lines, paths, strip_tests};

fn krate(files: &[(&str, &str)]) -> BTreeMap<PathBuf, String> {
    files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
        .collect()
}

fn check(files: &[(&str, &str)]) -> Vec<Finding> {
    check_crate("demo", Path::new("crates/demo/src"), true, &krate(files))
}

fn p(segments: &str) -> Vec<String> {
    segments.split("::").map(str::to_owned).collect()
}

#[test]
fn use_trees_and_expression_paths_are_read() {
    let code = "\
use super::{a, b::{self, C as D}};
use crate::{
    // the ring
    hub::Hub,
    x::*,
};
fn f() { crate::watch::Item::Event; let s = self::y::Z; my_crate::no::Edge; $crate::m::N; }
pub(crate) fn g() {}
";
    let expected = [
        "super::a",
        "super::b",
        "super::b::C",
        "crate::hub::Hub",
        "crate::x",
        "crate::watch::Item::Event",
        "self::y::Z",
        "crate::m::N",
    ];
    assert_eq!(paths(code), expected.map(p));
}

#[test]
fn a_circle_between_files_is_named() {
    let findings = check(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n"),
        ("a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "b.rs",
            "pub struct B;\nimpl B { fn a(&self) -> super::a::A { todo!() } }\n",
        ),
        ("c.rs", "use crate::a::A;\n"),
    ]);
    assert_eq!(
        findings,
        [Finding::Cycle {
            krate: "demo".to_owned(),
            files: vec![
                PathBuf::from("crates/demo/src/a.rs"),
                PathBuf::from("crates/demo/src/b.rs")
            ],
        }]
    );
    assert_eq!(
        findings[0].to_string(),
        "cycle: demo: crates/demo/src/a.rs <-> crates/demo/src/b.rs"
    );
}

#[test]
fn a_loop_through_a_use_tree_and_a_child_folder_is_named() {
    let findings = check(&[
        ("lib.rs", "mod hub;\nmod watch;\n"),
        ("hub.rs", "mod store;\nuse crate::watch::{Item, Status};\n"),
        ("hub/store.rs", "use super::{Inner, Waiter};\n"),
        (
            "watch.rs",
            "fn known() { crate::hub::store::Store::new(); }\n",
        ),
    ]);
    let [Finding::Cycle { files, .. }] = findings.as_slice() else {
        panic!("one cycle: {findings:?}")
    };
    assert_eq!(
        files,
        &[
            PathBuf::from("crates/demo/src/hub.rs"),
            PathBuf::from("crates/demo/src/hub/store.rs"),
            PathBuf::from("crates/demo/src/watch.rs"),
        ]
    );
}

#[test]
fn no_circle_no_finding() {
    // A child uses its parent, the parent re-exports the child by a relative
    // path; every file uses the root; a sibling uses another one way only.
    let findings = check(&[
        (
            "lib.rs",
            "mod hub;\nmod watch;\npub use hub::Hub;\npub const LIMIT: u8 = 1;\n",
        ),
        (
            "hub.rs",
            "mod store;\npub use store::Store;\nuse crate::watch::Item;\nuse crate::LIMIT;\n",
        ),
        (
            "hub/store.rs",
            "use super::{Inner, Waiter};\nuse crate::{LIMIT, Item};\n",
        ),
        ("watch.rs", "use crate::LIMIT;\npub enum Item {}\n"),
    ]);
    assert_eq!(findings, []);
}

#[test]
fn test_code_makes_no_edge() {
    let findings = check(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "use crate::b::B;\n#[cfg(test)]\nmod tests {\n    use crate::b::{x, y};\n    fn f() { crate::b::B; }\n}\n#[cfg(test)]\nmod more;\n",
        ),
        ("a/more.rs", "use crate::b::B;\n"),
        (
            "b.rs",
            "#[cfg(test)] use crate::a::A;\n#[cfg(test)]\n#[allow(dead_code)]\nfn t() { crate::a::f(); }\nmod tests;\n",
        ),
        ("b/tests.rs", "use crate::a::A;\n"),
    ]);
    assert_eq!(findings, []);
}

#[test]
fn long_files_of_published_crates_are_named() {
    let long = "fn f() {}\n// a comment\n\n".repeat(LIMIT + 1);
    let tests = format!("#[cfg(test)]\nmod tests {{\n{long}}}\n");
    let files = [
        ("lib.rs", "mod long;\nmod short;\n"),
        ("long.rs", long.as_str()),
        ("short.rs", tests.as_str()),
    ];
    assert_eq!(
        check(&files),
        [Finding::Big {
            file: PathBuf::from("crates/demo/src/long.rs"),
            lines: LIMIT + 1
        }]
    );
    assert_eq!(
        check(&files)[0].to_string(),
        format!(
            "big: crates/demo/src/long.rs {} lines of non-test code",
            LIMIT + 1
        )
    );
    // An unpublished crate's files may be long.
    assert_eq!(
        check_crate("demo", Path::new("src"), false, &krate(&files)),
        []
    );
}

#[test]
fn code_lines_skip_blanks_comments_and_tests() {
    let text = "//! doc\nfn a() {}\n\n    // note\n#[cfg(test)]\nmod tests {\n    fn b() {}\n}\nfn c() {}\n";
    assert_eq!(code_lines(&strip_tests(text)), 2);
}
