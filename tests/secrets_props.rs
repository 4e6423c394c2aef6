//! Property tests: a fake credential planted anywhere in a random JSON response — in a
//! string value, as an object key, alone or inside a sentence — never survives
//! redaction of the decoded strings, and every byte outside the redacted spans is
//! unchanged. Splitting a text into pieces does not change what is found.

#[path = "support/secrets_corpus.rs"]
mod corpus;

use std::sync::OnceLock;

use corpus::{FORMATS, Rng, fake};
use mcpwall::secrets::{Detector, Finding, builtin_specs};
use proptest::prelude::*;
use serde_json::{Map, Value};

const MARKER: &str = "[REDACTED]";

fn detector() -> &'static Detector {
    static DETECTOR: OnceLock<Detector> = OnceLock::new();
    DETECTOR.get_or_init(|| Detector::new(builtin_specs()).expect("built-ins compile"))
}

const WORDS: &[&str] = &[
    "héllo",
    "wörld",
    "✓",
    "日本語",
    "tab\there",
    "quote\"d",
    "back\\slash",
    "line\nbreak",
    "data",
    "42",
    "-",
    ":",
    "{",
    "}",
    "emoji 🎉",
    "null",
    "https://example.com/x?y=1",
];

fn sentence(r: &mut Rng) -> String {
    let n = r.range(0, 6);
    (0..n)
        .map(|_| WORDS[r.below(WORDS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

fn random_value(r: &mut Rng, depth: usize) -> Value {
    match if depth > 3 { r.below(4) } else { r.below(7) } {
        0 => Value::Null,
        1 => Value::Bool(r.below(2) == 0),
        2 => Value::from(r.range(0, 100_000) as u64),
        3 => Value::String(sentence(r)),
        4 | 5 => {
            let mut map = Map::new();
            for _ in 0..r.range(0, 5) {
                map.insert(sentence(r), random_value(r, depth + 1));
            }
            Value::Object(map)
        }
        _ => Value::Array(
            (0..r.range(0, 5))
                .map(|_| random_value(r, depth + 1))
                .collect(),
        ),
    }
}

/// Plants `text` in a random string position of `value` (a value or a key), keeping
/// whitespace around it so it stays a separate token.
fn plant(value: &mut Value, text: &str, r: &mut Rng) {
    let planted = match r.below(3) {
        0 => text.to_string(),
        1 => format!("{} {text}", sentence(r)),
        _ => format!("{} {text} {}", sentence(r), sentence(r)),
    };
    let mut slots: Vec<*mut Value> = Vec::new();
    collect_slots(value, &mut slots);
    let as_key = r.below(4) == 0;
    let slot = slots[r.below(slots.len())];
    // SAFETY: the pointers come from `value`, which is not otherwise touched until
    // they are dropped at the end of this function.
    let slot = unsafe { &mut *slot };
    if as_key {
        let mut map = Map::new();
        map.insert(planted, std::mem::take(slot));
        *slot = Value::Object(map);
    } else {
        *slot = Value::String(planted);
    }
}

fn collect_slots(value: &mut Value, out: &mut Vec<*mut Value>) {
    out.push(value as *mut Value);
    match value {
        Value::Object(map) => map.values_mut().for_each(|v| collect_slots(v, out)),
        Value::Array(items) => items.iter_mut().for_each(|v| collect_slots(v, out)),
        _ => {}
    }
}

/// Every decoded string of a JSON document: keys and values.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Replaces each finding with the marker; panics with a diagnosis if the findings are
/// not sorted, disjoint and on character boundaries.
fn redact(text: &str, findings: &[Finding]) -> String {
    let mut out = String::new();
    let mut at = 0;
    for f in findings {
        assert!(
            at <= f.range.start && f.range.start < f.range.end && f.range.end <= text.len(),
            "bad finding {f:?} after {at} in {text:?}"
        );
        assert!(text.is_char_boundary(f.range.start) && text.is_char_boundary(f.range.end));
        out.push_str(&text[at..f.range.start]);
        out.push_str(MARKER);
        at = f.range.end;
    }
    out.push_str(&text[at..]);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn planted_secret_never_survives_and_other_bytes_are_unchanged(
        format in 0..FORMATS.len(),
        seed in any::<u64>(),
    ) {
        let detector = detector();
        let mut cache = detector.cache();
        let r = &mut Rng::new(seed);
        let credential = fake(FORMATS[format], r);
        let mut doc = random_value(r, 0);
        plant(&mut doc, &credential.text, r);
        let response = serde_json::to_string(&doc).unwrap();
        let decoded: Value = serde_json::from_str(&response).unwrap();

        let mut all = Vec::new();
        strings(&decoded, &mut all);
        let mut found = Vec::new();
        let mut secret_seen = false;
        for s in &all {
            found.clear();
            detector.find(s, &mut cache, &mut found);
            let redacted = redact(s, &found);
            secret_seen |= s.contains(&credential.secret);
            prop_assert!(
                !redacted.contains(&credential.secret),
                "{} survived in {redacted:?} (from {s:?}, findings {found:?})",
                FORMATS[format]
            );
            // Outside the spans nothing changed: the gaps, in order, are the output
            // with the markers taken out.
            let mut gaps = String::new();
            let mut at = 0;
            for f in &found {
                gaps.push_str(&s[at..f.range.start]);
                at = f.range.end;
            }
            gaps.push_str(&s[at..]);
            let mut rest = redacted.as_str();
            let mut unmarked = String::new();
            for _ in 0..found.len() {
                let i = rest.find(MARKER).expect("one marker per finding");
                unmarked.push_str(&rest[..i]);
                rest = &rest[i + MARKER.len()..];
            }
            unmarked.push_str(rest);
            prop_assert_eq!(gaps, unmarked);
        }
        prop_assert!(secret_seen, "the secret was planted");
    }

    #[test]
    fn splitting_a_text_into_pieces_finds_the_same_secrets(
        format in 0..FORMATS.len(),
        seed in any::<u64>(),
        cuts in proptest::collection::vec(any::<u16>(), 0..4),
    ) {
        let detector = detector();
        let mut cache = detector.cache();
        let r = &mut Rng::new(seed);
        let credential = fake(FORMATS[format], r);
        let text = format!("{} {} {}", sentence(r), credential.text, sentence(r));

        let mut whole = Vec::new();
        detector.find(&text, &mut cache, &mut whole);

        let mut bounds: Vec<usize> = cuts
            .iter()
            .map(|&c| usize::from(c) % (text.len() + 1))
            .filter(|&c| text.is_char_boundary(c))
            .collect();
        bounds.push(0);
        bounds.push(text.len());
        bounds.sort_unstable();
        let pieces: Vec<&str> = bounds.windows(2).map(|w| &text[w[0]..w[1]]).collect();
        let starts: Vec<usize> = bounds[..bounds.len() - 1].to_vec();

        let mut joined = Vec::new();
        detector.find_joined(&pieces, &mut cache, &mut joined);
        let mapped: Vec<Finding> = joined
            .iter()
            .map(|j| Finding {
                detector: j.detector,
                range: starts[j.first] + j.start..starts[j.last] + j.end,
            })
            .collect();
        prop_assert_eq!(&mapped, &whole);
        // And the segments cover exactly the finding's bytes.
        for (j, f) in joined.iter().zip(&whole) {
            let covered: String = j
                .segments(&pieces)
                .map(|(i, range)| &pieces[i][range])
                .collect();
            prop_assert_eq!(covered.as_str(), &text[f.range.clone()]);
        }
    }
}

/// A detector with one extra short format (`tok` and four digits) beside the built-ins,
/// so short texts both hold and miss secrets.
fn with_short_format() -> Detector {
    let mut specs = builtin_specs();
    specs.push(mcpwall::secrets::DetectorSpec {
        name: "short-test-token".into(),
        regex: "tok[0-9]{4}".into(),
        origin: "test".into(),
        ..Default::default()
    });
    Detector::new(specs).expect("the extra format compiles")
}

fn found(
    detector: &Detector,
    cache: &mut mcpwall::secrets::DetectorCache,
    text: &str,
) -> Vec<Finding> {
    let mut out = Vec::new();
    detector.find(text, cache, &mut out);
    out
}

/// Short texts a reused cache has seen hold no secret are answered from memory; that
/// never changes what is found, for texts that repeat, differ in one byte or in length.
#[test]
fn a_reused_cache_finds_what_a_fresh_one_finds_in_short_texts() {
    let detector = with_short_format();
    let pieces = ["tok", "12", "34", "5", "9", "x", " ", "AKIA", "tok12"];
    let mut rng = Rng::new(11);
    let mut shared = detector.cache();
    let (mut with, mut without) = (0, 0);
    for _ in 0..20_000 {
        let mut text = String::new();
        for _ in 0..rng.below(7) {
            text.push_str(pieces[rng.below(pieces.len())]);
        }
        let want = found(&detector, &mut detector.cache(), &text);
        if want.is_empty() {
            without += 1
        } else {
            with += 1
        }
        assert_eq!(found(&detector, &mut shared, &text), want, "{text:?}");
    }
    assert!(
        with > 1000 && without > 1000,
        "{with} with secrets, {without} without"
    );
}

/// A cache made by one detector and handed to another never lends it the first one's
/// misses: the second finds its own formats in a text the first found clean.
#[test]
fn a_cache_from_another_detector_does_not_hide_its_secrets() {
    let plain = Detector::new(builtin_specs()).expect("built-ins compile");
    let extended = with_short_format();
    let mut cache = plain.cache();
    assert!(found(&plain, &mut cache, "tok1234").is_empty());
    assert_eq!(found(&extended, &mut cache, "tok1234").len(), 1);
    assert!(found(&plain, &mut cache, "tok1234").is_empty());
}

/// Every built-in keyword once, sorted: what [`keyword_soup`] draws from.
/// The built-in detectors, built with `machinery` (a mechanism left out, to compare).
fn built_ins_with(machinery: mcpwall::secrets::Machinery) -> Detector {
    Detector::with_machinery(builtin_specs(), machinery).expect("built-ins compile")
}

/// `b` finds what `a` finds on every adversarial text (and the texts of findings on
/// every line).
fn assert_same_on_adversarial_texts(
    (a, a_cache): (&Detector, &mut mcpwall::secrets::DetectorCache),
    (b, b_cache): (&Detector, &mut mcpwall::secrets::DetectorCache),
) {
    for kind in corpus::ADVERSARIAL
        .iter()
        .chain(corpus::FINDINGS_ON_EVERY_LINE)
    {
        let text = corpus::adversarial_text(kind, 3, 64 << 10);
        let want = found(a, a_cache, &text);
        assert_eq!(found(b, b_cache, &text), want, "{kind}");
    }
}

fn builtin_keywords() -> Vec<String> {
    let mut keywords: Vec<String> = builtin_specs()
        .iter()
        .flat_map(|s| s.keywords.clone())
        .collect();
    keywords.sort();
    keywords.dedup();
    keywords
}

/// Texts made of keywords and the pieces of values packed together (labels, separators,
/// near-miss prefixes, value characters, fake credentials), repeated in runs so that the
/// same bytes come back at many hits: what the hit memos answer from memory.
fn keyword_soup(r: &mut Rng, keywords: &[String]) -> String {
    const PIECES: &[&str] = &[
        "=",
        ":",
        ": ",
        " = ",
        "\"",
        "'",
        "_",
        "-",
        ".",
        "/",
        "+",
        " ",
        "\n",
        "KEY",
        "key",
        "token",
        "secret",
        "password",
        "api_key",
        "SECRETKEY",
        "ghp_",
        "AKIA",
        "sk-",
        "eyJhbGci",
        "postgres://user:",
        "://",
        "@",
        "Q~",
        "0",
        "7",
        "abc",
        "XYZ",
        "é",
    ];
    let len = r.below(600);
    let mut text = String::new();
    while text.len() < len {
        let piece = match r.below(10) {
            0 => keywords[r.below(keywords.len())].clone(),
            1 => fake(FORMATS[r.below(FORMATS.len())], r).text,
            2 => (0..r.below(40))
                .map(|_| char::from(b"aZ09+/=_-.~"[r.below(11)]))
                .collect(),
            _ => PIECES[r.below(PIECES.len())].to_string(),
        };
        let times = if r.below(3) == 0 { 1 + r.below(12) } else { 1 };
        for _ in 0..times {
            text.push_str(&piece);
        }
    }
    text
}

/// The hit memos (skipping a hit whose bytes refuted the last search, shifted and
/// same-start walks, the remembered keyword run) never change what is found: the
/// detector finds exactly what it finds with every hit searched, on keyword soups and
/// on the adversarial texts.
#[test]
fn hit_memos_find_what_searching_every_hit_finds() {
    let memos = detector();
    let plain = built_ins_with(mcpwall::secrets::Machinery {
        no_hit_memos: true,
        ..Default::default()
    });
    let keywords = builtin_keywords();
    let (mut memo_cache, mut plain_cache) = (memos.cache(), plain.cache());
    let mut r = Rng::new(22);
    let mut with_findings = 0;
    for _ in 0..3000 {
        let text = keyword_soup(&mut r, &keywords);
        let want = found(&plain, &mut plain_cache, &text);
        with_findings += usize::from(!want.is_empty());
        assert_eq!(found(memos, &mut memo_cache, &text), want, "{text:?}");
    }
    assert!(with_findings > 300, "{with_findings} texts with findings");
    assert_same_on_adversarial_texts((&plain, &mut plain_cache), (memos, &mut memo_cache));
}

/// The portable run finder (a probe every 17 bytes) and the one this CPU runs (AVX2 masks
/// on x86-64) give the same findings: on keyword soups with line breaks, tokens cut
/// inside their keyword and the adversarial texts.
#[test]
fn the_portable_run_finder_finds_what_the_vector_one_finds() {
    let vector = detector();
    let portable = built_ins_with(mcpwall::secrets::Machinery {
        portable_run_finder: true,
        ..Default::default()
    });
    let keywords = builtin_keywords();
    let (mut vector_cache, mut portable_cache) = (vector.cache(), portable.cache());
    let mut r = Rng::new(17);
    let mut with_findings = 0;
    for i in 0..3000 {
        let mut text = keyword_soup(&mut r, &keywords);
        if i % 3 == 0 {
            // A token cut inside its keyword, somewhere in the soup.
            let token = fake(FORMATS[r.below(FORMATS.len())], &mut r).secret;
            let cut = 1 + r.below(4.min(token.len() - 1));
            if token.is_char_boundary(cut) {
                let at = (0..=text.len().min(200))
                    .rev()
                    .find(|&at| text.is_char_boundary(at))
                    .unwrap_or(0);
                let (head, tail) = token.split_at(cut);
                text.insert_str(at, &format!(" {head}\n  {tail}\n"));
            }
        }
        let want = found(&portable, &mut portable_cache, &text);
        with_findings += usize::from(!want.is_empty());
        assert_eq!(found(vector, &mut vector_cache, &text), want, "{text:?}");
    }
    assert!(with_findings > 300, "{with_findings} texts with findings");
    assert_same_on_adversarial_texts(
        (&portable, &mut portable_cache),
        (vector, &mut vector_cache),
    );
}

/// A detector's search that read the rest of the text for nothing is followed by one
/// unanchored pass that refutes every later hit at once (`Engine::none_from`). It never
/// changes what is found: a label repeated with no separator (where the pass refutes
/// every hit), then a tail that does or does not complete a secret after the run (where
/// the pass finds that match and refutes nothing), against every hit searched.
#[test]
fn one_pass_over_a_run_finds_what_searching_every_hit_finds() {
    let memos = detector();
    let plain = built_ins_with(mcpwall::secrets::Machinery {
        no_hit_memos: true,
        ..Default::default()
    });
    let (mut memo_cache, mut plain_cache) = (memos.cache(), plain.cache());
    let mut r = Rng::new(2222);
    let units = [
        "SECRETKEY",
        "secret_key",
        "client_secret",
        "ApiKey",
        "password",
        "token",
        "postgres://user:",
        "://u:",
        "-----BEGIN RSA PRIVATE KEY-----",
        "ghp_",
    ];
    let mut with_findings = 0;
    for round in 0..200 {
        let unit = units[round % units.len()];
        let mut text = String::new();
        if r.below(2) == 0 {
            text.push_str(&fake(FORMATS[r.below(FORMATS.len())], &mut r).text);
            text.push(' ');
        }
        text.push_str(&unit.repeat(1 + r.below(300)));
        match r.below(4) {
            0 => {}
            1 => text.push_str(&format!(
                "={}",
                fake(FORMATS[r.below(FORMATS.len())], &mut r).text
            )),
            2 => text.push_str("=Zx8Qp2Lm7Rt4Vw9Ks3Hd6Jf1@host/db -----END RSA PRIVATE KEY-----"),
            _ => {
                text.push(' ');
                text.push_str(&fake(FORMATS[r.below(FORMATS.len())], &mut r).text);
            }
        }
        let want = found(&plain, &mut plain_cache, &text);
        with_findings += usize::from(!want.is_empty());
        assert_eq!(found(memos, &mut memo_cache, &text), want, "{text:?}");
    }
    assert!(with_findings > 100, "{with_findings} texts with findings");
}

/// A wrapped line's scan answers for the cut token at its end (`- ghp_…` then the next
/// line holds `ghp_…` then the next line) without changing what is found: tokens cut
/// by a break, inside their keyword and on narrow lines, each after a lead that may
/// be a label, a list's dash, another token or a word character, and the adversarial
/// texts, against a detector that scans every cut token's text.
#[test]
fn a_wrapped_lines_scan_answers_for_the_cut_token_it_ends_with() {
    let answering = detector();
    let scanning = built_ins_with(mcpwall::secrets::Machinery {
        scan_every_rejoin: true,
        ..Default::default()
    });
    let (mut answering_cache, mut scanning_cache) = (answering.cache(), scanning.cache());
    let whole = |token: &str| {
        found(answering, &mut answering.cache(), token)
            .iter()
            .any(|f| f.range == (0..token.len()))
    };
    let leads = [
        "",
        "- ",
        "  - ",
        "token: ",
        "password: ",
        "api_key=",
        "x\\t",
        "xoxb-",
        "n",
        "\"",
        "AKIAQ7ZK2M4XW3HN5JPR ",
        "| ",
    ];
    let mut r = Rng::new(4040);
    let (mut texts, mut with_findings) = (0, 0);
    for round in 0..4 {
        for &format in FORMATS {
            let token = fake(format, &mut r);
            let keyword = &token.secret[..4.min(token.secret.len())];
            let mut cuts = Vec::new();
            if token.secret.is_char_boundary(keyword.len()) {
                cuts.extend(corpus::written_apart(&token.secret, keyword, &mut r, whole));
                cuts.extend(corpus::cut_in_keyword(&token.secret, keyword, &mut r));
            }
            cuts.extend(corpus::cut_on_a_narrow_line(&token, &mut r, whole));
            for (cut, _) in cuts {
                let lead = leads[r.below(leads.len())];
                let text = match round % 2 {
                    0 => format!("{lead}{cut}\n"),
                    _ => format!("line before\n{lead}{cut}\nline after {}", r.alnum(12)),
                };
                let want = found(&scanning, &mut scanning_cache, &text);
                with_findings += usize::from(!want.is_empty());
                texts += 1;
                assert_eq!(
                    found(answering, &mut answering_cache, &text),
                    want,
                    "{text:?}"
                );
            }
        }
    }
    assert!(
        texts > 1000 && with_findings > 800,
        "{with_findings} of {texts} with findings"
    );
    assert_same_on_adversarial_texts(
        (&scanning, &mut scanning_cache),
        (answering, &mut answering_cache),
    );
}
