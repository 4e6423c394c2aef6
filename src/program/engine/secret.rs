//! The secret detector of a program, built at compile time when the policy adds its own
//! patterns (so a bad one is reported at start-up) and on first use otherwise: the
//! built-in table alone always builds (the test suite builds every built-in), and building
//! it at start-up delayed the first frame.

use std::sync::OnceLock;

use crate::secrets::{Detector, DetectorCache, DetectorSpec, Finding};

#[derive(Debug)]
pub(crate) struct SecretEngine {
    built: OnceLock<Detector>,
    /// The specs of a deferred detector, for names and counts without building it (and
    /// to build it from); empty when built at compile time.
    specs: Vec<DetectorSpec>,
}

impl SecretEngine {
    /// Built now.
    pub fn new(detector: Detector) -> SecretEngine {
        SecretEngine {
            built: OnceLock::from(detector),
            specs: Vec::new(),
        }
    }

    /// Built on first use; only for specs known to build (built-ins).
    pub fn deferred(specs: Vec<DetectorSpec>) -> SecretEngine {
        SecretEngine {
            built: OnceLock::new(),
            specs,
        }
    }

    pub fn detector(&self) -> &Detector {
        self.built.get_or_init(|| {
            Detector::new(self.specs.clone())
                .unwrap_or_else(|e| panic!("the built-in secret detectors do not build: {e}"))
        })
    }

    pub fn specs(&self) -> &[DetectorSpec] {
        match self.built.get() {
            Some(detector) => detector.specs(),
            None => &self.specs,
        }
    }

    pub fn name(&self, detector: u32) -> &str {
        &self.specs()[detector as usize].name
    }

    /// Append the secrets in `text` to `out`; `cache` is the caller's, made on first use.
    pub fn find(&self, text: &str, cache: &mut Option<DetectorCache>, out: &mut Vec<Finding>) {
        let detector = self.detector();
        let cache = cache.get_or_insert_with(|| detector.cache());
        detector.find(text, cache, out);
    }
}
