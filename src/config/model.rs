//! Stage one of three: the YAML as written, before any meaning is given to it.
//!
//! serde-saphyr parses a file into a tree of [`YNode`]s, each node spanned. The tree is then
//! decoded by hand (see `validate.rs`) instead of through `#[derive(Deserialize)]`: a derived
//! decoder stops at the first unknown key or wrong type, and house rule 6 wants every problem
//! of a file in one run, each with its own span and a "did you mean".
//!
//! Everything here is `pub(crate)`; nothing of it leaves `config/`.

use std::path::PathBuf;

use super::diag::{Code, PolicyDiagnostic};
use super::policy::{
    Action, BackupSettings, CircuitBreakerSettings, GatewaySettings, LogArgs, LogLevel,
    LogRetention, OutboundRule, PinningMode, PoisonScanMode, RateLimit, RedactMarker, Rule,
    SecretPattern, Source, SourceId, Span, Spanned,
};

pub(crate) use super::yaml_tree::{Loc, Node, YNode};

/// Parse one file into a spanned tree, or one diagnostic saying where the YAML is broken.
///
/// Deserialising nests several stack frames per YAML level, and their size depends on how
/// dependencies were optimised; parsing runs on its own thread with a generous stack so the
/// depth budget, not the caller's stack (2 MiB on test and tokio threads), is the limit.
pub(crate) fn parse(source: &Source, id: SourceId) -> Result<YNode, Box<PolicyDiagnostic>> {
    let text = source.text.clone();
    let parsed = std::thread::Builder::new()
        .name("mcpwall-yaml".into())
        .stack_size(PARSE_STACK)
        .spawn(move || super::yaml_tree::parse(&text))
        .map(|handle| handle.join());
    match parsed {
        Ok(Ok(result)) => result.map_err(|err| Box::new(yaml_error(source, id, &err))),
        // No thread (resource exhaustion) or a panic inside the parser: fail closed, loudly.
        Ok(Err(_)) | Err(_) => Err(Box::new(
            PolicyDiagnostic::at(
                Code::YamlTooComplex,
                "policy refused: the YAML parser could not process this file",
                source,
                Span {
                    source: id,
                    offset: 0,
                    len: 0,
                    line: 1,
                    column: 1,
                },
                "here",
            )
            .with_help("simplify the file (less nesting, no alias chains) and try again"),
        )),
    }
}

/// Stack for the parsing thread: far more than `max_depth` levels need.
pub(super) const PARSE_STACK: usize = 32 * 1024 * 1024;

fn yaml_error(source: &Source, id: SourceId, err: &serde_saphyr::Error) -> PolicyDiagnostic {
    use serde_saphyr::{Error, MessageFormatter};
    let mut inner = err;
    while let Error::AliasError { error, .. } | Error::WithSnippet { error, .. } = inner {
        inner = error;
    }
    let message = serde_saphyr::UserMessageFormatter
        .format_message(inner)
        .into_owned();
    let (code, help) = match inner {
        Error::Budget { .. }
        | Error::AliasReplayLimitExceeded { .. }
        | Error::AliasExpansionLimitExceeded { .. }
        | Error::AliasReplayStackDepthExceeded { .. }
        | Error::AliasReplayCounterOverflow { .. } => (
            Code::YamlTooComplex,
            "policy files are small: remove the deep nesting or the chains of `*alias` \
             references that multiply the document",
        ),
        Error::DuplicateMappingKey { .. } => (
            Code::DuplicateKey,
            "each key may appear once per mapping: remove or merge the second one",
        ),
        Error::MultipleDocuments { .. } => (
            Code::YamlSyntax,
            "a policy file holds one YAML document: remove the extra `---` section",
        ),
        // A regex in double quotes: YAML reads `\.` or `\w` there as an escape it does
        // not know. The parser names no variant for it, only the message.
        _ if message.contains("unknown escape") => (
            Code::YamlSyntax,
            "inside double quotes YAML reads `\\` as the start of an escape: write a regex in \
             single quotes ('\\.ssh/id_\\w+'), where a backslash stays a backslash",
        ),
        _ => (
            Code::YamlSyntax,
            "fix the YAML syntax at this place (indentation, quotes, brackets)",
        ),
    };
    let lines = Lines::new(&source.text);
    let span = match err.location() {
        Some(loc) if loc.line() > 0 => span_of_location(&source.text, &lines, id, &Loc::of(&loc)),
        _ => Span {
            source: id,
            offset: 0,
            len: 0,
            line: 1,
            column: 1,
        },
    };
    let message = match code {
        Code::YamlTooComplex => format!("policy refused: {message}"),
        _ => format!("invalid YAML: {message}"),
    };
    PolicyDiagnostic::at(code, message, source, span, "here").with_help(help)
}

