//! Policy diagnostics: every problem, with file, line, column and a help line.
//!
//! Shaped like kdl-rs's `KdlError`: one [`PolicyError`] holds every problem found in one
//! run as `related` diagnostics, each carrying its own file as a miette `NamedSource`, a
//! labelled span, a `code(mcpwall::config::<kind>)` and a `help` saying what to do.
//! Codes are dynamic (one per [`Code`]), so [`miette::Diagnostic`] is implemented by hand.

use std::fmt;
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, Severity};

use super::policy::{Policy, Source, Span};

/// What kind of problem a diagnostic reports. The code is `mcpwall::config::<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// The file is not valid YAML.
    YamlSyntax,
    /// The YAML exceeds a complexity budget (alias bombs, huge nesting, too many nodes).
    YamlTooComplex,
    /// A mapping key appears twice.
    DuplicateKey,
    /// A key the configuration language does not know.
    UnknownKey,
    /// A value of the wrong YAML type (a list where a string was expected, ...).
    WrongType,
    /// A required key is missing.
    MissingKey,
    /// A value outside its set of allowed words (`action: block`).
    UnknownValue,
    /// `version` is missing or not `1`.
    BadVersion,
    /// A regex does not compile or is too large.
    BadRegex,
    /// A regex whose every-match search would re-read the text (see `regex_cost`).
    CostlyRegex,
    /// A glob does not compile.
    BadGlob,
    /// `${VAR}` names a variable other than `HOME` or `PROJECT_DIR`.
    UnknownVariable,
    /// Two rules share a name.
    DuplicateRule,
    /// A condition that matches everything or nothing.
    EmptyMatch,
    /// A number out of its range (entropy, sizes, rate limits).
    BadThreshold,
    /// `extends` names a pack that is not built in.
    UnknownExtends,
    /// Packs extend each other in a loop.
    ExtendsCycle,
    /// `secrets.disable` names a detector that does not exist, or a pattern reuses a name.
    UnknownDetector,
    /// `_any_value` combined with a matcher that makes no sense on every value.
    BadAnyValue,
    /// A policy file could not be read.
    ReadFailed,
    /// The compiler rejected part of the policy (raised by `compile`).
    Compile,
    /// A warning: part of a file was loaded but does not apply (untrusted project file).
    Ignored,
    /// `disable` names a rule that no extended pack has.
    UnknownDisable,
    /// `exceptions` names a rule that is not an inbound deny or ask rule of an extended pack.
    UnknownException,
    /// A `sandbox:` path that cannot be resolved to one place (relative, a glob, `..`).
    BadSandboxPath,
    /// A `sandbox:` entry that would give a server mcpwall's own state.
    ProtectedState,
    /// `shared_state` names a store that cannot be used (not a `redis://` URL, a name
    /// that is not plain).
    BadSharedState,
    /// A network address that is not `SCHEME://HOST:PORT` with a scheme mcpwall speaks.
    BadAddress,
}

impl Code {
    /// The last segment of the diagnostic code.
    pub fn name(self) -> &'static str {
        match self {
            Code::YamlSyntax => "yaml_syntax",
            Code::YamlTooComplex => "yaml_too_complex",
            Code::DuplicateKey => "duplicate_key",
            Code::UnknownKey => "unknown_key",
            Code::WrongType => "wrong_type",
            Code::MissingKey => "missing_key",
            Code::UnknownValue => "unknown_value",
            Code::BadVersion => "bad_version",
            Code::BadRegex => "bad_regex",
            Code::CostlyRegex => "costly_regex",
            Code::BadGlob => "bad_glob",
            Code::UnknownVariable => "unknown_variable",
            Code::DuplicateRule => "duplicate_rule",
            Code::EmptyMatch => "empty_match",
            Code::BadThreshold => "bad_threshold",
            Code::UnknownExtends => "unknown_extends",
            Code::ExtendsCycle => "extends_cycle",
            Code::UnknownDetector => "unknown_detector",
            Code::BadAnyValue => "bad_any_value",
            Code::ReadFailed => "read_failed",
            Code::Compile => "compile",
            Code::Ignored => "ignored",
            Code::UnknownDisable => "unknown_disable",
            Code::UnknownException => "unknown_exception",
            Code::BadSandboxPath => "bad_sandbox_path",
            Code::ProtectedState => "protected_state",
            Code::BadSharedState => "bad_shared_state",
            Code::BadAddress => "bad_address",
        }
    }

    /// The full code, e.g. `mcpwall::config::bad_regex`.
    pub fn full(self) -> String {
        format!("mcpwall::config::{}", self.name())
    }
}

