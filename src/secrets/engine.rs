//! One detector's regex, compiled for the only search the detector does: anchored at a
//! keyword hit, bounded by a window, reporting the match and its `secret` group.
//!
//! The engines are picked for that search, which is why this is not a `meta::Regex`:
//! a meta regex also builds a reverse NFA, literal prefilters and a backtracker that an
//! anchored search never uses, and each build then costs about three times as much.
//! - A pattern with a `secret` group that is one-pass (most of them) is searched with
//!   the one-pass DFA alone: one anchored pass gives the match and the group.
//! - Any other pattern is searched with a forward lazy DFA, which gives the match end;
//!   a `secret` group is then read by a bounded backtracker (or, for a match too long
//!   for it, the PikeVM) over the match alone.

use std::ops::Range;

use regex_automata::dfa::onepass;
use regex_automata::hybrid;
use regex_automata::nfa::thompson::{self, WhichCaptures, backtrack, pikevm};
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::{Input, MatchKind, PatternID};
use regex_syntax::hir::Hir;

/// Size limits for a detector's automata (user patterns are untrusted input).
const NFA_SIZE_LIMIT: usize = 32 << 20;
const ONEPASS_SIZE_LIMIT: usize = 1 << 20;
/// Lazy DFA cache capacity of each detector (allocated as states are built; an
/// anchored DFA over one detector stays far below it).
const HYBRID_CACHE_CAPACITY: usize = 2 << 20;

/// A detector's compiled regex.
#[derive(Debug)]
pub(super) struct Engine {
    kind: Kind,
    /// Slot of the start of the `secret` group (its end is the next slot).
    secret_slot: Option<usize>,
    /// Maximum match length, or `None` when unbounded.
    pub max_len: Option<usize>,
}

#[derive(Debug)]
enum Kind {
    /// One-pass pattern with a `secret` group.
    OnePass(Box<onepass::DFA>),
    /// Lazy DFA for the match; the backtracker reads a `secret` group within it, the
    /// PikeVM does when the match is too long for the backtracker or the DFA gives up
    /// (a Unicode `\b` in a user pattern, on non-ASCII text).
    Dfa(Box<DfaEngines>),
}

#[derive(Debug)]
struct DfaEngines {
    dfa: hybrid::dfa::DFA,
    backtrack: Option<backtrack::BoundedBacktracker>,
    pikevm: pikevm::PikeVM,
}

/// Per-caller scratch for one [`Engine`].
#[derive(Debug)]
pub(super) struct EngineCache {
    onepass: Option<onepass::Cache>,
    dfa: Option<hybrid::dfa::Cache>,
    backtrack: Option<backtrack::Cache>,
    pikevm: Option<pikevm::Cache>,
    slots: Vec<Option<NonMaxUsize>>,
}

/// A match: the whole span and the secret's span.
pub(super) struct Found {
    pub whole: Range<usize>,
    pub secret: Range<usize>,
}

