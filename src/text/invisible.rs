//! Which characters render as nothing: Unicode's `Default_Ignorable_Code_Point` plus
//! general category `Cf` (format characters).
//!
//! The sets come from the Unicode Character Database tables that `regex-syntax` ships
//! (already a dependency, kept current with each Unicode release), read once through a
//! character class `[\p{Default_Ignorable_Code_Point}\p{Cf}]`, so no code point list is
//! typed by hand here and a new Unicode version needs no edit. ASCII holds none of them,
//! so ASCII text never reaches the table.

use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

/// Whether `c` is default-ignorable or a format character (zero-width spaces and joiners,
/// bidi controls, variation selectors, tag characters, the soft hyphen, fillers, …).
pub fn is_invisible(c: char) -> bool {
    // Below U+00AD (the soft hyphen) nothing is in either set.
    if (c as u32) < 0xAD {
        return false;
    }
    let ranges = ranges();
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// The set as sorted, non-overlapping inclusive ranges.
fn ranges() -> &'static [(char, char)] {
    static RANGES: OnceLock<Box<[(char, char)]>> = OnceLock::new();
    RANGES.get_or_init(|| {
        // A constant pattern over tables compiled into regex-syntax: it parses on every
        // build or the unit test below fails, so a failure here cannot reach a user.
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(r"[\p{Default_Ignorable_Code_Point}\p{Cf}]")
            .expect("Unicode property class parses");
        match hir.kind() {
            HirKind::Class(Class::Unicode(class)) => class
                .ranges()
                .iter()
                .map(|r| (r.start(), r.end()))
                .collect(),
            other => panic!("expected a Unicode class, got {other:?}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every class the detection issue lists (#22), and the usual zero-width suspects.
    #[test]
    fn listed_classes_are_invisible() {
        for (lo, hi) in [
            (0x00AD, 0x00AD),
            (0x034F, 0x034F),
            (0x061C, 0x061C),
            (0x115F, 0x1160),
            (0x17B4, 0x17B5),
            (0x180B, 0x180F),
            (0x200B, 0x200F),
            (0x202A, 0x202E),
            (0x2060, 0x206F),
            (0x3164, 0x3164),
            (0xFE00, 0xFE0F),
            (0xFEFF, 0xFEFF),
            (0xFFA0, 0xFFA0),
            (0xFFF0, 0xFFF8),
            (0x1BCA0, 0x1BCA3),
            (0x1D173, 0x1D17A),
            (0xE0000, 0xE0FFF),
        ] {
            for cp in lo..=hi {
                let c = char::from_u32(cp).unwrap();
                assert!(is_invisible(c), "U+{cp:04X}");
            }
        }
    }

    #[test]
    fn visible_text_is_not() {
        for c in ('\0'..='\u{7F}').chain("éßнο中😀\u{3000}\u{A0}".chars()) {
            assert!(!is_invisible(c), "{:?}", c);
        }
    }
}
