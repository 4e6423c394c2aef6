//! Policy diagnostics: every problem, with file, line, column and a help line.

use miette::Diagnostic;

/// All problems found while loading or compiling a policy.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("the policy could not be loaded: {} problem(s)", diagnostics.len())]
pub struct PolicyError {
    #[related]
    pub diagnostics: Vec<PolicyDiagnostic>,
}

/// One problem in one file.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
pub struct PolicyDiagnostic {
    pub message: String,
    #[source_code]
    pub src: miette::NamedSource<String>,
    #[label("{label}")]
    pub span: miette::SourceSpan,
    pub label: String,
    #[help]
    pub help: Option<String>,
    #[diagnostic(code)]
    pub code: String,
}
