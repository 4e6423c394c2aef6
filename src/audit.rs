//! The audit log: one JSON line per decision, never secret bytes.
