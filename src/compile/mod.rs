//! Compiling a [`crate::config::Policy`] into a [`crate::program::Program`]: matchers are
//! sorted into engine classes, one engine per class.
