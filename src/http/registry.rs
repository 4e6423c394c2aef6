//! The listener's live sessions, by `Mcp-Session-Id`, bounded in number, each with the
//! server (endpoint) it was opened on: one registry for all the servers of a listener, so
//! a session id used on another server's endpoint is recognised as such (and audited).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::conversation::Conversation;

/// Why a session id does not lead to a session the caller may use.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// No such session (never was, ended, or deleted).
    Unknown,
    /// The session belongs to another identity.
    NotYours { owner: Option<Arc<str>> },
    /// The session was opened on another server's endpoint.
    OtherServer { server: Arc<str> },
}

/// Session id → (the server it was opened on, the session).
type Sessions = HashMap<String, (Arc<str>, Arc<Conversation>)>;

#[derive(Default)]
pub struct Registry {
    sessions: Mutex<Sessions>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions still running (ended ones are forgotten first).
    pub fn open_count(&self) -> usize {
        let mut sessions = self.lock();
        sessions.retain(|_, (_, c)| !c.is_ended());
        sessions.len()
    }

    /// A session opened on the endpoint of `server`.
    pub fn insert(&self, server: &Arc<str>, conversation: Arc<Conversation>) {
        self.lock()
            .insert(conversation.id.clone(), (server.clone(), conversation));
    }

    /// The session `id`, if `identity` opened it on `server`'s endpoint and it has not
    /// ended.
    pub fn get(
        &self,
        id: &str,
        server: &str,
        identity: Option<&str>,
    ) -> Result<Arc<Conversation>, Lookup> {
        let mut sessions = self.lock();
        let Some((opened_on, c)) = sessions.get(id) else {
            return Err(Lookup::Unknown);
        };
        if c.is_ended() {
            sessions.remove(id);
            return Err(Lookup::Unknown);
        }
        if &**opened_on != server {
            return Err(Lookup::OtherServer {
                server: opened_on.clone(),
            });
        }
        if c.identity.as_deref() != identity {
            return Err(Lookup::NotYours {
                owner: c.identity.clone(),
            });
        }
        c.touch();
        Ok(c.clone())
    }

    /// End the sessions [`Conversation::idle_for`] `limit`; returns how many.
    pub fn end_idle(&self, limit: std::time::Duration) -> usize {
        let mut sessions = self.lock();
        let idle: Vec<String> = sessions
            .iter()
            .filter(|(_, (_, c))| c.is_ended() || c.idle_for(limit))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &idle {
            if let Some((_, c)) = sessions.remove(id) {
                c.end();
            }
        }
        idle.len()
    }

    /// Forget the session and end it.
    pub fn remove(&self, id: &str) -> Option<Arc<Conversation>> {
        let (_, c) = self.lock().remove(id)?;
        c.end();
        Some(c)
    }

    /// End every session `identity` opened (`None`: those of clients without a token), on
    /// every server and transport: its token was revoked. Returns how many.
    pub fn end_identity(&self, identity: Option<&str>) -> usize {
        let mut sessions = self.lock();
        let mut ended = 0;
        sessions.retain(|_, (_, c)| {
            if c.identity.as_deref() != identity {
                return true;
            }
            c.end();
            ended += 1;
            false
        });
        ended
    }

    /// End every session (shutdown); returns them so the caller can wait.
    pub fn end_all(&self) -> Vec<Arc<Conversation>> {
        let all: Vec<_> = self.lock().drain().map(|(_, (_, c))| c).collect();
        for c in &all {
            c.end();
        }
        all
    }
}
