//! Recall over generated fake credentials in every built-in format, false-positive rate
//! over ordinary text, and the detector's structural guarantees.

#[path = "support/secrets_corpus.rs"]
mod corpus;

use std::collections::BTreeMap;
use std::ops::Range;

use corpus::{
    B32, FORMATS, Rng, cut_in_keyword, cut_on_a_narrow_line, embed, encoded, encoded_negatives,
    fake, headless_key, narrow_line_negatives, negatives, percent_encoded,
    split_and_percent_negatives, written_apart,
};
use mcpwall::secrets::{Detector, DetectorSpec, Finding, builtin_specs};

const SAMPLES_PER_FORMAT: usize = 24;
/// Samples of each format inside a base64 blob.
const ENCODED_PER_FORMAT: usize = 4;
/// Samples of each format written apart (cut by a break, in groups), and percent-encoded.
const SPLIT_PER_FORMAT: usize = 4;
/// Samples of each format cut on a narrow line.
const NARROW_PER_FORMAT: usize = 8;

fn detector() -> Detector {
    Detector::new(builtin_specs()).expect("built-ins compile")
}

fn find(detector: &Detector, text: &str) -> Vec<Finding> {
    let mut cache = detector.cache();
    let mut out = Vec::new();
    detector.find(text, &mut cache, &mut out);
    out
}

fn covers(findings: &[Finding], secret: &Range<usize>) -> bool {
    findings
        .iter()
        .any(|f| f.range.start <= secret.start && secret.end <= f.range.end)
}

/// `written` (a token written apart, its `pieces` as ranges in it) in one of the usual
/// surroundings: the text, where `written` sits in it, and the pieces moved there.
fn embed_pieces(
    written: String,
    pieces: &[Range<usize>],
    rng: &mut Rng,
) -> (String, Range<usize>, Vec<Range<usize>>) {
    let (text, at) = embed(
        &corpus::Fake {
            text: written.clone(),
            secret: written,
        },
        rng,
    );
    let pieces = pieces
        .iter()
        .map(|p| at.start + p.start..at.start + p.end)
        .collect();
    (text, at, pieces)
}

/// Every piece of a token written apart is found, and nothing around the token (`at`)
/// as written is.
fn found_exactly(found: &[Finding], pieces: &[Range<usize>], at: &Range<usize>) -> bool {
    pieces.iter().all(|p| covers(found, p))
        && found.iter().all(|f| {
            f.range.end <= at.start
                || f.range.start >= at.end
                || (at.start <= f.range.start && f.range.end <= at.end)
        })
}

/// The keyword `secret` starts with, when `format` is a whole token from its keyword on
/// (no `secret` group, keyword at the start): the shape a cut token is rejoined for.
fn whole_token_keyword(detector: &Detector, format: &str, secret: &str) -> Option<String> {
    let index = detector.specs().iter().position(|s| s.name == format)?;
    let spec = &detector.specs()[index];
    if spec.regex.contains("<secret>") || *spec.keyword_offset.end() != 0 {
        return None;
    }
    let keyword = spec
        .keywords
        .iter()
        .filter(|k| secret.starts_with(k.as_str()))
        .max_by_key(|k| k.len())?;
    Some(keyword.clone())
}

