//! The YAML tree of a policy file: every node with where it was written.
//!
//! serde-saphyr parses a file into [`SNode`]s (its own spanned nodes), which are turned
//! into [`YNode`]s here, so the rest of `config/` does not depend on the parser's types.
//! The tree can also be written to and read from a compact byte form ([`encode`],
//! [`decode`]): the build script parses the embedded packs once, at build time, and the
//! binary decodes them at start-up instead of parsing ~40 KiB of YAML on every run —
//! that parse was most of mcpwall's start-up time.
//!
//! This file is also compiled by `build.rs` (through `#[path]`), so it uses nothing from
//! the crate.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Where a node was written. Byte offset and length when the parser knows them, else the
/// 1-based line and character column and the length in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Loc {
    pub line: u32,
    pub column: u32,
    pub byte: Option<(u32, u32)>,
    pub chars: u32,
}

impl Loc {
    pub fn of(loc: &serde_saphyr::Location) -> Loc {
        let span = loc.span();
        let byte = match (span.byte_offset(), span.byte_len()) {
            (Some(o), Some(l)) => u32::try_from(o).ok().zip(u32::try_from(l).ok()),
            _ => None,
        };
        Loc {
            line: u32::try_from(loc.line()).unwrap_or(u32::MAX),
            column: u32::try_from(loc.column()).unwrap_or(u32::MAX),
            byte,
            chars: u32::try_from(span.len()).unwrap_or(u32::MAX),
        }
    }
}

/// One YAML node. For a node reached through an `*alias`, `referenced` is where the alias
/// is written and `defined` where its anchor's content is.
#[derive(Debug, Clone, PartialEq)]
pub struct YNode {
    pub value: Node,
    pub referenced: Loc,
    pub defined: Loc,
}

/// A YAML value. Scalars keep the type YAML 1.2 core schema gives them
/// (`strict_booleans`, so `n` and `yes` stay strings).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<YNode>),
    Map(Vec<(YNode, YNode)>),
}

impl Node {
    /// What this is called in "expected a string, found a list".
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Null => "nothing (null)",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    /// The text of a scalar used as a mapping key.
    pub fn key_text(&self) -> Option<String> {
        match self {
            Node::Str(s) => Some(s.clone()),
            Node::Int(i) => Some(i.to_string()),
            Node::Float(f) => Some(f.to_string()),
            Node::Bool(b) => Some(b.to_string()),
            Node::Null => Some("null".to_string()),
            Node::Seq(_) | Node::Map(_) => None,
        }
    }
}

/// Limits for one policy file. A policy is a few hundred rules at most; these stop alias bombs
/// ("billion laughs") and absurd nesting long before they cost noticeable time or memory.
pub fn parse_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_events: 400_000,
            max_aliases: 10_000,
            max_anchors: 10_000,
            max_nodes: 200_000,
            max_depth: 32,
            max_documents: 1,
            max_total_scalar_bytes: 16 * 1024 * 1024,
            max_merge_keys: 1_000,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 10_000,
            max_replay_stack_depth: 16,
        },
        strict_booleans: true,
    }
}

/// Parse `text` into a tree (call on a thread with a large stack: see `model::parse`).
pub fn parse(text: &str) -> Result<YNode, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options::<serde_saphyr::Spanned<SNode>>(text, parse_options())
        .map(convert)
}

/// A node as serde-saphyr hands it over.
pub enum SNode {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<serde_saphyr::Spanned<SNode>>),
    Map(Vec<(serde_saphyr::Spanned<SNode>, serde_saphyr::Spanned<SNode>)>),
}

