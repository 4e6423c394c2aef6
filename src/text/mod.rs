//! Text utilities shared by layers that must not import each other: the policy's
//! `response_contains` engine (`program::engine::literal`) and the tool-definition guard
//! (`guard::poison`) match text in the same canonical form.

mod invisible;
pub mod normalize;