/// Where each line starts, to turn byte offsets into line and column in O(log n).
///
/// Lines end at `\n` (so `\r\n` files count as editors count them); columns count
/// characters; a byte-order mark at the start of the file is not counted, as editors hide it.
#[derive(Debug)]
pub(crate) struct Lines {
    starts: Vec<usize>,
    bom: usize,
}

impl Lines {
    pub(crate) fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
        Lines { starts, bom }
    }

    /// 1-based line and column of a byte offset (clamped to the text and to a char start).
    pub(crate) fn locate(&self, text: &str, offset: usize) -> (u32, u32) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset);
        let mut start = self.starts[line - 1];
        if line == 1 {
            start = start.max(self.bom.min(offset));
        }
        let column = text[start..offset].chars().count() + 1;
        (
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(column).unwrap_or(u32::MAX),
        )
    }

    /// A [`Span`] of `len` bytes at `offset`.
    pub(crate) fn span(&self, text: &str, id: SourceId, offset: usize, len: usize) -> Span {
        let offset = offset.min(text.len());
        let (line, column) = self.locate(text, offset);
        Span {
            source: id,
            offset,
            len: len.min(text.len() - offset),
            line,
            column,
        }
    }
}

/// Convert a serde-saphyr location into a [`Span`]. serde-saphyr gives byte offsets when it
/// parsed a string, but not for every error; the offset is then recomputed from its line
/// and (character) column. Line and column are always derived from the offset, so they
/// agree with the label miette draws.
pub(crate) fn span_of_location(text: &str, lines: &Lines, id: SourceId, loc: &Loc) -> Span {
    let (offset, len) = match loc.byte {
        Some((o, l)) if (o as usize) <= text.len() => (o as usize, l as usize),
        _ => {
            let line = loc.line.max(1);
            let column = loc.column.max(1);
            let o = offset_of(text, line, column);
            let chars = loc.chars as usize;
            let l = text[o..]
                .char_indices()
                .nth(chars)
                .map(|(i, _)| i)
                .unwrap_or(text.len() - o);
            (o, l)
        }
    };
    lines.span(text, id, offset, len)
}

/// Byte offset of a 1-based line and character column, clamped to the text.
pub(crate) fn offset_of(text: &str, line: u32, column: u32) -> usize {
    let mut offset = 0;
    for _ in 1..line {
        match text[offset..].find('\n') {
            Some(i) => offset += i + 1,
            None => return text.len(),
        }
    }
    let line_text = &text[offset..];
    let line_end = line_text.find('\n').unwrap_or(line_text.len());
    let within = line_text[..line_end]
        .char_indices()
        .nth(column.saturating_sub(1) as usize)
        .map(|(i, _)| i)
        .unwrap_or(line_end);
    offset + within
}

/// Span of a node: where its content is written (an alias's anchor, not the `*alias`).
/// Collections extend to the end of their last child, so a label can cover a whole rule.
pub(crate) fn node_span(text: &str, lines: &Lines, id: SourceId, node: &YNode) -> Span {
    let mut span = span_of_location(text, lines, id, &node.defined);
    let end = node_end(text, node);
    if end > span.offset && matches!(node.value, Node::Seq(_) | Node::Map(_)) {
        span.len = end - span.offset;
    }
    span
}

