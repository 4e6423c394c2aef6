//! The regex dialect of policy files: Rust `regex` syntax, except that the Perl classes
//! `\w`, `\d`, `\s` (and their negations) and the word boundaries `\b`, `\B`, `\<`, `\>`
//! are ASCII.
//!
//! Policies match paths, shell commands and URLs, whose separators and tokens are ASCII.
//! Unicode Perl classes buy nothing there and cost a great deal: `\w` compiles to
//! hundreds of UTF-8 ranges, and a Unicode word boundary makes the lazy DFA give up on
//! any non-ASCII byte, so a short argument such as `ça` fell back to the PikeVM (about
//! 500× slower per value with the default pack). Literals, `.`, `(?i)` case folding and
//! `\p{…}` classes stay Unicode, so a look-alike letter still folds the way Unicode
//! says.
//!
//! The rewrite works on the parsed syntax tree (never on the text), and every node it
//! makes carries the span of the node it replaces, so errors still point at the
//! pattern as written.

use regex_syntax::ast::{self, Ast};
use regex_syntax::hir::Hir;

/// Why a policy regex is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialectError {
    /// What is wrong, e.g. "unclosed group".
    pub message: String,
    /// Byte range of the offending part of the pattern, when the parser names one.
    pub span: Option<std::ops::Range<usize>>,
}

/// Parses `pattern` in the policy dialect.
///
/// # Example
///
/// ```
/// use mcpwall::regex_dialect::parse;
///
/// // `\w` is ASCII: the accented letter is not a word character.
/// let hir = parse(r"^\w+$").unwrap();
/// let re = regex_automata::meta::Regex::builder().build_from_hir(&hir).unwrap();
/// assert!(re.is_match("abc_1"));
/// assert!(!re.is_match("ça"));
/// // Case folding stays Unicode.
/// let hir = parse(r"(?i)straße").unwrap();
/// let re = regex_automata::meta::Regex::builder().build_from_hir(&hir).unwrap();
/// assert!(re.is_match("STRAßE"));
/// ```
pub fn parse(pattern: &str) -> Result<Hir, DialectError> {
    let mut tree = ast::parse::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(pattern)
        .map_err(|e| DialectError {
            message: e.kind().to_string(),
            span: Some(e.span().start.offset..e.span().end.offset),
        })?;
    asciify(&mut tree);
    regex_syntax::hir::translate::Translator::new()
        .translate(pattern, &tree)
        .map_err(|e| DialectError {
            message: e.kind().to_string(),
            span: Some(e.span().start.offset..e.span().end.offset),
        })
}

/// Nesting bound of the parser (the `regex` crate's default): a hostile pattern cannot
/// exhaust the stack.
const NEST_LIMIT: u32 = 250;

fn asciify(node: &mut Ast) {
    match node {
        Ast::ClassPerl(perl) => {
            let span = perl.span;
            // `\S` and `\D` become `[^[:space:]]` and `[^[:digit:]]` rather than
            // `[[:^space:]]`: the same set, since no character folds into ASCII white space
            // or digits, but under `(?i)` the translator then case-folds the small class
            // before negating it instead of folding nearly all of Unicode (a tenth of a
            // millisecond per `\S` at start-up). `\W` keeps its inner negation: ASCII
            // letters do have folds (`k` and the Kelvin sign), which would move.
            let outer = perl.negated && perl.kind != ast::ClassPerlKind::Word;
            let class = ast::ClassAscii {
                span,
                kind: ascii_kind(&perl.kind),
                negated: perl.negated && !outer,
            };
            *node = Ast::class_bracketed(ast::ClassBracketed {
                span,
                negated: outer,
                kind: ast::ClassSet::Item(ast::ClassSetItem::Ascii(class)),
            });
        }
        Ast::ClassBracketed(class) => asciify_set(&mut class.kind),
        Ast::Assertion(assertion) if is_word_boundary(&assertion.kind) => {
            let span = assertion.span;
            let inner = std::mem::replace(node, Ast::empty(span));
            *node = Ast::group(ast::Group {
                span,
                kind: ast::GroupKind::NonCapturing(ast::Flags {
                    span,
                    items: vec![
                        ast::FlagsItem {
                            span,
                            kind: ast::FlagsItemKind::Negation,
                        },
                        ast::FlagsItem {
                            span,
                            kind: ast::FlagsItemKind::Flag(ast::Flag::Unicode),
                        },
                    ],
                }),
                ast: Box::new(inner),
            });
        }
        Ast::Repetition(rep) => asciify(&mut rep.ast),
        Ast::Group(group) => asciify(&mut group.ast),
        Ast::Alternation(alt) => alt.asts.iter_mut().for_each(asciify),
        Ast::Concat(concat) => concat.asts.iter_mut().for_each(asciify),
        Ast::Empty(_)
        | Ast::Flags(_)
        | Ast::Literal(_)
        | Ast::Dot(_)
        | Ast::Assertion(_)
        | Ast::ClassUnicode(_) => {}
    }
}

