//! The tool-definition guard: least-privilege tool lists, pinned definitions, poisoned
//! description scanning and a per-session circuit breaker.

pub mod normalize;
pub mod poison;
