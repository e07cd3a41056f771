//! What templating can get wrong: the error every render and check returns.

use std::fmt;

/// What went wrong while templating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateErrorKind {
    /// The template does not parse.
    Syntax,
    /// A variable or attribute it uses does not exist.
    Undefined,
    /// A conditional did not give a boolean.
    BrokenConditional,
    /// A filter, test, lookup or operation failed.
    Other,
}

/// A templating failure; `message` says what, in Ansible's words where it has them. `line` is the line within a
/// multi-line template, when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub kind: TemplateErrorKind,
    pub message: String,
    pub line: Option<usize>,
}

impl TemplateError {
    pub(super) fn new(kind: TemplateErrorKind, message: impl Into<String>) -> Self {
        TemplateError { kind, message: message.into(), line: None }
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(line) = self.line.filter(|l| *l > 1) {
            write!(f, " (line {line} of the template)")?;
        }
        Ok(())
    }
}

impl std::error::Error for TemplateError {}

impl From<TemplateError> for crate::error::Error {
    fn from(e: TemplateError) -> Self {
        crate::error::Error::input(e.to_string())
    }
}