fn node_end(text: &str, node: &YNode) -> usize {
    let own = match node.defined.byte {
        Some((o, l)) => (o + l) as usize,
        None => 0,
    };
    let children = match &node.value {
        Node::Seq(items) => items.iter().map(|n| node_end(text, n)).max().unwrap_or(0),
        Node::Map(entries) => entries
            .iter()
            .map(|(k, v)| node_end(text, k).max(node_end(text, v)))
            .max()
            .unwrap_or(0),
        _ => 0,
    };
    own.max(children).min(text.len())
}

/// One file, decoded and checked, before merging (`validate.rs` builds it from the tree).
#[derive(Debug, Default)]
pub(crate) struct RawPolicy {
    pub(crate) extends: Vec<Spanned<String>>,
    pub(crate) settings: RawSettings,
    pub(crate) rules: Vec<Rule>,
    pub(crate) outbound_rules: Vec<OutboundRule>,
    pub(crate) secret_patterns: Vec<SecretPattern>,
    pub(crate) disabled_secrets: Vec<Spanned<String>>,
    /// `disable: [rule-name]`: rules of the extended packs this file lifts.
    pub(crate) disable: Vec<Spanned<String>>,
    /// `exceptions: {rule-name: [{match: ..}]}`: narrow cases in which a rule of the
    /// extended packs does not apply.
    pub(crate) exceptions: Vec<super::policy::Exception>,
    /// `servers:`, in file order.
    pub(crate) servers: Vec<super::policy::ServerDef>,
    /// `sandbox:`.
    pub(crate) sandbox: RawSandbox,
}

/// One file's `sandbox:` section; `None` = not written.
#[derive(Debug, Default, Clone)]
pub(crate) struct RawSandbox {
    pub(crate) enabled: Option<Spanned<bool>>,
    pub(crate) required: Option<Spanned<bool>>,
    pub(crate) confine_writes: Option<Spanned<bool>>,
    pub(crate) network: Option<Spanned<super::policy::SandboxNetwork>>,
    pub(crate) deny_read: Vec<Spanned<String>>,
    pub(crate) deny_write: Vec<Spanned<String>>,
    pub(crate) allow_read: Vec<Spanned<String>>,
    pub(crate) allow_write: Vec<Spanned<String>>,
}

/// The settings one file sets; `None` = not written (another file or the default decides).
#[derive(Debug, Default, Clone)]
pub(crate) struct RawSettings {
    pub(crate) log_dir: Option<Spanned<PathBuf>>,
    pub(crate) log_level: Option<Spanned<LogLevel>>,
    pub(crate) log_args: Option<Spanned<LogArgs>>,
    pub(crate) default_action: Option<Spanned<Action>>,
    pub(crate) rate_limit: Option<Spanned<RateLimit>>,
    pub(crate) max_frame_bytes: Option<Spanned<usize>>,
    pub(crate) redact_marker: Option<Spanned<RedactMarker>>,
    pub(crate) hide_denied_tools: Option<Spanned<bool>>,
    pub(crate) pinning: Option<Spanned<PinningMode>>,
    pub(crate) poison_scan: Option<Spanned<PoisonScanMode>>,
    pub(crate) circuit_breaker: Option<Spanned<CircuitBreakerSettings>>,
    pub(crate) backups: Option<Spanned<BackupSettings>>,
    pub(crate) log_retention: Option<Spanned<LogRetention>>,
    pub(crate) ask_timeout_seconds: Option<Spanned<u64>>,
    pub(crate) gateway: Option<Spanned<GatewaySettings>>,
    pub(crate) oauth: Option<Spanned<super::policy::OAuthSettings>>,
    pub(crate) shared_state: Option<Spanned<crate::config::policy::SharedStateSettings>>,
    pub(crate) log_shipping: Option<Spanned<super::policy::LogShipping>>,
}
