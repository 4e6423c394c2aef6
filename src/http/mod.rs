//! `mcpwall serve`: the policy in front of an MCP server, for clients that speak
//! Streamable HTTP (specification 2025-11-25) or the legacy HTTP+SSE transport.
//!
//! A transport like the stdio proxy: each HTTP session drives its own [`crate::session::Session`]
//! (the same judging as stdio and `check`), with its own server process.
//!
//! | file | job |
//! | --- | --- |
//! | `server.rs` | HTTP: routing `/mcp[/NAME]` to a server's gateway, origin and token checks, POST/GET/DELETE |
//! | `registry.rs` | the live sessions by id, whose they are, and the server each was opened on |
//! | `conversation.rs` | one session: its server process, its `Session`, routing answers to requests |
//! | `sse.rs` | SSE streams: ids, the bounded resumption buffer, the response body |
//! | `tokens.rs` | bearer tokens and identities (`~/.mcpwall/tokens`) |
//! | `identities.rs` | each identity's program and tool guard (rules matching `identity`) |
//! | `modern.rs` | the stateless 2026-07-28 revision: header/body checks, `server/discover`, era negotiation |

pub mod conversation;
pub mod identities;
pub mod modern;
pub mod registry;
pub mod server;
pub mod sse;
pub mod tokens;