impl Engine {
    /// Compiles `hir`, the parsed pattern of one detector.
    pub fn new(hir: &Hir) -> Result<Engine, String> {
        let max_len = hir.properties().maximum_len();
        let has_secret = has_secret_group(hir);
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .nfa_size_limit(Some(NFA_SIZE_LIMIT))
                    .which_captures(if has_secret {
                        WhichCaptures::All
                    } else {
                        WhichCaptures::Implicit
                    }),
            )
            .build_from_hir(hir)
            .map_err(|e| e.to_string())?;
        let secret_slot = if has_secret {
            nfa.group_info()
                .to_index(PatternID::ZERO, "secret")
                .map(|group| group * 2)
        } else {
            None
        };
        if secret_slot.is_some() {
            let onepass = onepass::Builder::new()
                .configure(
                    onepass::Config::new()
                        .match_kind(MatchKind::LeftmostFirst)
                        .size_limit(Some(ONEPASS_SIZE_LIMIT)),
                )
                .build_from_nfa(nfa.clone());
            if let Ok(onepass) = onepass {
                return Ok(Engine {
                    kind: Kind::OnePass(Box::new(onepass)),
                    secret_slot,
                    max_len,
                });
            }
        }
        let dfa = hybrid::dfa::Builder::new()
            .configure(
                hybrid::dfa::Config::new()
                    .match_kind(MatchKind::LeftmostFirst)
                    .unicode_word_boundary(true)
                    .cache_capacity(HYBRID_CACHE_CAPACITY),
            )
            .build_from_nfa(nfa.clone())
            .map_err(|e| e.to_string())?;
        let backtrack = match secret_slot {
            Some(_) => Some(
                backtrack::BoundedBacktracker::new_from_nfa(nfa.clone())
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let pikevm = pikevm::PikeVM::new_from_nfa(nfa).map_err(|e| e.to_string())?;
        Ok(Engine {
            kind: Kind::Dfa(Box::new(DfaEngines {
                dfa,
                backtrack,
                pikevm,
            })),
            secret_slot,
            max_len,
        })
    }

    /// Whether the pattern has a `secret` group (only part of a match is the secret).
    pub fn has_secret_group(&self) -> bool {
        self.secret_slot.is_some()
    }

    pub fn create_cache(&self) -> EngineCache {
        let slots = vec![None; self.secret_slot.map_or(2, |s| s + 2)];
        match &self.kind {
            Kind::OnePass(onepass) => EngineCache {
                onepass: Some(onepass.create_cache()),
                dfa: None,
                backtrack: None,
                pikevm: None,
                slots,
            },
            Kind::Dfa(engines) => EngineCache {
                onepass: None,
                dfa: Some(engines.dfa.create_cache()),
                backtrack: None,
                pikevm: None,
                slots,
            },
        }
    }

    /// The leftmost-first match of an anchored search over `input`, and its secret.
    pub fn search(&self, cache: &mut EngineCache, input: &Input<'_>) -> Option<Found> {
        match &self.kind {
            Kind::OnePass(onepass) => {
                let slots = &mut cache.slots;
                let op_cache = cache.onepass.as_mut()?;
                // A one-pass search cannot fail on an anchored input.
                onepass.try_search_slots(op_cache, input, slots).ok()??;
                self.found(slots)
            }
            Kind::Dfa(engines) => {
                let DfaEngines {
                    dfa,
                    backtrack,
                    pikevm,
                } = &**engines;
                let dfa_cache = cache.dfa.as_mut()?;
                let slots = &mut cache.slots;
                let end = match dfa.try_search_fwd(dfa_cache, input) {
                    Ok(Some(half)) => half.offset(),
                    Ok(None) => return None,
                    Err(_) => {
                        let vm_cache = cache.pikevm.get_or_insert_with(|| pikevm.create_cache());
                        pikevm.search_slots(vm_cache, input, slots)?;
                        return self.found(slots);
                    }
                };
                let Some(bt) = backtrack else {
                    let whole = input.start()..end;
                    return Some(Found {
                        secret: whole.clone(),
                        whole,
                    });
                };
                // Read the groups over the match alone.
                let within = input.clone().range(input.start()..end);
                let matched = if within.get_span().len() <= bt.max_haystack_len() {
                    let bt_cache = cache.backtrack.get_or_insert_with(|| bt.create_cache());
                    bt.try_search_slots(bt_cache, &within, slots).ok().flatten()
                } else {
                    let vm_cache = cache.pikevm.get_or_insert_with(|| pikevm.create_cache());
                    pikevm.search_slots(vm_cache, &within, slots)
                };
                matched?;
                self.found(slots)
            }
        }
    }

    fn found(&self, slots: &[Option<NonMaxUsize>]) -> Option<Found> {
        let whole = span(slots, 0)?;
        let secret = self.secret_slot.and_then(|s| span(slots, s));
        Some(Found {
            secret: secret.unwrap_or_else(|| whole.clone()),
            whole,
        })
    }
}

fn span(slots: &[Option<NonMaxUsize>], slot: usize) -> Option<Range<usize>> {
    let start = slots.get(slot).copied().flatten()?.get();
    let end = slots.get(slot + 1).copied().flatten()?.get();
    Some(start..end)
}

fn has_secret_group(hir: &Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Capture(c) => c.name.as_deref() == Some("secret") || has_secret_group(&c.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(has_secret_group),
        HirKind::Repetition(r) => has_secret_group(&r.sub),
        _ => false,
    }
}