#[test]
fn recall_and_false_positive_rate() {
    let detector = detector();
    let mut cache = detector.cache();
    let mut found = Vec::new();

    // Positive corpus: every format, in six kinds of surroundings.
    let mut rng = Rng::new(0x5EC2E75);
    let mut total = 0usize;
    let mut detected = 0usize;
    let mut named: BTreeMap<&str, usize> = BTreeMap::new();
    let mut misses: Vec<String> = Vec::new();
    for &format in FORMATS {
        for _ in 0..SAMPLES_PER_FORMAT {
            let (text, secret) = embed(&fake(format, &mut rng), &mut rng);
            found.clear();
            detector.find(&text, &mut cache, &mut found);
            total += 1;
            if covers(&found, &secret) {
                detected += 1;
                let by_own_name = found.iter().any(|f| {
                    detector.name(f.detector) == format
                        && f.range.start <= secret.start
                        && secret.end <= f.range.end
                });
                if by_own_name {
                    *named.entry(format).or_default() += 1;
                }
            } else if misses.len() < 20 {
                let names: Vec<_> = found
                    .iter()
                    .map(|f| (detector.name(f.detector), &text[f.range.clone()]))
                    .collect();
                misses.push(format!(
                    "{format}: secret {:?} in {text:?}, found {names:?}",
                    &text[secret.clone()]
                ));
            }
        }
    }

    // Encoded: every format inside a base64 blob (issue 22); the whole run is found.
    for &format in FORMATS {
        for _ in 0..ENCODED_PER_FORMAT {
            let (text, run) = encoded(&fake(format, &mut rng), &mut rng);
            found.clear();
            detector.find(&text, &mut cache, &mut found);
            total += 1;
            if covers(&found, &run) {
                detected += 1;
            } else if misses.len() < 20 {
                misses.push(format!(
                    "{format} encoded: run {:?} not found in {text:?}",
                    run
                ));
            }
        }
    }
    // A key's body and footer without its header, as `tail` prints them.
    for i in 0..SAMPLES_PER_FORMAT {
        let key = headless_key(&mut rng);
        let (text, secret) = if i % 2 == 0 {
            let before = "$ tail -n 8 ~/.ssh/id_rsa\n";
            (
                format!("{before}{}\n$ ", key.text),
                before.len()..before.len() + key.text.len(),
            )
        } else {
            (key.text.clone(), 0..key.text.len())
        };
        found.clear();
        detector.find(&text, &mut cache, &mut found);
        total += 1;
        if covers(&found, &secret) {
            detected += 1;
        } else if misses.len() < 20 {
            misses.push(format!("headless key: {text:?}, found {found:?}"));
        }
    }

    // Whole tokens written apart (cut by a line break, or in groups of four), and every
    // format percent-encoded in a URL: each piece of the token is found, and the
    // separators between them are left alone.
    let mut apart_rows = 0;
    for &format in FORMATS {
        for _ in 0..SPLIT_PER_FORMAT {
            let token = fake(format, &mut rng);
            if let Some(keyword) = whole_token_keyword(&detector, format, &token.secret)
                && let Some((written, pieces)) =
                    written_apart(&token.secret, &keyword, &mut rng, |head| {
                        !find(&detector, head).is_empty()
                    })
            {
                let (text, at, pieces) = embed_pieces(written, &pieces, &mut rng);
                found.clear();
                detector.find(&text, &mut cache, &mut found);
                total += 1;
                apart_rows += 1;
                if found_exactly(&found, &pieces, &at) {
                    detected += 1;
                } else if misses.len() < 20 {
                    misses.push(format!(
                        "{format} written apart: {:?} in {text:?}, found {found:?}",
                        &text[at.clone()]
                    ));
                }
            }
            if let Some((text, secret)) = percent_encoded(&fake(format, &mut rng), &mut rng) {
                found.clear();
                detector.find(&text, &mut cache, &mut found);
                total += 1;
                if covers(&found, &secret) {
                    detected += 1;
                } else if misses.len() < 20 {
                    misses.push(format!(
                        "{format} percent-encoded: {:?} in {text:?}, found {found:?}",
                        &text[secret.clone()]
                    ));
                }
            }
        }
    }
    assert!(apart_rows >= 300, "only {apart_rows} rows written apart");

    // Whole tokens cut by a line break inside their keyword (`gh` / `p_…`): no keyword
    // hit starts them, the run of their rest does. Both pieces are found, and nothing
    // around them.
    let mut cut_keyword_rows = 0;
    for &format in FORMATS {
        for _ in 0..SPLIT_PER_FORMAT {
            let token = fake(format, &mut rng);
            let Some(keyword) = whole_token_keyword(&detector, format, &token.secret) else {
                continue;
            };
            let Some((written, pieces)) = cut_in_keyword(&token.secret, &keyword, &mut rng) else {
                continue;
            };
            let (text, at, pieces) = embed_pieces(written, &pieces, &mut rng);
            found.clear();
            detector.find(&text, &mut cache, &mut found);
            total += 1;
            cut_keyword_rows += 1;
            if found_exactly(&found, &pieces, &at) {
                detected += 1;
            } else if misses.len() < 20 {
                misses.push(format!(
                    "{format} cut inside {keyword:?}: {:?} in {text:?}, found {found:?}",
                    &text[at.clone()]
                ));
            }
        }
    }
    assert!(
        cut_keyword_rows >= 300,
        "only {cut_keyword_rows} rows cut inside a keyword"
    );

    // Labelled values and open-length tokens cut on a narrow line (issue 40), the tail a
    // whole line of random characters: each piece is found, and nothing around them.
    let mut narrow_rows = 0;
    let mut narrow_formats = Vec::new();
    for &format in FORMATS {
        for _ in 0..NARROW_PER_FORMAT {
            let secret = fake(format, &mut rng);
            let Some((text, pieces)) = cut_on_a_narrow_line(&secret, &mut rng, |token| {
                find(&detector, token)
                    .iter()
                    .any(|f| f.range == (0..token.len()))
            }) else {
                continue;
            };
            let at = pieces[0].start..pieces[pieces.len() - 1].end;
            found.clear();
            detector.find(&text, &mut cache, &mut found);
            total += 1;
            narrow_rows += 1;
            if narrow_formats.last() != Some(&format) {
                narrow_formats.push(format);
            }
            if found_exactly(&found, &pieces, &at) {
                detected += 1;
            } else if misses.len() < 20 {
                let got: Vec<_> = found
                    .iter()
                    .map(|f| (detector.name(f.detector), &text[f.range.clone()]))
                    .collect();
                misses.push(format!(
                    "{format} cut on a narrow line: {:?} in {text:?}, found {got:?}",
                    &text[at.clone()]
                ));
            }
        }
    }
    println!(
        "cut on a narrow line: {narrow_rows} rows of {} formats: {narrow_formats:?}",
        narrow_formats.len()
    );
    assert!(
        narrow_rows >= 200,
        "only {narrow_rows} rows cut on a narrow line"
    );

    // Negative corpus: ordinary text that must not be flagged, also base64-encoded, and
    // text shaped like a token written apart or percent-encoded.
    let mut negatives = negatives(0xC0FFEE);
    negatives.extend(encoded_negatives(0xBA5E64));
    negatives.extend(split_and_percent_negatives(0x5911));
    negatives.extend(narrow_line_negatives(0x7A440));
    let mut false_positives: BTreeMap<&str, usize> = BTreeMap::new();
    let mut fp_examples = Vec::new();
    for (kind, text) in &negatives {
        found.clear();
        detector.find(text, &mut cache, &mut found);
        if !found.is_empty() {
            *false_positives.entry(kind).or_default() += 1;
            if false_positives[kind] <= 12 {
                fp_examples.push(format!(
                    "{kind}: {:?} flagged as {} in {text:?} {:?}",
                    &text[found[0].range.clone()],
                    detector.name(found[0].detector),
                    found
                        .iter()
                        .map(|f| &text[f.range.clone()])
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    let fp_total: usize = false_positives.values().sum();

    let recall = detected as f64 / total as f64;
    let fp_rate = fp_total as f64 / negatives.len() as f64;
    println!(
        "secrets corpus: {} formats, recall {:.2}% ({detected}/{total}); false positives {:.3}% ({fp_total}/{} negative samples) {false_positives:?}",
        FORMATS.len(),
        recall * 100.0,
        fp_rate * 100.0,
        negatives.len()
    );
    for m in &misses {
        println!("  miss: {m}");
    }
    for e in &fp_examples {
        println!("  false positive: {e}");
    }

    assert!(negatives.len() >= 2000, "negative corpus too small");
    assert!(recall >= 1.0, "recall {recall:.4} below 100%: {misses:#?}");
    assert!(
        fp_total == 0,
        "false-positive rate {fp_rate:.4} above 0: {fp_examples:#?}"
    );
    let unnamed: Vec<_> = FORMATS.iter().filter(|f| !named.contains_key(*f)).collect();
    assert!(
        unnamed.is_empty(),
        "formats never detected under their own name: {unnamed:?}"
    );
}

#[test]
fn every_builtin_has_a_generator_and_a_well_formed_spec() {
    let specs = builtin_specs();
    assert!(specs.len() >= 80, "only {} built-in detectors", specs.len());
    let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    for spec in &specs {
        let kebab = !spec.name.is_empty()
            && spec.name.split('-').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            });
        assert!(kebab, "{:?} is not kebab-case", spec.name);
        assert!(!spec.keywords.is_empty(), "{} has no keywords", spec.name);
        assert_eq!(spec.origin, "builtin");
    }
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "duplicate built-in names");
    let mut formats: Vec<&str> = FORMATS.to_vec();
    formats.sort_unstable();
    assert_eq!(
        names, formats,
        "corpus formats and built-in detectors differ"
    );

    // Every built-in is keyword-triggered: none of them falls back to a full scan.
    let detector = detector();
    for (i, spec) in specs.iter().enumerate() {
        assert!(
            detector.keywords(i as u32).is_some(),
            "{} scans the whole text",
            spec.name
        );
    }
}

/// Built-ins are compiled lazily, on the first hit of a keyword, so a broken one would
/// only show in the middle of a scan; here each is compiled up front the way a user
/// pattern is (with the same checks: parses, cannot match the empty string, within
/// the size limits).
#[test]
fn every_builtin_compiles() {
    let specs: Vec<DetectorSpec> = builtin_specs()
        .into_iter()
        .map(|mut spec| {
            spec.origin = "compiled-eagerly.yaml".into();
            spec
        })
        .collect();
    let n = specs.len();
    let detector = Detector::new(specs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(detector.specs().len(), n);

    // Lazily compiled engines live behind `OnceLock`s: the detector is still shared
    // between the proxy's pumps.
    fn shared<T: Send + Sync>(_: &T) {}
    shared(&detector);
}

#[test]
fn low_entropy_decoy_does_not_hide_a_real_key() {
    let detector = detector();
    let mut rng = Rng::new(7);
    let real = format!("AKIA{}", rng.chars(B32, 16));
    let decoy = format!("AKIA{}", "A".repeat(16));
    let text = format!("old={decoy} new={real}");
    let found = find(&detector, &text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(&text[found[0].range.clone()], real);

    // Same with a generic row: a placeholder value, then a real one.
    let secret = rng.alnum(32);
    let text = format!("api_key = \"{}\"\napi_key = \"{secret}\"\n", "x".repeat(32));
    let found = find(&detector, &text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(&text[found[0].range.clone()], secret);
}

#[test]
fn ten_thousand_decoys_then_a_real_key() {
    let detector = detector();
    let mut rng = Rng::new(11);
    let mut text = String::new();
    for i in 0..10_000 {
        // Alternate two shapes of decoy: a low-entropy key id and a bare prefix.
        if i % 2 == 0 {
            text.push_str(&format!("AKIA{} ", "Z".repeat(16)));
        } else {
            text.push_str("ghp_ ");
        }
    }
    let real = format!("ghp_{}", rng.alnum(36));
    text.push_str(&real);
    let found = find(&detector, &text);
    assert_eq!(found.len(), 1);
    assert_eq!(&text[found[0].range.clone()], real);

    // And there is no cap: ten thousand real keys are ten thousand findings.
    let keys: Vec<String> = (0..10_000)
        .map(|_| format!("AKIA{}", rng.chars(B32, 16)))
        .collect();
    let text = keys.join(" ");
    let found = find(&detector, &text);
    let missed: Vec<_> = keys
        .iter()
        .filter(|k| !found.iter().any(|f| &text[f.range.clone()] == k.as_str()))
        .collect();
    assert!(missed.is_empty(), "{missed:?}");
    assert_eq!(found.len(), 10_000);
}

#[test]
fn private_keys_are_found_whole_with_real_or_escaped_newlines() {
    let detector = detector();
    let mut rng = Rng::new(3);
    for _ in 0..40 {
        let key = fake("private-key", &mut rng);
        let text = format!("here it is: {}\nthanks", key.text);
        let found = find(&detector, &text);
        assert_eq!(found.len(), 1, "{text}");
        assert_eq!(&text[found[0].range.clone()], key.secret);
        assert!(key.secret.starts_with("-----BEGIN") && key.secret.ends_with("KEY-----"));
    }
    // A truncated block (no footer) is still redacted from its header to the body's end.
    let body = corpus::base64(&rng.bytes(300), false);
    let text = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\" trailing");
    let found = find(&detector, &text);
    assert_eq!(found.len(), 1);
    assert_eq!(
        &text[found[0].range.clone()],
        &text[..text.find('"').unwrap()]
    );
}

#[test]
fn a_big_pgp_block_is_found_whole_past_the_search_window() {
    let detector = detector();
    let mut rng = Rng::new(5);
    let body: String = (0..700)
        .map(|_| corpus::base64(&rng.bytes(48), false) + "\n")
        .collect();
    let block = format!(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{body}=abcd\n-----END PGP PRIVATE KEY BLOCK-----"
    );
    assert!(block.len() > 40_000);
    let text = format!("key:\n{block}\nend");
    let found = find(&detector, &text);
    assert_eq!(found.len(), 1);
    assert_eq!(&text[found[0].range.clone()], block);
}

#[test]
fn overlapping_matches_merge_under_the_most_specific_name() {
    let detector = detector();
    let mut rng = Rng::new(9);
    let token = format!("ghp_{}", rng.alnum(36));
    let text = format!("{{\"token\": \"{token}\"}}");
    let found = find(&detector, &text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(detector.name(found[0].detector), "github-token");
    assert_eq!(&text[found[0].range.clone()], token);
}

#[test]
fn findings_are_sorted_non_overlapping_and_appended() {
    let detector = detector();
    let mut rng = Rng::new(13);
    let text = corpus::dense_text(17, 64 * 1024);
    let mut cache = detector.cache();
    let sentinel = Finding {
        detector: 0,
        range: 1_000_000..1_000_001,
    };
    let mut out = vec![sentinel.clone()];
    detector.find(&text, &mut cache, &mut out);
    assert_eq!(out[0], sentinel, "existing entries are kept");
    assert!(out.len() > 100);
    for pair in out[1..].windows(2) {
        assert!(pair[0].range.end <= pair[1].range.start, "{pair:?}");
    }
    for f in &out[1..] {
        assert!(text.is_char_boundary(f.range.start) && text.is_char_boundary(f.range.end));
    }
    let _ = rng.next();
}

#[test]
fn user_patterns_join_the_automaton() {
    let mut specs = builtin_specs();
    // A literal prefix becomes the keyword.
    specs.push(DetectorSpec::new(
        "acme-key",
        r"acme_[a-z0-9]{32}",
        "policy.yaml",
    ));
    // No literal prefix: scanned over the whole text.
    let mut anywhere = DetectorSpec::new("internal-id", r"[0-9]{4}-SECRET-[A-Z]{8}", "policy.yaml");
    anywhere.entropy_threshold = Some(3.0);
    specs.push(anywhere);
    let detector = Detector::new(specs).unwrap();
    let acme = detector
        .specs()
        .iter()
        .position(|s| s.name == "acme-key")
        .unwrap() as u32;
    let internal = acme + 1;
    assert_eq!(detector.keywords(acme), Some(&["acme_".to_string()][..]));
    assert_eq!(detector.keywords(internal), None);

    let mut rng = Rng::new(21);
    let a = format!(
        "acme_{}",
        rng.chars("abcdefghijklmnopqrstuvwxyz0123456789", 32)
    );
    let b = format!("1234-SECRET-{}", rng.chars(corpus::UPPER, 8));
    let low = "9999-SECRET-AAAAAAAA";
    let text = format!("first {a}, then {low} and {b}.");
    let found = find(&detector, &text);
    let got: Vec<(&str, &str)> = found
        .iter()
        .map(|f| (detector.name(f.detector), &text[f.range.clone()]))
        .collect();
    assert_eq!(
        got,
        vec![("acme-key", a.as_str()), ("internal-id", b.as_str())]
    );
}

#[test]
fn bad_specs_are_rejected_with_their_index() {
    let bad_regex = Detector::new(vec![
        DetectorSpec::new("ok", "abc[0-9]+", "p.yaml"),
        DetectorSpec::new("broken", "abc(", "p.yaml"),
    ])
    .unwrap_err();
    assert_eq!((bad_regex.index, bad_regex.name.as_str()), (1, "broken"));

    let empty = Detector::new(vec![DetectorSpec::new("empty", "x*", "p.yaml")]).unwrap_err();
    assert!(empty.reason.contains("empty string"), "{empty}");

    let mut specs = builtin_specs();
    specs.push(DetectorSpec::new("github-token", "zzz[0-9]+", "p.yaml"));
    let dup = Detector::new(specs).unwrap_err();
    assert!(dup.reason.contains("already used"), "{dup}");

    let huge = Detector::new(vec![DetectorSpec::new(
        "huge",
        r"\w{5000}[a-z]{5000}",
        "p.yaml",
    )]);
    assert!(huge.is_err(), "size limits apply to user patterns");
}

#[test]
fn joined_pieces_find_a_secret_split_across_blocks() {
    let detector = detector();
    let mut cache = detector.cache();
    let mut rng = Rng::new(33);
    let key = format!("sk-ant-api03-{}AA", rng.chars(corpus::URLSAFE, 93));
    let (a, b) = key.split_at(30);
    let pieces = ["intro text ", a, "", b, " outro"];
    let mut out = Vec::new();
    detector.find_joined(&pieces, &mut cache, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    let f = &out[0];
    assert_eq!(detector.name(f.detector), "anthropic-api-key");
    let segments: Vec<_> = f.segments(&pieces).collect();
    assert_eq!(segments, vec![(1, 0..a.len()), (3, 0..b.len())]);

    // Each piece alone holds no whole key.
    let mut alone = Vec::new();
    for piece in pieces {
        detector.find(piece, &mut cache, &mut alone);
    }
    assert!(alone.iter().all(|f| f.range.len() < key.len()));
}

#[test]
fn disabled_builtins_are_simply_left_out() {
    let specs: Vec<DetectorSpec> = builtin_specs()
        .into_iter()
        .filter(|s| s.name != "aws-access-key-id")
        .collect();
    let detector = Detector::new(specs).unwrap();
    let mut rng = Rng::new(1);
    let text = format!("AKIA{}", rng.chars(B32, 16));
    assert!(find(&detector, &text).is_empty());
}

/// Every label shape the built-in labelled rows read, one row each (label, separator,
/// value kind, closing text), so a refactor that drops a shape fails here by name. Each
/// is found by its own row, with exactly the value as the secret. The values are
/// generated at run time.
#[test]
fn every_label_shape_is_found_by_its_row() {
    /// Which value a shape takes.
    #[derive(Clone, Copy)]
    enum V {
        Password,
        /// A password whose first character is `-` (only a quoted flag value may be).
        DashPassword,
        Alnum(usize),
        Hex(usize),
        Punct,
        Uuid,
    }
    use V::*;
    #[rustfmt::skip]
    let shapes: &[(&str, &str, V, &str)] = &[
        // generic-password: assignments, XML element text; password-flag: flags.
        ("generic-password", "password=", Password, ""),
        ("generic-password", "PASSWORD: ", Password, ""),
        ("generic-password", "passwd = ", Password, ""),
        ("generic-password", "\"password\": \"", Password, "\""),
        ("generic-password", "db_password_hash := '", Password, "'"),
        ("generic-password", "smtpPassword => ", Password, ""),
        ("generic-password", "<password>", Password, "</password>"),
        ("generic-password", "<Password>", Password, "</Password>"),
        ("generic-password", "<db:PASSWD>", Password, "</db:PASSWD>"),
        ("password-flag", "mysql -u root --password ", Password, " -h db"),
        ("password-flag", "psql --db-password '", Password, "'"),
        ("password-flag", "tool -password ", Password, ""),
        ("password-flag-quoted", "psql --password '", DashPassword, "'"),
        ("password-flag-quoted", "--db-password \"", DashPassword, "\""),
        ("password-flag-quoted", "tool -password `", DashPassword, "`"),
        ("generic-password", "--password=", Password, ""),
        // generic-secret / generic-api-key / generic-token and their suffixes.
        ("generic-secret", "client_secret=", Alnum(32), ""),
        ("generic-secret", "\"secret_key\": \"", Alnum(32), "\""),
        ("generic-secret", "SECRET_VALUE: ", Alnum(24), ""),
        ("generic-api-key", "api_key=", Alnum(32), ""),
        ("generic-api-key", "APIKEY: ", Alnum(32), ""),
        ("generic-api-key", "x-api-key: ", Alnum(32), ""),
        ("generic-api-key", "\"apiKey\": \"", Alnum(32), "\""),
        ("generic-token", "access_token=", Alnum(40), ""),
        ("generic-token", "\"refreshToken\": \"", Alnum(40), "\""),
        ("generic-token", "TOKEN_VALUE: ", Alnum(32), ""),
        // A quoted, punctuation-heavy value of a `*_key` name.
        ("punctuated-secret-key", "SECRET_KEY = '", Punct, "'"),
        ("punctuated-secret-key", "signing_key=\"", Punct, "\""),
        ("punctuated-secret-key", "\"hmac_key\": \"", Punct, "\""),
        ("punctuated-secret-key", "master-key: '", Punct, "'"),
        ("punctuated-secret-key", "ENCRYPTION_KEY => \"", Punct, "\""),
        // Vendor rows that need their vendor's name in the label.
        ("twilio-auth-token", "TWILIO_AUTH_TOKEN=", Hex(32), ""),
        ("cohere-api-key", "COHERE_API_KEY=", Alnum(40), ""),
        ("heroku-api-key-labelled", "HEROKU_API_KEY=", Uuid, ""),
        ("vercel-token", "VERCEL_TOKEN=", Alnum(24), ""),
        ("cloudflare-global-api-key", "CLOUDFLARE_API_KEY=", Hex(37), ""),
        ("datadog-api-key", "DD_API_KEY_DATADOG=", Hex(32), ""),
        ("datadog-api-key", "datadog_app_key: ", Hex(40), ""),
    ];
    let detector = detector();
    let mut rng = Rng::new(0x1ABE1);
    let mut failures = Vec::new();
    for &(format, label, kind, close) in shapes {
        for _ in 0..8 {
            let value = match kind {
                Password => {
                    let n = rng.range(12, 24);
                    rng.chars(
                        "ABCDEFGHJKMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789!*_~.",
                        n,
                    )
                }
                DashPassword => {
                    let n = rng.range(12, 24);
                    let chars = "ABCDEFGHJKMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789!*_~.";
                    format!("-{}", rng.chars(chars, n))
                }
                Alnum(n) => rng.alnum(n),
                Hex(n) => rng.hex(n),
                Punct => {
                    let n = rng.range(36, 56);
                    rng.chars(
                        "abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)[]{};:,.<>?~|",
                        n,
                    ) + "!"
                }
                Uuid => corpus::uuid(&mut rng),
            };
            for text in [
                format!("{label}{value}{close}"),
                format!("config:\n  {label}{value}{close}\n"),
            ] {
                let found = find(&detector, &text);
                let ok = found
                    .iter()
                    .any(|f| detector.name(f.detector) == format && text[f.range.clone()] == value);
                if !ok {
                    let got: Vec<_> = found
                        .iter()
                        .map(|f| (detector.name(f.detector), &text[f.range.clone()]))
                        .collect();
                    failures.push(format!("{format}: {text:?} found {got:?}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} misses:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Look-alikes of the new label shapes that hold no secret.
#[test]
fn label_shapes_leave_names_paths_and_flags_alone() {
    let detector = detector();
    for text in [
        "docker login --username ci --password-stdin < token.txt",
        "--password-file /run/secrets/db",
        // Unquoted, a value starting with `-` is the next option; `$PW` is a variable.
        "mysql --password --verbose -h db",
        "tool -password -x7Qp2Lr9KwZ3 run",
        "psql --password \"$PW\" -h db",
        "psql --password '$DB_PASSWORD_FROM_ENV'",
        "<input type=\"password\" name=\"password\">",
        "<password></password>",
        "cache_key = \"users/12345/profile?include=settings\"",
        "sort_key: 'created_at:desc'",
        "partition_key = \"2f1c8a9e-55b3-4c1e-9d2a-7b7e1f3c9a10\"",
        "api_key = \"${env:OPENAI_API_KEY}\"",
        "public_key = \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\"",
        "the password is stored in the vault",
    ] {
        let found = find(&detector, text);
        assert!(
            found.is_empty(),
            "{text:?}: {:?}",
            found
                .iter()
                .map(|f| (detector.name(f.detector), &text[f.range.clone()]))
                .collect::<Vec<_>>()
        );
    }
}

/// A token disguised inside one string: an invisible character inside it, full-width
/// letters, a Cyrillic look-alike in its prefix. The string is found whole; the same
/// characters in ordinary text are not a finding.
#[test]
fn disguised_tokens_are_found_in_their_string() {
    let detector = detector();
    let mut rng = Rng::new(0xD15C);
    let body = rng.alnum(36);
    let aws = rng.chars(B32, 16);
    let fullwidth: String = format!("ghp_{body}")
        .chars()
        .map(|c| match c {
            '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap(),
            other => other,
        })
        .collect();
    for text in [
        format!("token: ghp_{}\u{200B}{}", &body[..10], &body[10..]),
        format!("token: gh\u{2060}p_{body}"),
        format!("token: {fullwidth}"),
        format!("id \u{0410}KIA{aws} ok"),
        format!("key=ghp_{}\u{00AD}{} done", &body[..18], &body[18..]),
    ] {
        let found = find(&detector, &text);
        assert_eq!(found.len(), 1, "{text:?}: {found:?}");
        assert_eq!(found[0].range, 0..text.len(), "{text:?}");
    }
    for text in [
        "Привет, мир: это обычный текст без секретов.",
        "Καλημέρα κόσμε, τίποτα μυστικό εδώ.",
        "naïve café déjà vu — ordinary text",
        "zero\u{200B}width in prose is not a key",
        "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ",
    ] {
        assert!(find(&detector, text).is_empty(), "{text:?}");
    }
}

/// A token cut by a line break (a real one, CRLF, or `\n` written out as in a JSON string
/// carried as text), written in groups, or written with `%XX` escapes is found, and the
/// findings are exactly its pieces as written: the break and the text around it are left
/// alone. A complete token at a line's end is not joined to the next line's setting.
/// A labelled value cut by a wrap, and the tail of an open-length token whose head on
/// the wrapped line is already a token: every piece is found, and nothing else. After a
/// line as wide as a wrap (60 bytes) a value is read on into a next line that starts with
/// a tail; after a narrow line (issue 40) only into a next line that is a whole line of
/// tail (random characters, not a word, a number, a name with a number or a setting).
/// Words cut like keywords are not tokens.
#[test]
fn values_cut_by_a_wrap_are_found_piece_by_piece() {
    let detector = detector();
    let mut rng = Rng::new(0xC07);
    let pieces_found = |text: &str| -> Vec<String> {
        find(&detector, text)
            .iter()
            .map(|f| text[f.range.clone()].to_string())
            .collect()
    };
    let wide = "# the rest of a long line, as a terminal wraps it at eighty columns:";
    let password = ["xQ7v", "Lp2Rz9Kw"].concat();
    let gitlab = format!("glpat-{}", rng.alnum(26));
    for brk in ["\n", "\r\n", "\\n"] {
        // A labelled value cut by a wrap: too short to be found before it.
        // (Written out, `\\n` is read as part of the value already: one finding.)
        for at in [4, 6, 9] {
            let (head, tail) = password.split_at(at);
            let text = format!("{wide} DB_PASSWORD={head}{brk}{tail}");
            let found = pieces_found(&text);
            if brk.starts_with('\\') {
                assert_eq!(found, vec![format!("{head}{brk}{tail}")], "{text:?}");
            } else {
                assert_eq!(found, vec![head, tail], "{text:?}");
            }
        }
        // An open-length token complete before the wrap, its tail after it.
        let (head, tail) = gitlab.split_at(28);
        let text = format!("{wide} {head}{brk}{tail} ok");
        assert_eq!(pieces_found(&text), vec![head, tail], "{text:?}");
        // On a narrow line: a labelled value, an open-length token's tail, each piece.
        let real_break = !brk.starts_with('\\');
        for at in [4, 6] {
            let (pw_head, pw_tail) = password.split_at(at);
            for (text, want) in [
                (
                    format!("HOST=db\nDB_PASSWORD={pw_head}{brk}{pw_tail}\nPORT=5432"),
                    vec![pw_head, pw_tail],
                ),
                (
                    format!("env:\n  db_password: \"{pw_head}{brk}  {pw_tail}\"\n"),
                    vec![pw_head, pw_tail],
                ),
                (format!("{head}{brk}7pQ2Xz"), vec![head, "7pQ2Xz"]),
                (
                    format!("token: {head}{brk}7pQ2Xz\n$ "),
                    vec![head, "7pQ2Xz"],
                ),
            ] {
                if real_break || !text.contains("PASSWORD") && !text.contains("password") {
                    assert_eq!(pieces_found(&text), want, "{text:?}");
                }
            }
        }
        // Every labelled shape whose value ends its line or its quotes, cut on a narrow
        // line.
        for (label, close) in [
            ("password=", ""),
            ("PASSWORD: ", ""),
            ("\"password\": \"", "\""),
            ("db_password_hash := '", "'"),
            ("smtpPassword => ", ""),
            ("tool -password ", ""),
            ("psql --db-password '", "'"),
            ("client_secret=", ""),
            ("\"secret_key\": \"", "\""),
            ("SECRET_VALUE: ", ""),
            ("api_key=", ""),
            ("x-api-key: ", ""),
            ("\"apiKey\": \"", "\""),
            ("access_token=", ""),
            ("\"refreshToken\": \"", "\""),
            ("TOKEN_VALUE: ", ""),
            ("Authorization: Bearer ", ""),
            ("TWILIO_AUTH_TOKEN=", ""),
            ("COHERE_API_KEY=", ""),
            ("VERCEL_TOKEN=", ""),
        ]
        .into_iter()
        .filter(|_| real_break)
        {
            let value = match label {
                "TWILIO_AUTH_TOKEN=" => format!("0f{}a9", rng.hex(28)),
                _ => format!("{}7Qx{}", rng.alnum(20), rng.alnum(17)),
            };
            let (value_head, value_tail) = value.split_at(value.len() - 24);
            let text = format!("{label}{value_head}{brk}{value_tail}{close}\nnext: 1");
            assert_eq!(
                pieces_found(&text),
                vec![value_head, value_tail],
                "{text:?}"
            );
        }
        // Not read on: a narrow line's next line that is a word, a name with a number, a
        // version, a hash or a setting; a tail shorter than 4 (the head is found alone);
        // a wide line's next line of words; a word cut like a keyword. (Compared with
        // the break as a separator no value crosses; a written-out one is part of a
        // password's value already, as above.)
        let hash = rng.hex(40);
        for text in [
            format!("{wide} {gitlab}{brk}region = eu-west-1"),
            format!("password={head}{brk}LOG_LEVEL=info"),
            format!("password={}{brk}{}", &password[..9], &password[9..]),
            format!("{head}{brk}EOF"),
            format!("token: {head}{brk}ID123"),
            format!("password={head}{brk}HTTP/1.1"),
            format!("password={head}{brk}Region2: x"),
            format!("api_key={head}{brk}{hash}"),
            format!("secret: {head}{brk}123e4567-e89b-12d3-a456-426614174000"),
            format!("token: {head}{brk}7pQ2Xz and more"),
        ]
        .into_iter()
        .filter(|_| real_break)
        {
            let want: Vec<String> = find(&detector, &text.replace(brk, " | "))
                .iter()
                .map(|f| text.replace(brk, " | ")[f.range.clone()].to_string())
                .collect();
            assert_eq!(pieces_found(&text), want, "{text:?}");
        }
        let text = format!("the gh{brk}p_ prefix, sk{brk}- keys and AKI{brk}A ids are words");
        assert_eq!(pieces_found(&text), Vec::<String>::new(), "{text:?}");
    }
}

#[test]
fn split_and_percent_encoded_tokens_are_found_exactly() {
    let detector = detector();
    let mut rng = Rng::new(0x5B117);
    let token = format!("ghp_{}", rng.alnum(36));
    let aws = format!("AKIA{}", rng.chars(B32, 16));
    for brk in ["\n", "\r\n", "\\n", "\\r\\n"] {
        for (secret, at) in [(&token, 12), (&token, 5), (&aws, 10)] {
            let (head, tail) = secret.split_at(at);
            let text = format!("{{\"log\": \"key {head}{brk}{tail} loaded\"}}");
            let found = find(&detector, &text);
            let got: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
            assert_eq!(got, vec![head, tail], "{text:?}");
        }
    }
    let spaced: Vec<&str> = std::iter::once(&token[..12])
        .chain(
            (12..token.len())
                .step_by(4)
                .map(|i| &token[i..(i + 4).min(token.len())]),
        )
        .collect();
    let text = format!("The credential {} was pasted.", spaced.join(" "));
    let found = find(&detector, &text);
    let got: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
    assert_eq!(got, spaced, "{text:?}");

    let escaped: String = token
        .bytes()
        .enumerate()
        .map(|(i, b)| {
            if i % 3 == 0 || b == b'_' {
                format!("%{b:02X}")
            } else {
                char::from(b).to_string()
            }
        })
        .collect();
    let text = format!("curl 'https://api.example.test/repos?access={escaped}&per_page=5'");
    let found = find(&detector, &text);
    let got: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
    assert_eq!(got, vec![escaped.as_str()], "{text:?}");

    // Hex of a token is found as its run.
    let hex: String = token.bytes().map(|b| format!("{b:02x}")).collect();
    let text = format!("payload {hex} end");
    let found = find(&detector, &text);
    assert_eq!(found.len(), 1, "{text:?}");
    assert_eq!(&text[found[0].range.clone()], hex);

    // A whole token at a line's end stays itself; the next line is not read into it.
    for brk in ["\n", "\r\n", "\\n"] {
        let text = format!("github_token = {token}{brk}region = eu-west-1");
        let found = find(&detector, &text);
        let got: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
        assert_eq!(got, vec![token.as_str()], "{text:?}");
    }
    // After a token's full-width lines (40 characters here), the next line is its last
    // piece when it is a tail, not when it is an assignment's label.
    let gitlab = format!("glpat-{}", rng.alnum(56));
    let (head, middle) = gitlab.split_at(22);
    for brk in ["\n", "\r\n", "\\n"] {
        let tail = rng.alnum(5);
        for (next, want) in [
            ("region = eu-west-1".to_string(), vec![head, middle]),
            ("region: eu-west-1".to_string(), vec![head, middle]),
            (
                format!("{tail}{brk}region = eu-west-1"),
                vec![head, middle, tail.as_str()],
            ),
        ] {
            let text = format!("the runner key is {head}{brk}{middle}{brk}{next}");
            let found = find(&detector, &text);
            let got: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
            assert_eq!(got, want, "{text:?}");
        }
    }
    // Short words around a break and ordinary escapes are left alone.
    for text in [
        "the quick brown\nfox jumps over the lazy dog",
        "{\\n  \"name\": \"mcpwall\",\\n  \"version\": \"1.0\"\\n}",
        "https://example.test/search?q=secret%20key%20rotation&page=2",
        "Tokens start with ghp_\nfollowed by 36 letters and digits.",
        "export TOKEN=ghp_XXXX\nregion = eu-west-1",
    ] {
        assert!(find(&detector, text).is_empty(), "{text:?}");
    }
}
