//! The hash chain that makes the audit log tamper-evident.
//!
//! Every line ends with `,"chain":"blake3","prev":"<64 hex>","hash":"<64 hex>"}`: `prev`
//! is the `hash` of the line before it (for a day file's first line: the last line of the
//! newest other day file when it was begun, whatever its date, or [`GENESIS`]), and
//! `hash` is `BLAKE3(prev || body)` in lowercase hex, where `body` is the line's text
//! before `,"prev":` (the JSON object without its closing brace, `"chain"` included).
//! Editing a line breaks its own `hash`; deleting, inserting or moving one breaks the
//! next line's `prev`.
//!
//! Lines written before BLAKE3 have no `"chain"` member and are `SHA-256(prev || body)`;
//! both verify, and a day file may hold both (a version change mid-day). The member says
//! which function a line was hashed with and is itself hashed, so flipping it breaks the
//! line.
//!
//! Removing lines at the end of a file leaves no broken link, so each day file has a
//! seal beside it, `YYYY-MM-DD.audit.seal`: the file's length and last hash after every
//! write. A file shorter than its seal, or whose line at the sealed length is not the
//! sealed one, was truncated.
//!
//! A cryptographic hash rather than a fast non-cryptographic one: a link must not be
//! forgeable by choosing a line's content. BLAKE3 rather than SHA-256 because the log
//! hashes every event: on a CPU without SHA extensions (and under valgrind, where the
//! project's instruction counts come from) software SHA-256 was 41% of the instructions
//! of a pipelined call; BLAKE3 is about as fast in software as SHA-256 with them. The
//! chain carries no secret key, so whoever can rewrite the files can also recompute every
//! hash and the seals: it shows careless or partial tampering, not a determined attacker
//! with write access (docs/proxy.md says so).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A link: a line's hash, lowercase hex.
pub type Link = [u8; 64];

/// The `prev` of the very first line of a log (and of a line after unchained ones).
pub const GENESIS: Link = [b'0'; 64];

const PREV_KEY: &str = ",\"prev\":\"";
const HASH_KEY: &str = "\",\"hash\":\"";
/// `,"prev":"` + 64 + `","hash":"` + 64 + `"}`
pub const SUFFIX_LEN: usize = PREV_KEY.len() + 64 + HASH_KEY.len() + 64 + 2;

/// The member that marks a line hashed with BLAKE3, at the end of its body.
const BLAKE3_MARK: &[u8] = b",\"chain\":\"blake3\"";

/// A line's hash as lowercase hex: `BLAKE3(prev || body)` for a body that ends with the
/// BLAKE3 mark, else `SHA-256(prev || body)` (a line written before BLAKE3).
pub fn link(prev: &Link, body: &[u8]) -> Link {
    if body.ends_with(BLAKE3_MARK) {
        let mut h = blake3::Hasher::new();
        h.update(prev);
        h.update(body);
        hex(h.finalize().as_bytes())
    } else {
        let mut h = Sha256::new();
        h.update(prev);
        h.update(body);
        hex(&h.finalize().into())
    }
}

/// `SHA-256(bytes)` as lowercase hex (what a cut-line record holds of the cut bytes; off
/// the hot path, so the hash its key names).
pub fn digest(bytes: &[u8]) -> Link {
    hex(&Sha256::digest(bytes).into())
}

/// [`digest`] of `len` bytes of `file` from `from`, read a block at a time: a cut region
/// can be as long as the file, and is never held whole.
pub fn digest_of(file: &mut File, from: u64, len: u64) -> io::Result<Link> {
    file.seek(SeekFrom::Start(from))?;
    let mut h = Sha256::new();
    let mut block = vec![0; 64 * 1024];
    let mut left = len;
    while left > 0 {
        let n = block.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        file.read_exact(&mut block[..n])?;
        h.update(&block[..n]);
        left -= n as u64;
    }
    Ok(hex(&h.finalize().into()))
}

fn hex(digest: &[u8; 32]) -> Link {
    let mut out = [0u8; 64];
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 15)];
    }
    out
}

/// Append `event` (a JSON object without its closing brace) chained to `prev`, with the
/// BLAKE3 mark and its newline. Returns the line's hash.
pub fn push_chained(out: &mut Vec<u8>, event: &[u8], prev: &Link) -> Link {
    let start = out.len();
    out.extend_from_slice(event);
    out.extend_from_slice(BLAKE3_MARK);
    let hash = link(prev, &out[start..]);
    out.extend_from_slice(PREV_KEY.as_bytes());
    out.extend_from_slice(prev);
    out.extend_from_slice(HASH_KEY.as_bytes());
    out.extend_from_slice(&hash);
    out.extend_from_slice(b"\"}\n");
    hash
}

