//! The strict single-pass JSON scanner behind [`super::Parsed::parse`].

use super::{FrameError, Limits, Parsed};

/// Validate `raw` as one strict JSON-RPC frame and fill `out`.
pub(crate) fn parse_into(out: &mut Parsed, raw: &[u8], limits: &Limits) -> Result<(), FrameError> {
    let _ = (out, raw, limits);
    todo!("frame scanner")
}
