//! Templates and expressions in workflow files, both MiniJinja's (Jinja2
//! syntax): `"Summarise {{ steps.list.output }}"` is a template, `when`,
//! `if` and `items` are expressions (`steps.check.output.count > 3`).
//! What they see: `inputs`, `steps.<id>.output` (and `.status`), `run`
//! (its id and workflow) and, inside a `for_each`, the item under its
//! name and `index`.
//!
//! Undefined values are errors, not empty text: a misspelt path fails the
//! step with MiniJinja's sentence instead of sending a blank prompt. Every
//! evaluation runs on fuel, so a template cannot loop for ever. A string
//! that is one `{{ expression }}` and nothing else keeps the expression's
//! type (a list stays a list) wherever a value, not text, is wanted — a
//! tool's arguments, a sub-workflow's inputs.

use std::collections::BTreeSet;

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior};
use serde_json::Value;

/// Instructions one evaluation may execute.
const FUEL: u64 = 200_000;

/// Why a template or expression could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason}")]
pub struct TemplateError {
    /// 1-based line inside the template, where MiniJinja knows it.
    pub line: Option<usize>,
    pub reason: String,
}

impl From<minijinja::Error> for TemplateError {
    fn from(e: minijinja::Error) -> Self {
        let reason = match e.detail() {
            Some(detail) => format!("{}: {detail}", kind_in_words(&e)),
            None => kind_in_words(&e),
        };
        Self {
            line: e.line(),
            reason,
        }
    }
}

fn kind_in_words(e: &minijinja::Error) -> String {
    use minijinja::ErrorKind as K;
    match e.kind() {
        K::SyntaxError => "syntax error".into(),
        K::UndefinedError => "undefined value".into(),
        K::UnknownFilter => "unknown filter".into(),
        K::UnknownFunction => "unknown function".into(),
        K::UnknownTest => "unknown test".into(),
        K::InvalidOperation => "invalid operation".into(),
        K::OutOfFuel => "the template ran too long".into(),
        other => other.to_string(),
    }
}

/// The one MiniJinja environment of the engine.
pub struct Templates {
    env: Environment<'static>,
}

impl Default for Templates {
    fn default() -> Self {
        Self::new()
    }
}

impl Templates {
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_fuel(Some(FUEL));
        // The default delimiters with the trailing newline kept: a
        // builder that cannot fail for them.
        if let Ok(syntax) = SyntaxConfig::builder().keep_trailing_newline(true).build() {
            env.set_syntax(syntax);
        }
        Self { env }
    }

    /// Parses a template; the variable paths it reads (`inputs.folder`,
    /// `steps.list.output`), for the check that they exist.
    pub fn check_template(&self, source: &str) -> Result<BTreeSet<String>, TemplateError> {
        let t = self.env.template_from_str(source)?;
        Ok(t.undeclared_variables(true).into_iter().collect())
    }

    /// Parses an expression; the variable paths it reads.
    pub fn check_expression(&self, source: &str) -> Result<BTreeSet<String>, TemplateError> {
        let e = self.env.compile_expression(source)?;
        Ok(e.undeclared_variables(true).into_iter().collect())
    }

    /// Renders a template against `ctx`.
    pub fn render(&self, source: &str, ctx: &Value) -> Result<String, TemplateError> {
        Ok(self
            .env
            .template_from_str(source)?
            .render(minijinja::value::Serde(ctx))?)
    }

    /// Evaluates an expression against `ctx`.
    pub fn eval(&self, source: &str, ctx: &Value) -> Result<Value, TemplateError> {
        let v = self
            .env
            .compile_expression(source)?
            .eval(minijinja::value::Serde(ctx))?;
        serde_json::to_value(&v).map_err(|e| TemplateError {
            line: None,
            reason: format!("the value cannot be used as data: {e}"),
        })
    }

    /// Whether an expression is true (Jinja's truth: empty is false).
    pub fn is_true(&self, source: &str, ctx: &Value) -> Result<bool, TemplateError> {
        Ok(self
            .env
            .compile_expression(source)?
            .eval(minijinja::value::Serde(ctx))?
            .is_true())
    }

    /// Renders every string inside `value`; a string that is one
    /// `{{ expression }}` becomes the expression's value.
    pub fn render_value(&self, value: &Value, ctx: &Value) -> Result<Value, TemplateError> {
        Ok(match value {
            Value::String(s) => match sole_expression(s) {
                Some(expr) => self.eval(expr, ctx)?,
                None => Value::String(self.render(s, ctx)?),
            },
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|v| self.render_value(v, ctx))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.render_value(v, ctx)?)))
                    .collect::<Result<_, TemplateError>>()?,
            ),
            other => other.clone(),
        })
    }

    /// Every template inside `value` checked; the paths they read.
    pub fn check_value(&self, value: &Value) -> Result<BTreeSet<String>, TemplateError> {
        let mut out = BTreeSet::new();
        match value {
            Value::String(s) => out.extend(match sole_expression(s) {
                Some(expr) => self.check_expression(expr)?,
                None => self.check_template(s)?,
            }),
            Value::Array(items) => {
                for v in items {
                    out.extend(self.check_value(v)?);
                }
            }
            Value::Object(map) => {
                for v in map.values() {
                    out.extend(self.check_value(v)?);
                }
            }
            _ => {}
        }
        Ok(out)
    }
}