/// A chained line's parts: `(body, prev, hash)`, or `None` for a line without the chain
/// suffix (written before tamper evidence, by another program, or mangled).
pub fn split(line: &[u8]) -> Option<(&[u8], Link, Link)> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let start = line.len().checked_sub(SUFFIX_LEN)?;
    let (body, suffix) = line.split_at(start);
    let rest = suffix.strip_prefix(PREV_KEY.as_bytes())?;
    let (prev, rest) = rest.split_at(64);
    let rest = rest.strip_prefix(HASH_KEY.as_bytes())?;
    let (hash, end) = rest.split_at(64);
    if end != b"\"}" || !is_hex(prev) || !is_hex(hash) {
        return None;
    }
    Some((body, prev.try_into().ok()?, hash.try_into().ok()?))
}

fn is_hex(b: &[u8]) -> bool {
    b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// The seal of a day file: `YYYY-MM-DD.audit.seal` beside `YYYY-MM-DD.audit.jsonl`.
pub fn seal_path(log: &Path) -> PathBuf {
    let name = log.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let date = name.strip_suffix(super::LOG_SUFFIX).unwrap_or(name);
    log.with_file_name(format!("{date}{SEAL_SUFFIX}"))
}

pub const SEAL_SUFFIX: &str = ".audit.seal";
const SEAL_TAG: &[u8] = b"mcpwall-seal-1 ";
/// Tag, 20-digit length, space, hash, newline: fixed, so a rewrite in place never leaves
/// a longer old seal's tail behind.
const SEAL_LEN: usize = SEAL_TAG.len() + 20 + 1 + 64 + 1;

/// What a seal says: the file's length and the hash of its line ending there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seal {
    pub len: u64,
    pub hash: Link,
}

impl Seal {
    pub fn to_bytes(self) -> [u8; SEAL_LEN] {
        let mut out = [b' '; SEAL_LEN];
        out[..SEAL_TAG.len()].copy_from_slice(SEAL_TAG);
        let len = format!("{:020}", self.len);
        let at = SEAL_TAG.len();
        out[at..at + 20].copy_from_slice(len.as_bytes());
        out[at + 21..at + 85].copy_from_slice(&self.hash);
        out[SEAL_LEN - 1] = b'\n';
        out
    }

    pub fn parse(bytes: &[u8]) -> Option<Seal> {
        let rest = bytes.strip_prefix(SEAL_TAG)?;
        if rest.len() != SEAL_LEN - SEAL_TAG.len() || rest[20] != b' ' || rest[85] != b'\n' {
            return None;
        }
        let len = std::str::from_utf8(&rest[..20]).ok()?.parse().ok()?;
        let hash: Link = rest[21..85].try_into().ok()?;
        is_hex(&hash).then_some(Seal { len, hash })
    }

    pub fn read(path: &Path) -> Option<Seal> {
        let mut buf = Vec::with_capacity(SEAL_LEN);
        File::open(path)
            .ok()?
            .take(SEAL_LEN as u64 + 1)
            .read_to_end(&mut buf)
            .ok()?;
        Seal::parse(&buf)
    }

    pub fn read_file(file: &File) -> Option<Seal> {
        let mut buf = [0u8; SEAL_LEN];
        let n = crate::platform::read_at(file, &mut buf, 0).ok()?;
        Seal::parse(&buf[..n])
    }

    /// Rewrite the seal in place (one `pwrite`: the length never changes).
    pub fn write(self, file: &File) -> io::Result<()> {
        crate::platform::write_all_at(file, &self.to_bytes(), 0)
    }
}

/// Where a file's chain ends, as a writer about to continue it needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tip {
    /// Where the last complete chained line ends, and its hash; `None` when the file has
    /// none.
    pub chained: Option<(u64, Link)>,
    /// Where the last line starts when it is cut off (no newline: its writer stopped
    /// mid-line, a crash or a full disk).
    pub cut_from: Option<u64>,
}

