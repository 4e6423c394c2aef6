//! What drives a [`Session`](crate::session::Session) for the transports that serve many
//! conversations at once: judging lines without one conversation holding up the others
//! ([`judging`]).

pub mod judging;
