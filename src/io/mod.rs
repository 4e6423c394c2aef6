//! The I/O every transport shares: framing lines ([`codec`]), the server process
//! ([`child`]), mcpwall's own stdin and stdout ([`stdio`]), and its stderr messages
//! ([`Chatter`]). Nothing here judges a message.

pub mod child;
pub mod codec;
pub mod stdio;

pub use crate::config::policy::LogLevel;

/// mcpwall's own stderr messages, filtered by `--log-level`. Never audit events.
#[derive(Debug, Clone, Copy)]
pub struct Chatter {
    pub level: LogLevel,
}

impl Chatter {
    pub fn log(&self, level: LogLevel, args: std::fmt::Arguments<'_>) {
        if level <= self.level {
            let tag = match level {
                LogLevel::Error => "error",
                LogLevel::Warn => "warning",
                LogLevel::Info => "info",
                LogLevel::Debug => "debug",
            };
            eprintln!("mcpwall: {tag}: {args}");
        }
    }
}
