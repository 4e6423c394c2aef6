//! Path handling (ARCHITECTURE decision 9): expansion, normalisation, containment.