fn asciify_set(set: &mut ast::ClassSet) {
    match set {
        ast::ClassSet::Item(item) => asciify_item(item),
        ast::ClassSet::BinaryOp(op) => {
            asciify_set(&mut op.lhs);
            asciify_set(&mut op.rhs);
        }
    }
}

fn asciify_item(item: &mut ast::ClassSetItem) {
    match item {
        ast::ClassSetItem::Perl(perl) => {
            *item = ast::ClassSetItem::Ascii(ast::ClassAscii {
                span: perl.span,
                kind: ascii_kind(&perl.kind),
                negated: perl.negated,
            });
        }
        ast::ClassSetItem::Bracketed(class) => asciify_set(&mut class.kind),
        ast::ClassSetItem::Union(union) => union.items.iter_mut().for_each(asciify_item),
        ast::ClassSetItem::Empty(_)
        | ast::ClassSetItem::Literal(_)
        | ast::ClassSetItem::Range(_)
        | ast::ClassSetItem::Ascii(_)
        | ast::ClassSetItem::Unicode(_) => {}
    }
}

fn ascii_kind(kind: &ast::ClassPerlKind) -> ast::ClassAsciiKind {
    match kind {
        ast::ClassPerlKind::Digit => ast::ClassAsciiKind::Digit,
        ast::ClassPerlKind::Space => ast::ClassAsciiKind::Space,
        ast::ClassPerlKind::Word => ast::ClassAsciiKind::Word,
    }
}

fn is_word_boundary(kind: &ast::AssertionKind) -> bool {
    use ast::AssertionKind as K;
    matches!(
        kind,
        K::WordBoundary
            | K::NotWordBoundary
            | K::WordBoundaryStart
            | K::WordBoundaryEnd
            | K::WordBoundaryStartAngle
            | K::WordBoundaryEndAngle
            | K::WordBoundaryStartHalf
            | K::WordBoundaryEndHalf
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::meta::Regex;

    fn re(pattern: &str) -> Regex {
        Regex::builder()
            .build_from_hir(&parse(pattern).unwrap())
            .unwrap()
    }

    #[test]
    fn perl_classes_are_ascii_in_and_out_of_brackets() {
        assert!(!re(r"^\w$").is_match("é"));
        assert!(re(r"^\W$").is_match("é"));
        assert!(re(r"^[^\w.-]$").is_match("é"));
        assert!(!re(r"^[\w.-]$").is_match("é"));
        assert!(!re(r"^\d$").is_match("٣"));
        assert!(!re(r"^\s$").is_match("\u{a0}"));
        assert!(re(r"^\s$").is_match("\t"));
        assert!(re(r"^[[\w]&&[a-c]]$").is_match("b"));
    }

    #[test]
    fn word_boundaries_are_ascii_and_captures_keep_their_numbers() {
        assert!(re(r"\bcurl\b").is_match("écurl"));
        assert!(!re(r"\Bcurl").is_match("écurl"));
        let r = re(r"(a)\b(?P<tail>b)?");
        assert_eq!(r.captures_len(), 3);
        assert_eq!(
            r.group_info()
                .to_index(regex_automata::PatternID::ZERO, "tail"),
            Some(2)
        );
    }

    /// The negations are moved out of the class only where that leaves the set as it was:
    /// every negated Perl class means exactly its ASCII POSIX negation, with and without
    /// case folding.
    #[test]
    fn negated_classes_keep_their_sets() {
        for (perl, posix) in [(r"\S", "space"), (r"\D", "digit"), (r"\W", "word")] {
            for flags in ["", "(?i)"] {
                let ours = parse(&format!("{flags}{perl}")).unwrap();
                let posix = regex_syntax::parse(&format!("{flags}[[:^{posix}:]]")).unwrap();
                assert_eq!(ours, posix, "{flags}{perl}");
            }
        }
    }

    #[test]
    fn unicode_case_folding_and_literals_stay() {
        // KELVIN SIGN folds to k: a look-alike path must still match a (?i) rule.
        assert!(re(r"(?i)\.kube\b").is_match("/home/u/.\u{212a}ube/config"));
        assert!(re(r"\p{Greek}").is_match("λ"));
        assert!(re(r"^.$").is_match("é"));
    }

    #[test]
    fn errors_point_into_the_pattern_as_written() {
        let e = parse(r"\w(ab").unwrap_err();
        assert_eq!(e.message, "unclosed group");
        assert_eq!(e.span, Some(2..3));
        let e = parse(r"\w\p{NoSuchClass}").unwrap_err();
        assert_eq!(e.span, Some(2..17));
    }

    #[test]
    fn a_deeply_nested_pattern_is_refused() {
        let deep = format!("{}a{}", "(".repeat(1000), ")".repeat(1000));
        assert!(parse(&deep).is_err());
    }
}