/// All problems found while loading or compiling a policy.
#[derive(Debug)]
pub struct PolicyError {
    pub diagnostics: Vec<PolicyDiagnostic>,
}

impl PolicyError {
    pub fn new(diagnostics: Vec<PolicyDiagnostic>) -> PolicyError {
        PolicyError { diagnostics }
    }

    /// The codes of all diagnostics, in order (handy in tests).
    pub fn codes(&self) -> Vec<&str> {
        self.diagnostics.iter().map(|d| d.code.as_str()).collect()
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.diagnostics.len() {
            1 => write!(f, "the policy could not be loaded: 1 problem"),
            n => write!(f, "the policy could not be loaded: {n} problems"),
        }
    }
}

impl std::error::Error for PolicyError {}

impl Diagnostic for PolicyError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new("mcpwall::config"))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(
            "fix every problem listed below, then run the same command again",
        ))
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        Some(Box::new(
            self.diagnostics.iter().map(|d| d as &dyn Diagnostic),
        ))
    }
}

/// One problem, usually pointing into one file.
#[derive(Debug, Clone)]
pub struct PolicyDiagnostic {
    /// `mcpwall::config::<kind>`, see [`Code`].
    pub code: String,
    pub message: String,
    /// The file the labels point into; `None` for problems without a place (unreadable file).
    pub src: Option<NamedSource<Arc<str>>>,
    /// The primary label first.
    pub labels: Vec<LabeledSpan>,
    pub help: Option<String>,
    pub severity: Severity,
    /// The file name, 1-based line and column of the primary label (for tests and one-line output).
    pub location: Option<(String, u32, u32)>,
}

impl PolicyDiagnostic {
    /// A diagnostic with no place in any file.
    pub fn new(code: Code, message: impl Into<String>) -> PolicyDiagnostic {
        PolicyDiagnostic {
            code: code.full(),
            message: message.into(),
            src: None,
            labels: Vec::new(),
            help: None,
            severity: Severity::Error,
            location: None,
        }
    }

    /// A diagnostic pointing at `span` of `source` (the primary label).
    pub fn at(
        code: Code,
        message: impl Into<String>,
        source: &Source,
        span: Span,
        label: impl Into<String>,
    ) -> PolicyDiagnostic {
        let mut d = PolicyDiagnostic::new(code, message);
        d.src = Some(NamedSource::new(source.name.clone(), source.text.clone()));
        d.location = Some((source.name.clone(), span.line, span.column));
        d.labels.push(LabeledSpan::new_primary_with_span(
            Some(label.into()),
            clamp(span, &source.text),
        ));
        d
    }

    /// Add a secondary label in the same file (ignored when the diagnostic has no file).
    pub fn with_label(mut self, span: Span, label: impl Into<String>) -> PolicyDiagnostic {
        if let Some(src) = &self.src {
            let text = src.inner().clone();
            self.labels.push(LabeledSpan::new_with_span(
                Some(label.into()),
                clamp(span, &text),
            ));
        }
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> PolicyDiagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn warning(mut self) -> PolicyDiagnostic {
        self.severity = Severity::Warning;
        self
    }
}

/// Keep a label inside its source so miette never renders out of bounds.
fn clamp(span: Span, text: &str) -> miette::SourceSpan {
    let start = span.offset.min(text.len());
    let len = span.len.min(text.len() - start);
    (start, len).into()
}

impl fmt::Display for PolicyDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PolicyDiagnostic {}

impl Diagnostic for PolicyDiagnostic {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.code))
    }

    fn severity(&self) -> Option<Severity> {
        Some(self.severity)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display + 'a>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.src.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.src.is_none() || self.labels.is_empty() {
            return None;
        }
        Some(Box::new(self.labels.iter().cloned()))
    }
}

impl Policy {
    /// One warning per part of a file that was loaded but does not apply (an untrusted
    /// project file's allow rules, loosening settings, ...), for the CLI to print at start-up
    /// so the user learns why a rule they see in `.mcpwall.yml` has no effect.
    pub fn ignored_warnings(&self) -> Vec<PolicyDiagnostic> {
        self.ignored
            .iter()
            .map(|i| {
                let source = self.source(i.span.source);
                // A rule's span covers the whole rule; its first line is enough to point at.
                let mut span = i.span;
                let rest = source.text.get(span.offset..).unwrap_or("");
                span.len = span.len.min(rest.find('\n').unwrap_or(rest.len()));
                PolicyDiagnostic::at(
                    Code::Ignored,
                    format!("{} is ignored", i.what),
                    source,
                    span,
                    "not applied",
                )
                .with_help(i.why.clone())
                .warning()
            })
            .collect()
    }
}