/// The [`Tip`] of `file` (of `size` bytes), read backwards from the end. Complete lines
/// without chain fields after the last chained one are passed over: the next line chains
/// to the last line that can be verified, so `log verify` reports them and goes on.
pub fn find_tip(file: &mut File, size: u64) -> io::Result<Tip> {
    let mut chunk = 4096u64;
    loop {
        let start = size.saturating_sub(chunk);
        let mut buf = vec![0; (size - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf)?;
        let Some(last_newline) = buf.iter().rposition(|&b| b == b'\n') else {
            if start == 0 {
                let cut_from = (size > 0).then_some(0);
                return Ok(Tip {
                    chained: None,
                    cut_from,
                });
            }
            chunk *= 4;
            continue;
        };
        let complete = last_newline + 1;
        let cut_from = (start + (complete as u64) < size).then_some(start + complete as u64);
        // Complete lines, last first, until a chained one.
        let mut end = complete;
        loop {
            let line_start = buf[..end - 1]
                .iter()
                .rposition(|&b| b == b'\n')
                .map(|i| i + 1);
            let from = match line_start {
                Some(s) => s,
                None if start == 0 => 0,
                None => break,
            };
            if let Some((_, _, hash)) = split(&buf[from..end]) {
                return Ok(Tip {
                    chained: Some((start + end as u64, hash)),
                    cut_from,
                });
            }
            if from == 0 {
                return Ok(Tip {
                    chained: None,
                    cut_from,
                });
            }
            end = from;
        }
        chunk *= 4;
    }
}

/// The hash of the last complete chained line of `file` (of `size` bytes), [`GENESIS`]
/// when it has none.
pub fn last_link(file: &mut File, size: u64) -> io::Result<Link> {
    Ok(find_tip(file, size)?
        .chained
        .map_or(GENESIS, |(_, hash)| hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chained_line_splits_back_into_its_parts() {
        let mut out = Vec::new();
        let h1 = push_chained(&mut out, br#"{"a":1"#, &GENESIS);
        let h2 = push_chained(&mut out, br#"{"a":2"#, &h1);
        let lines: Vec<&[u8]> = out.split_inclusive(|&b| b == b'\n').collect();
        let (body, prev, hash) = split(lines[1]).unwrap();
        assert_eq!(
            (body, prev, hash),
            (&br#"{"a":2,"chain":"blake3""#[..], h1, h2)
        );
        assert_eq!(link(&prev, body), hash);
        // Each line is still one JSON object.
        let v: serde_json::Value = serde_json::from_slice(lines[0]).unwrap();
        assert_eq!(v["prev"].as_str().unwrap().as_bytes(), GENESIS);
        assert!(split(br#"{"a":1}"#).is_none());
    }

    #[test]
    fn lines_hashed_before_blake3_still_link() {
        // A line as versions before BLAKE3 wrote it: no mark, SHA-256.
        let body = br#"{"a":1"#;
        let mut h = Sha256::new();
        h.update(GENESIS);
        h.update(body);
        let sha = hex(&h.finalize().into());
        assert_eq!(link(&GENESIS, body), sha);
        // The mark is hashed: removing it from a BLAKE3 line, or adding it to a SHA-256
        // one, breaks the line.
        let mut out = Vec::new();
        let b3 = push_chained(&mut out, body, &GENESIS);
        let (marked, _, hash) = split(&out).unwrap();
        assert_eq!((link(&GENESIS, marked), hash), (b3, b3));
        assert_ne!(link(&GENESIS, body), b3);
        assert_ne!(b3, sha);
    }

    #[test]
    fn seals_round_trip_at_a_fixed_length() {
        let s = Seal {
            len: 12345,
            hash: link(&GENESIS, b"x"),
        };
        assert_eq!(Seal::parse(&s.to_bytes()), Some(s));
        assert!(Seal::parse(b"mcpwall-seal-1 12").is_none());
    }

    #[test]
    fn last_link_skips_a_torn_line_and_reads_long_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        let mut out = Vec::new();
        let h1 = push_chained(&mut out, br#"{"a":1"#, &GENESIS);
        let long = format!("{{\"a\":\"{}\"", "x".repeat(20_000));
        let h2 = push_chained(&mut out, long.as_bytes(), &h1);
        std::fs::write(&path, &out).unwrap();
        let mut f = File::open(&path).unwrap();
        assert_eq!(last_link(&mut f, out.len() as u64).unwrap(), h2);
        out.extend_from_slice(b"{\"torn");
        std::fs::write(&path, &out).unwrap();
        let mut f = File::open(&path).unwrap();
        assert_eq!(last_link(&mut f, out.len() as u64).unwrap(), h2);
        assert_eq!(last_link(&mut f, 0).unwrap(), GENESIS);
    }

    #[test]
    fn the_tip_passes_over_unchained_lines_and_finds_a_cut_one() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        let tip = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            find_tip(&mut File::open(&path).unwrap(), bytes.len() as u64).unwrap()
        };
        let mut out = Vec::new();
        let h1 = push_chained(&mut out, br#"{"a":1"#, &GENESIS);
        let whole = out.len() as u64;
        assert_eq!(
            tip(&out),
            Tip {
                chained: Some((whole, h1)),
                cut_from: None
            }
        );
        out.extend_from_slice(b"inserted\n\n");
        let after_inserted = out.len() as u64;
        assert_eq!(
            tip(&out),
            Tip {
                chained: Some((whole, h1)),
                cut_from: None
            }
        );
        out.extend_from_slice(b"{\"ts\":\"cut");
        assert_eq!(
            tip(&out),
            Tip {
                chained: Some((whole, h1)),
                cut_from: Some(after_inserted)
            }
        );
        assert_eq!(
            tip(b"{\"cut"),
            Tip {
                chained: None,
                cut_from: Some(0)
            }
        );
        assert_eq!(
            tip(b"x\ny\n"),
            Tip {
                chained: None,
                cut_from: None
            }
        );
        assert_eq!(
            tip(b""),
            Tip {
                chained: None,
                cut_from: None
            }
        );
        // A chained line far back, past the first chunk read.
        let mut long = out[..whole as usize].to_vec();
        long.extend(std::iter::repeat_n(b"junk line\n".as_slice(), 2000).flatten());
        long.extend_from_slice(b"tail");
        let n = long.len() as u64;
        assert_eq!(
            tip(&long),
            Tip {
                chained: Some((whole, h1)),
                cut_from: Some(n - 4)
            }
        );
    }
}
