//! One exact text per JSON value, for the approval digest and the approver's preview.
//!
//! An approval must cover exactly the call the human saw, so nothing here goes through
//! floating point: a number keeps its exact decimal value (`1e20` and
//! `100000000000000000000` are one number, `100000000000000000001` another, and
//! `-0` stays apart from `0`, as a float-parsing server keeps them), a string its exact
//! code points, and an object every member it was given (a duplicate key is kept, in
//! order, so `{"a":1,"a":2}` is neither `{"a":1}` nor `{"a":2}`). The parser reads the
//! raw text of the call; serde_json's `Value` would round large numbers and fold
//! duplicate keys before the digest could see them.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Deepest nesting read; deeper arguments are digested as their raw text.
const MAX_DEPTH: usize = 256;

/// Integers up to this many digits are written out in full (`1e20` as the integer a
/// server reads); longer or fractional extremes use the `d.ddde±n` form.
const MAX_PLAIN_DIGITS: usize = 40;

/// An exponent literal longer than this is kept as written: no exact arithmetic on it is
/// needed to keep two values apart, only to make two spellings of one value meet.
const MAX_EXPONENT_DIGITS: usize = 15;

/// A JSON value as read, numbers as their canonical decimal text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Canon {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// The canonical text of a number (see [`canonical_number`]).
    Number(String),
    /// The decoded string.
    String(String),
    /// An array, in order.
    Array(Vec<Canon>),
    /// An object's members in the order given, duplicates kept.
    Object(Vec<(String, Canon)>),
}

/// Why a text was not read as one JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonError {
    /// Byte offset of the problem.
    pub at: usize,
    /// What was wrong there.
    pub reason: &'static str,
}

impl Canon {
    /// Read one JSON value (surrounding whitespace allowed, nothing else).
    pub fn parse(text: &[u8]) -> Result<Canon, CanonError> {
        let mut p = Parser { s: text, i: 0 };
        p.ws();
        let v = p.value(0)?;
        p.ws();
        if p.i != text.len() {
            return Err(p.err("text after the value"));
        }
        Ok(v)
    }

    /// The member `key` of an object (the last one given, as most servers read it).
    pub fn get(&self, key: &str) -> Option<&Canon> {
        match self {
            Canon::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|m| &m.1),
            _ => None,
        }
    }

    /// The canonical text: object members sorted by key bytes (stable, so duplicates
    /// keep their order), strings as serde_json escapes them, no whitespace.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, &mut |s| Cow::Borrowed(s));
        out
    }

    /// [`Canon::to_text`] with every string (keys too) passed through `map` first, for
    /// a preview with secrets masked. Members are ordered by their unmapped keys.
    pub fn to_text_mapped<'a>(&'a self, map: &mut dyn FnMut(&'a str) -> Cow<'a, str>) -> String {
        let mut out = String::new();
        self.write(&mut out, map);
        out
    }

    fn write<'a>(&'a self, out: &mut String, map: &mut dyn FnMut(&'a str) -> Cow<'a, str>) {
        match self {
            Canon::Null => out.push_str("null"),
            Canon::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Canon::Number(n) => out.push_str(n),
            Canon::String(s) => write_string(&map(s), out),
            Canon::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out, map);
                }
                out.push(']');
            }
            Canon::Object(members) => {
                let mut order: Vec<&(String, Canon)> = members.iter().collect();
                order.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                out.push('{');
                for (i, (k, v)) in order.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(&map(k), out);
                    out.push(':');
                    v.write(out, map);
                }
                out.push('}');
            }
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// The canonical text of a JSON number literal: the exact value as `[-]digits` when it
/// is an integer of at most [`MAX_PLAIN_DIGITS`] digits, `[-]int.frac` when it is a
/// short fraction, else `[-]d[.ddd]e±n`; trailing zeros never written. `literal` must
/// be a valid JSON number.
pub fn canonical_number(literal: &str) -> String {
    let (negative, rest) = match literal.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, literal),
    };
    let (mantissa, exp_text) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let sign = if negative { "-" } else { "" };
    let mut exponent: i64 = 0;
    if let Some(e) = exp_text {
        let (e_neg, e_digits) = match e.as_bytes().first() {
            Some(b'-') => (true, &e[1..]),
            Some(b'+') => (false, &e[1..]),
            _ => (false, e),
        };
        let e_digits = e_digits.trim_start_matches('0');
        if e_digits.len() > MAX_EXPONENT_DIGITS {
            let mut verbatim = literal.to_ascii_lowercase();
            verbatim = verbatim.replace("e+", "e");
            return verbatim;
        }
        exponent = e_digits.parse::<i64>().unwrap_or(0);
        if e_neg {
            exponent = -exponent;
        }
    }
    // value = digits × 10^exponent, digits without leading or trailing zeros.
    let all: String = [int, frac].concat();
    exponent -= frac.len() as i64;
    let digits = all.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    exponent += (digits.len() - trimmed.len()) as i64;
    let digits = trimmed;
    if digits.is_empty() {
        return format!("{sign}0");
    }
    let len = digits.len() as i64;
    let mut out = String::from(sign);
    if exponent >= 0 && len + exponent <= MAX_PLAIN_DIGITS as i64 {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', exponent as usize));
    } else if exponent < 0 && -exponent < len {
        let point = (len + exponent) as usize;
        let _ = write!(out, "{}.{}", &digits[..point], &digits[point..]);
    } else if exponent < 0 && -exponent - len <= 6 {
        let zeros = (-exponent - len) as usize;
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', zeros));
        out.push_str(digits);
    } else {
        out.push_str(&digits[..1]);
        if len > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}", exponent + len - 1);
    }
    out
}

