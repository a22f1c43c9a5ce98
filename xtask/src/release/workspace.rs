//! What `cargo metadata` says about the workspace: its packages (which are
//! published, their versions, `rust-version`, library or not, their
//! dependencies) and the resolved graph of `Cargo.lock`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::version::Version;

#[derive(Debug, Clone)]
pub struct Package {
    pub id: String,
    pub name: String,
    pub version: String,
    pub dir: PathBuf,
    pub publish: bool,
    pub rust_version: Option<String>,
    pub has_lib: bool,
    /// Dependencies that are not dev-dependencies: `(name, requirement, is a path dependency)`.
    pub deps: Vec<(String, String, bool)>,
}

impl Package {
    pub fn version(&self) -> Result<Version, String> {
        Version::parse(&self.version).map_err(|e| format!("{}: {e}", self.name))
    }
}

#[derive(Debug)]
pub struct Metadata {
    pub packages: Vec<Package>,
    /// Every package in the resolve (registry ones included), by id.
    pub all: BTreeMap<String, Package>,
    /// The resolved graph: id → ids of its normal and build dependencies.
    pub edges: BTreeMap<String, Vec<String>>,
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn package(p: &Value) -> Package {
    let deps = p
        .get("dependencies")
        .and_then(Value::as_array)
        .map(|ds| {
            ds.iter()
                .filter(|d| d.get("kind").and_then(Value::as_str) != Some("dev"))
                .map(|d| (str_of(d, "name"), str_of(d, "req"), d.get("path").is_some()))
                .collect()
        })
        .unwrap_or_default();
    let has_lib = p
        .get("targets")
        .and_then(Value::as_array)
        .is_some_and(|ts| {
            ts.iter().any(|t| {
                t.get("kind")
                    .and_then(Value::as_array)
                    .is_some_and(|k| k.iter().any(|k| k == "lib"))
            })
        });
    let manifest = PathBuf::from(str_of(p, "manifest_path"));
    Package {
        id: str_of(p, "id"),
        name: str_of(p, "name"),
        version: str_of(p, "version"),
        dir: manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
        // `publish`: null = anywhere, [] = `publish = false`.
        publish: p
            .get("publish")
            .is_none_or(|v| v.is_null() || v.as_array().is_some_and(|a| !a.is_empty())),
        rust_version: p
            .get("rust_version")
            .and_then(Value::as_str)
            .map(str::to_owned),
        has_lib,
        deps,
    }
}

/// `cargo metadata --format-version 1 --locked` in `dir`, with `extra` arguments.
pub fn read(dir: &Path, extra: &[&str]) -> Result<Metadata, String> {
    let out = Command::new(crate::process::cargo_bin())
        .args(["metadata", "--format-version", "1", "--locked"])
        .args(extra)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata in {} failed", dir.display()));
    }
    let v: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let all: BTreeMap<String, Package> = v
        .get("packages")
        .and_then(Value::as_array)
        .ok_or("cargo metadata: no packages")?
        .iter()
        .map(package)
        .map(|p| (p.id.clone(), p))
        .collect();
    let members: BTreeSet<String> = v
        .get("workspace_members")
        .and_then(Value::as_array)
        .map(|m| {
            m.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut packages: Vec<Package> = all
        .values()
        .filter(|p| members.contains(&p.id))
        .cloned()
        .collect();
    packages.sort_by(|a, b| a.name.cmp(&b.name));
    let mut edges = BTreeMap::new();
    if let Some(nodes) = v
        .get("resolve")
        .and_then(|r| r.get("nodes"))
        .and_then(Value::as_array)
    {
        for node in nodes {
            let to = node
                .get("deps")
                .and_then(Value::as_array)
                .map(|ds| {
                    ds.iter()
                        .filter(|d| {
                            d.get("dep_kinds")
                                .and_then(Value::as_array)
                                .is_some_and(|ks| {
                                    ks.iter().any(|k| {
                                        k.get("kind").and_then(Value::as_str) != Some("dev")
                                    })
                                })
                        })
                        .map(|d| str_of(d, "pkg"))
                        .collect()
                })
                .unwrap_or_default();
            edges.insert(str_of(node, "id"), to);
        }
    }
    Ok(Metadata {
        packages,
        all,
        edges,
    })
}

impl Metadata {
    /// The published members, each after every member it depends on.
    pub fn publish_order(&self) -> Result<Vec<&Package>, String> {
        let published: Vec<&Package> = self.packages.iter().filter(|p| p.publish).collect();
        let names: BTreeSet<&str> = published.iter().map(|p| p.name.as_str()).collect();
        let mut order: Vec<&Package> = Vec::new();
        let mut placed: BTreeSet<&str> = BTreeSet::new();
        while order.len() < published.len() {
            let before = order.len();
            for p in &published {
                if placed.contains(p.name.as_str()) {
                    continue;
                }
                let ready = p
                    .deps
                    .iter()
                    .filter(|(n, _, _)| names.contains(n.as_str()))
                    .all(|(n, _, _)| placed.contains(n.as_str()));
                if ready {
                    placed.insert(p.name.as_str());
                    order.push(p);
                }
            }
            if order.len() == before {
                return Err("the published crates depend on each other in a circle".to_owned());
            }
        }
        Ok(order)
    }

    pub fn member(&self, name: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.name == name)
    }

    /// Every package `from` needs to build (normal and build dependencies, transitively).
    pub fn closure(&self, from: &str) -> Vec<&Package> {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            if let Some(to) = self.edges.get(id) {
                stack.extend(to.iter().map(String::as_str));
            }
        }
        seen.iter().filter_map(|id| self.all.get(*id)).collect()
    }
}