/// The expression of a string that is exactly `{{ expression }}`.
fn sole_expression(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%"))
        .then_some(inner.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_names_the_paths_it_reads() {
        let t = Templates::new();
        let paths = t
            .check_template("{{ inputs.folder }}: {{ steps.list.output | length }}")
            .unwrap();
        assert_eq!(
            paths.into_iter().collect::<Vec<_>>(),
            ["inputs.folder", "steps.list.output"]
        );
    }

    /// MiniJinja 2 panicked ("empty lexer stack") on a closing `}}` inside
    /// an expression, found by fuzzing; 3 refuses it.
    #[test]
    fn a_stray_closing_delimiter_in_an_expression_is_an_error() {
        let t = Templates::new();
        for source in ["x }} y", "steps.a }} {{ b"] {
            assert!(t.check_expression(source).is_err(), "{source}");
            assert!(t.eval(source, &json!({})).is_err(), "{source}");
        }
    }

    #[test]
    fn a_template_that_does_not_parse_says_where() {
        let e = Templates::new()
            .check_template("line one\n{{ inputs.folder ")
            .unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.reason.starts_with("syntax error"), "{}", e.reason);
    }

    #[test]
    fn an_undefined_value_is_an_error_not_empty_text() {
        let e = Templates::new()
            .render("{{ inputs.nope }}", &json!({"inputs": {}}))
            .unwrap_err();
        assert!(e.reason.starts_with("undefined value"), "{}", e.reason);
    }

    #[test]
    fn a_sole_expression_keeps_its_type() {
        let t = Templates::new();
        let ctx = json!({"steps": {"ls": {"output": ["a", "b"]}}, "inputs": {"n": 2}});
        let v = t
            .render_value(
                &json!({"files": "{{ steps.ls.output }}", "note": "n={{ inputs.n }}", "k": 1}),
                &ctx,
            )
            .unwrap();
        assert_eq!(v, json!({"files": ["a", "b"], "note": "n=2", "k": 1}));
    }

    #[test]
    fn expressions_decide() {
        let t = Templates::new();
        let ctx = json!({"steps": {"c": {"output": {"count": 4}}}});
        assert!(t.is_true("steps.c.output.count > 3", &ctx).unwrap());
        assert!(!t.is_true("steps.c.output.count > 4", &ctx).unwrap());
        assert_eq!(t.eval("[1, 2] + [3]", &ctx).unwrap(), json!([1, 2, 3]));
    }

    #[test]
    fn a_runaway_template_runs_out_of_fuel() {
        let e = Templates::new()
            .render(
                "{% for a in range(1000) %}{% for b in range(1000) %}x{% endfor %}{% endfor %}",
                &json!({}),
            )
            .unwrap_err();
        assert_eq!(e.reason, "the template ran too long");
    }
}
