//! `mcpwall serve`: the policy in front of an MCP server, for clients that speak
//! Streamable HTTP (specification 2025-11-25), the legacy HTTP+SSE transport or WebSocket.
//!
//! A transport like the stdio proxy: each HTTP session drives its own [`crate::session::Session`]
//! (the same judging as stdio and `check`), with its own server process.
//!
//! | file | job |
//! | --- | --- |
//! | `server.rs` | HTTP: routing `/mcp[/NAME]` to a server's gateway, origin and token checks, POST/GET/DELETE |
//! | `connections.rs` | the open connections, bounded in all and per peer; accept back-off |
//! | `registry.rs` | the live sessions by id, whose they are, the server each was opened on, each identity's share |
//! | `conversation.rs` | one session: its server process, its `Session`, routing answers to requests |
//! | `sse.rs` | SSE streams: ids, the bounded resumption buffer, the response body |
//! | `tokens.rs` | bearer tokens and identities (`~/.mcpwall/tokens`), re-read when it changes |
//! | `refusals.rs` | HTTP refusals counted and summarised for the audit log, logged fields bounded |
//! | `identities.rs` | each (server, identity)'s program and tool guard (rules matching `identity`, a server's own packs) |
//! | `tls.rs` | HTTPS, and the names of a verified client certificate (`--client-ca`) |
//! | `websocket.rs` | the WebSocket endpoint: the upgrade, one socket = one session |
//! | `modern.rs` | the stateless 2026-07-28 revision: header/body checks, `server/discover`, era negotiation |
//! | `stateless.rs` | serving that revision: each identity's session-based conversation, ids and progress mapped |
//! | `reload.rs` | policy and token-file changes without a restart: watch, rebuild off the I/O thread, swap |
//! | `oauth.rs` | identities from the identity provider: its signed access tokens, its key set, the resource metadata |
//! | `metrics.rs` | `/metrics` (Prometheus) on its own listener, for `--metrics-reader` identities only |
//! | `shared_approvals.rs` | calls held for `mcpwall approve` offered to every replica: approve anywhere, answer at home |

pub mod connections;
pub mod conversation;
pub mod identities;
pub mod metrics;
pub mod modern;
#[cfg(feature = "tls")]
pub mod oauth;
#[cfg(not(feature = "tls"))]
#[path = "oauth_off.rs"]
pub mod oauth;
pub mod refusals;
pub mod registry;
pub mod reload;
pub mod scrape;
pub mod server;
pub mod shared_approvals;
pub mod sse;
pub mod stateless;
pub mod tls;
pub mod tokens;
pub mod trigger;
pub mod websocket;