struct Parser<'s> {
    s: &'s [u8],
    i: usize,
}

impl Parser<'_> {
    fn err(&self, reason: &'static str) -> CanonError {
        CanonError { at: self.i, reason }
    }

    fn ws(&mut self) {
        while matches!(self.s.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, word: &[u8]) -> bool {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Canon, CanonError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.eat(b"}") {
                    return Ok(Canon::Object(members));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return Err(self.err("expected a key"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(b":") {
                        return Err(self.err("expected ':'"));
                    }
                    self.ws();
                    let v = self.value(depth + 1)?;
                    members.push((k, v));
                    self.ws();
                    if self.eat(b"}") {
                        return Ok(Canon::Object(members));
                    }
                    if !self.eat(b",") {
                        return Err(self.err("expected ',' or '}'"));
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat(b"]") {
                    return Ok(Canon::Array(items));
                }
                loop {
                    self.ws();
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(b"]") {
                        return Ok(Canon::Array(items));
                    }
                    if !self.eat(b",") {
                        return Err(self.err("expected ',' or ']'"));
                    }
                }
            }
            Some(b'"') => Ok(Canon::String(self.string()?)),
            Some(b't') if self.eat(b"true") => Ok(Canon::Bool(true)),
            Some(b'f') if self.eat(b"false") => Ok(Canon::Bool(false)),
            Some(b'n') if self.eat(b"null") => Ok(Canon::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.err("expected a value")),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.s.get(self.i), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Canon, CanonError> {
        let start = self.i;
        self.eat(b"-");
        let int_start = self.i;
        let n = self.digits();
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return Err(self.err("malformed number"));
        }
        if self.eat(b".") && self.digits() == 0 {
            return Err(self.err("malformed number"));
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("malformed number"));
            }
        }
        // ASCII by construction.
        let literal = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("0");
        Ok(Canon::Number(canonical_number(literal)))
    }

    fn hex4(&mut self) -> Result<u32, CanonError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.err("bad unicode escape"))?;
        self.i += 4;
        Ok(h)
    }

    fn string(&mut self) -> Result<String, CanonError> {
        self.i += 1; // the opening quote
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.i) else {
                return Err(self.err("unterminated string"));
            };
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.err("unterminated string"));
                    };
                    self.i += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = match hi {
                                0xD800..=0xDBFF => {
                                    if !self.eat(b"\\u") {
                                        return Err(self.err("lone surrogate"));
                                    }
                                    let lo = self.hex4()?;
                                    if !(0xDC00..=0xDFFF).contains(&lo) {
                                        return Err(self.err("lone surrogate"));
                                    }
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                }
                                0xDC00..=0xDFFF => return Err(self.err("lone surrogate")),
                                _ => hi,
                            };
                            char::from_u32(cp).ok_or_else(|| self.err("bad unicode escape"))?
                        }
                        _ => return Err(self.err("bad escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                0x00..=0x1F => return Err(self.err("control character in a string")),
                _ => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| self.err("invalid UTF-8 in a string"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        Canon::parse(text.as_bytes()).expect("parses").to_text()
    }

    #[test]
    fn numbers_keep_their_exact_decimal_value() {
        assert_eq!(canon("1e20"), "100000000000000000000");
        assert_eq!(canon("1E+20"), canon("100000000000000000000"));
        assert_eq!(canon("100000000000000000001"), "100000000000000000001");
        assert_ne!(canon("100000000000000000001"), canon("1e20"));
        // Beyond u64 and beyond f64's 53 bits: neighbours stay apart.
        assert_ne!(canon("18446744073709551616"), canon("18446744073709551617"));
        assert_ne!(canon("9007199254740993"), canon("9007199254740992"));
        assert_eq!(canon("1"), canon("1.0"));
        assert_eq!(canon("1"), canon("10e-1"));
        assert_eq!(canon("0.1"), "0.1");
        assert_eq!(canon("1.50"), "1.5");
        assert_eq!(canon("0.000001"), "0.000001");
        assert_eq!(canon("1e-7"), "0.0000001");
        assert_eq!(canon("1.5e-30"), "1.5e-30");
        assert_eq!(canon("2e300"), "2e300");
        assert_ne!(canon("0.1"), canon("0.10000000000000001"));
    }

    #[test]
    fn negative_zero_stays_apart_and_zeros_meet() {
        assert_eq!(canon("-0"), "-0");
        assert_eq!(canon("-0.0e5"), "-0");
        assert_eq!(canon("0.000"), "0");
        assert_eq!(canon("0e-9"), "0");
        assert_ne!(canon("-0"), canon("0"));
    }

    #[test]
    fn huge_exponents_are_kept_not_computed() {
        let a = canon("1e9999999999999999999999");
        let b = canon("1e9999999999999999999998");
        assert_ne!(a, b);
        assert_eq!(a, "1e9999999999999999999999");
    }

    #[test]
    fn strings_keep_their_code_points() {
        assert_eq!(canon(r#""a\u00e9\ud83d\ude00/""#), canon("\"aé😀\\/\""));
        // Composed and decomposed forms are different strings.
        assert_ne!(canon(r#""\u00e9""#), canon(r#""e\u0301""#));
        assert!(Canon::parse(br#""\ud800""#).is_err());
        assert!(Canon::parse(br#""\udc00x""#).is_err());
    }

    #[test]
    fn duplicate_keys_are_kept_in_order() {
        let both = canon(r#"{"a":1,"a":2}"#);
        assert_eq!(both, r#"{"a":1,"a":2}"#);
        assert_ne!(both, canon(r#"{"a":2}"#));
        assert_ne!(both, canon(r#"{"a":1}"#));
        assert_ne!(both, canon(r#"{"a":2,"a":1}"#));
        let v = Canon::parse(br#"{"a":1,"a":2}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Canon::Number("2".into())));
    }

    #[test]
    fn keys_sort_by_bytes_nested() {
        assert_eq!(
            canon(r#"{"b":[{"z":1,"a":"\/"}],"a":null, "é":true,"Z":false}"#),
            r#"{"Z":false,"a":null,"b":[{"a":"/","z":1}],"é":true}"#
        );
    }

    #[test]
    fn malformed_text_is_refused() {
        for bad in [
            "01",
            "1.",
            "-",
            "1e",
            "[1,]",
            "{\"a\" 1}",
            "\"a",
            "nul",
            "1 2",
        ] {
            assert!(Canon::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(Canon::parse(deep.as_bytes()).is_err());
    }
}