fn convert(node: serde_saphyr::Spanned<SNode>) -> YNode {
    let value = match node.value {
        SNode::Null => Node::Null,
        SNode::Bool(b) => Node::Bool(b),
        SNode::Int(i) => Node::Int(i),
        SNode::Float(f) => Node::Float(f),
        SNode::Str(s) => Node::Str(s),
        SNode::Seq(items) => Node::Seq(items.into_iter().map(convert).collect()),
        SNode::Map(entries) => Node::Map(
            entries
                .into_iter()
                .map(|(k, v)| (convert(k), convert(v)))
                .collect(),
        ),
    };
    YNode {
        value,
        referenced: Loc::of(&node.referenced),
        defined: Loc::of(&node.defined),
    }
}

impl<'de> Deserialize<'de> for SNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = SNode;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E>(self) -> Result<SNode, E> {
                Ok(SNode::Null)
            }
            fn visit_none<E>(self) -> Result<SNode, E> {
                Ok(SNode::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<SNode, D::Error> {
                SNode::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<SNode, E> {
                Ok(SNode::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<SNode, E> {
                Ok(SNode::Int(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<SNode, E> {
                Ok(SNode::Int(v.into()))
            }
            fn visit_i128<E>(self, v: i128) -> Result<SNode, E> {
                Ok(SNode::Int(v))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<SNode, E> {
                i128::try_from(v)
                    .map(SNode::Int)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_f64<E>(self, v: f64) -> Result<SNode, E> {
                Ok(SNode::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<SNode, E> {
                Ok(SNode::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<SNode, E> {
                Ok(SNode::Str(v))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<SNode, E> {
                Ok(SNode::Str(String::from_utf8_lossy(v).into_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<SNode, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = a.next_element()? {
                    items.push(item);
                }
                Ok(SNode::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<SNode, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = a.next_entry()? {
                    entries.push(entry);
                }
                Ok(SNode::Map(entries))
            }
        }
        d.deserialize_any(NodeVisitor)
    }
}

/// Format version of [`encode`]; a blob of another version is not decoded.
const FORMAT: u8 = 1;

/// FNV-1a of the source text, stored with the tree so a tree is never used for a text
/// it was not parsed from.
pub fn text_digest(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The byte form of the tree of `text` (written by `build.rs`).
#[cfg_attr(not(test), allow(dead_code))]
pub fn encode(text: &str, root: &YNode) -> Vec<u8> {
    let mut out = vec![FORMAT];
    out.extend_from_slice(&text_digest(text).to_le_bytes());
    encode_node(root, &mut out);
    out
}

/// The tree in `blob`, if it was encoded from exactly `text` by this format.
pub fn decode(text: &str, blob: &[u8]) -> Option<YNode> {
    let (&format, rest) = blob.split_first()?;
    let (digest, body) = rest.split_at_checked(8)?;
    if format != FORMAT || u64::from_le_bytes(digest.try_into().ok()?) != text_digest(text) {
        return None;
    }
    let mut reader = Reader {
        bytes: body,
        depth: 0,
    };
    let root = reader.node()?;
    reader.bytes.is_empty().then_some(root)
}

#[cfg_attr(not(test), allow(dead_code))]
fn encode_node(node: &YNode, out: &mut Vec<u8>) {
    encode_loc(&node.defined, out);
    if node.referenced == node.defined {
        out.push(0);
    } else {
        out.push(1);
        encode_loc(&node.referenced, out);
    }
    match &node.value {
        Node::Null => out.push(0),
        Node::Bool(b) => out.push(if *b { 2 } else { 1 }),
        Node::Int(i) => {
            out.push(3);
            out.extend_from_slice(&i.to_le_bytes());
        }
        Node::Float(f) => {
            out.push(4);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Node::Str(s) => {
            out.push(5);
            varint(s.len() as u64, out);
            out.extend_from_slice(s.as_bytes());
        }
        Node::Seq(items) => {
            out.push(6);
            varint(items.len() as u64, out);
            for item in items {
                encode_node(item, out);
            }
        }
        Node::Map(entries) => {
            out.push(7);
            varint(entries.len() as u64, out);
            for (k, v) in entries {
                encode_node(k, out);
                encode_node(v, out);
            }
        }
    }
}

#[cfg_attr(not(test), allow(dead_code))]
fn encode_loc(loc: &Loc, out: &mut Vec<u8>) {
    varint(u64::from(loc.line), out);
    varint(u64::from(loc.column), out);
    varint(u64::from(loc.chars), out);
    match loc.byte {
        None => out.push(0),
        Some((offset, len)) => {
            out.push(1);
            varint(u64::from(offset), out);
            varint(u64::from(len), out);
        }
    }
}

#[cfg_attr(not(test), allow(dead_code))]
fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'b> {
    bytes: &'b [u8],
    depth: u32,
}

/// Deeper than any tree the parser accepts (its budget allows 32 levels).
const MAX_DECODE_DEPTH: u32 = 64;

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(head)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }

    fn loc(&mut self) -> Option<Loc> {
        let line = self.u32()?;
        let column = self.u32()?;
        let chars = self.u32()?;
        let byte = match self.byte()? {
            0 => None,
            1 => Some((self.u32()?, self.u32()?)),
            _ => return None,
        };
        Some(Loc {
            line,
            column,
            byte,
            chars,
        })
    }

    fn node(&mut self) -> Option<YNode> {
        self.depth += 1;
        if self.depth > MAX_DECODE_DEPTH {
            return None;
        }
        let defined = self.loc()?;
        let referenced = match self.byte()? {
            0 => defined,
            1 => self.loc()?,
            _ => return None,
        };
        let value = match self.byte()? {
            0 => Node::Null,
            1 => Node::Bool(false),
            2 => Node::Bool(true),
            3 => Node::Int(i128::from_le_bytes(self.take(16)?.try_into().ok()?)),
            4 => Node::Float(f64::from_bits(u64::from_le_bytes(
                self.take(8)?.try_into().ok()?,
            ))),
            5 => {
                let len = usize::try_from(self.varint()?).ok()?;
                Node::Str(String::from_utf8(self.take(len)?.to_vec()).ok()?)
            }
            6 => {
                let n = usize::try_from(self.varint()?).ok()?;
                let mut items = Vec::with_capacity(n.min(self.bytes.len()));
                for _ in 0..n {
                    items.push(self.node()?);
                }
                Node::Seq(items)
            }
            7 => {
                let n = usize::try_from(self.varint()?).ok()?;
                let mut entries = Vec::with_capacity(n.min(self.bytes.len()));
                for _ in 0..n {
                    let k = self.node()?;
                    let v = self.node()?;
                    entries.push((k, v));
                }
                Node::Map(entries)
            }
            _ => return None,
        };
        self.depth -= 1;
        Some(YNode {
            value,
            referenced,
            defined,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trees built into the binary are exactly what parsing the embedded text gives,
    /// spans included, for every embedded file.
    #[test]
    fn prebuilt_trees_equal_a_fresh_parse() {
        for (path, text) in crate::builtin::FILES {
            let blob = crate::builtin::tree(path).unwrap_or_else(|| panic!("no tree for {path}"));
            let prebuilt =
                decode(text, blob).unwrap_or_else(|| panic!("{path}: tree does not decode"));
            let fresh = parse(text).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert!(
                prebuilt == fresh,
                "{path}: prebuilt tree differs from a fresh parse"
            );
        }
    }

    #[test]
    fn a_tree_is_refused_for_another_text_or_when_damaged() {
        let text = "version: 1\nrules:\n  - &r {name: a, action: deny}\n  - *r\n";
        let root = parse(text).unwrap();
        let blob = encode(text, &root);
        assert_eq!(decode(text, &blob), Some(root));
        assert_eq!(decode("version: 1\n", &blob), None);
        for cut in 0..blob.len() {
            assert_eq!(decode(text, &blob[..cut]), None, "truncated at {cut}");
        }
        let mut extra = blob.clone();
        extra.push(0);
        assert_eq!(decode(text, &extra), None);
    }
}
