//! `--render TEMPLATE:DEST`: the templates, minijinja's (Jinja2's syntax),
//! each read and parsed once at start, so that one that does not parse
//! stops the run before it watches anything (exit 2, with its line and
//! column); an error while rendering (a value of the wrong type, an unknown
//! function) costs that render only.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use minijinja::Environment;
use serde::Serialize;

/// One `--render TEMPLATE:DEST`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub template: PathBuf,
    pub dest: PathBuf,
}

/// `TEMPLATE:DEST`, split at the last `:` (a template's path may hold one,
/// a destination's may not).
pub fn parse_spec(arg: &str) -> Result<Spec, String> {
    match arg.rsplit_once(':') {
        Some((template, dest)) if !template.is_empty() && !dest.is_empty() => Ok(Spec {
            template: PathBuf::from(template),
            dest: PathBuf::from(dest),
        }),
        _ => Err(format!("`{arg}` is not TEMPLATE:DEST")),
    }
}

/// Why the templates cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("cannot read the template {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the template {path} does not parse at line {line}, column {column}: {why}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        why: String,
    },
}

/// The templates of a run, parsed.
#[derive(Debug)]
pub struct Templates {
    env: Environment<'static>,
    /// Each template's name in `env` (its index) and its `--render`.
    specs: Vec<Spec>,
}

impl Templates {
    /// Reads and parses each template.
    pub fn load(specs: &[Spec]) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        // Jinja2's and docker-gen's habit: a block tag's own line break is
        // not output, so a `{% for %}` line leaves no blank line.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(true);
        for (i, spec) in specs.iter().enumerate() {
            let path = spec.template.display().to_string();
            let source =
                std::fs::read_to_string(&spec.template).map_err(|source| TemplateError::Read {
                    path: path.clone(),
                    source,
                })?;
            env.add_template_owned(i.to_string(), source.clone())
                .map_err(|e| syntax(&path, &source, &e))?;
        }
        Ok(Self {
            env,
            specs: specs.to_vec(),
        })
    }

    /// The `--render`s, in order.
    pub fn specs(&self) -> &[Spec] {
        &self.specs
    }

    /// Renders the `i`th template with `context`: the text, or why not
    /// (minijinja's error and its causes, with the line).
    pub fn render(&self, i: usize, context: &impl Serialize) -> Result<String, String> {
        let template = self
            .env
            .get_template(&i.to_string())
            .map_err(|e| describe(&e))?;
        template.render(context).map_err(|e| describe(&e))
    }
}

/// A parse error with its line and column (1-based).
fn syntax(path: &str, source: &str, e: &minijinja::Error) -> TemplateError {
    let at = e.range().map(|r| r.start);
    let line = e
        .line()
        .or_else(|| at.map(|at| source[..at.min(source.len())].lines().count().max(1)))
        .unwrap_or(1);
    let column = at.and_then(|at| source.get(..at)).map_or(1, |before| {
        before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1
    });
    TemplateError::Syntax {
        path: path.to_owned(),
        line,
        column,
        why: e
            .detail()
            .map_or_else(|| e.kind().to_string(), str::to_owned),
    }
}

/// A render error: what went wrong, where (line) and its causes.
fn describe(e: &minijinja::Error) -> String {
    let mut s = e
        .detail()
        .map_or_else(|| e.kind().to_string(), str::to_owned);
    if let Some(line) = e.line() {
        let _ = write!(s, " (line {line})");
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let _ = write!(s, ": {cause}");
        source = cause.source();
    }
    s
}

/// Whether `path`'s folder exists (a destination in a missing folder is a
/// mistake to say at start).
pub fn folder_exists(path: &Path) -> bool {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.is_dir(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Templates, TemplateError> {
        let dir = std::env::temp_dir().join(format!("lookout-template-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp folder");
        let path = dir.join(format!("t{}.j2", text.len()));
        std::fs::write(&path, text).expect("written");
        let spec = Spec {
            template: path,
            dest: dir.join("out"),
        };
        Templates::load(&[spec])
    }

    #[test]
    fn splits_template_and_destination_at_the_last_colon() {
        assert_eq!(
            parse_spec("a:b/c.tmpl:/etc/nginx/conf.d/x.conf"),
            Ok(Spec {
                template: "a:b/c.tmpl".into(),
                dest: "/etc/nginx/conf.d/x.conf".into()
            })
        );
        assert!(parse_spec("only").is_err());
        assert!(parse_spec(":x").is_err());
        assert!(parse_spec("x:").is_err());
    }

    #[test]
    fn a_syntax_error_names_its_line_and_column() {
        let err = load("ok\n{% for i in instances %}\n  {{ i.id }\n{% endfor %}\n")
            .expect_err("does not parse");
        match err {
            TemplateError::Syntax { line, column, .. } => {
                assert_eq!(line, 3, "{err}");
                assert!(column > 1, "{err}");
            }
            TemplateError::Read { .. } => panic!("{err}"),
        }
    }

    #[test]
    fn renders_and_says_a_runtime_error() {
        let t = load("{% for i in instances %}{{ i.id }} {% endfor %}").expect("parses");
        let ctx = serde_json::json!({ "instances": [{ "id": "a" }, { "id": "b" }] });
        assert_eq!(t.render(0, &ctx).as_deref(), Ok("a b "));
        let t = load("{{ nosuch(instances) }}").expect("parses");
        let err = t.render(0, &ctx).expect_err("an unknown function");
        assert!(err.contains("nosuch") || err.contains("unknown"), "{err}");
    }
}
