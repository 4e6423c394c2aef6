//! The listener's live sessions, by `Mcp-Session-Id`, bounded in number, each with the
//! server (endpoint) it was opened on: one registry for all the servers of a listener, so
//! a session id used on another server's endpoint is recognised as such (and audited).
//!
//! **Shares.** The listener holds at most `gateway.max_sessions` sessions, and one
//! identity at most `gateway.sessions_per_identity` of them, so one token cannot take
//! every place. A gateway without tokens has one identity (every local client is
//! "nobody": there is nothing to tell clients apart by, a peer address on loopback being
//! the same for all), whose share is the whole. Under pressure an abandoned session is
//! let go sooner: a session neither used nor read for [`PRESSURE_IDLE`] (or a quarter of
//! the idle limit, if shorter) makes room for a new one: the opener's own oldest first when its
//! share is full, else the oldest of the identity holding the most.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::conversation::Conversation;
use crate::config::policy::GatewaySettings;

/// Under pressure, a session this long without a request or a stream being read counts
/// as abandoned (an agent between two calls is rarely this quiet with nothing open).
pub const PRESSURE_IDLE: Duration = Duration::from_secs(60);

/// Why a new session cannot be opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    /// The identity holds its share, none of it abandoned.
    Share { share: usize },
    /// The listener holds `max_sessions`, none of them abandoned.
    Listener { max: usize },
}

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

pub struct Registry {
    sessions: Mutex<Sessions>,
    limits: GatewaySettings,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new(GatewaySettings::default())
    }
}

impl Registry {
    /// The listener's `settings.gateway`.
    pub fn limits(&self) -> &GatewaySettings {
        &self.limits
    }

    pub fn new(limits: GatewaySettings) -> Registry {
        Registry {
            sessions: Mutex::new(HashMap::new()),
            limits,
        }
    }

    /// How long a session may go unused before the reaper ends it.
    pub fn idle_limit(&self) -> Duration {
        Duration::from_secs(u64::from(self.limits.session_idle_seconds))
    }

    /// Make room for one more session of `identity`: within its share and the listener's
    /// bound, after ending an abandoned session if that is what it takes (see the module
    /// docs). The caller opens the session before anything else runs (one thread, no
    /// await in between), so the count cannot be overtaken.
    pub fn admit(&self, identity: Option<&str>) -> Result<(), Full> {
        let max = self.limits.max_sessions as usize;
        let share = match identity {
            Some(_) => self.limits.sessions_per_identity as usize,
            None => max,
        };
        let abandoned = PRESSURE_IDLE.min(self.idle_limit() / 4);
        let mut sessions = self.lock();
        sessions.retain(|_, (_, c)| !c.is_ended());
        let held = sessions
            .values()
            .filter(|(_, c)| c.identity.as_deref() == identity)
            .count();
        let victim = if held >= share {
            let own = oldest_abandoned(&sessions, abandoned, |c| c.identity.as_deref() == identity);
            Some(own.ok_or(Full::Share { share })?)
        } else if sessions.len() >= max {
            let mut counts: HashMap<Option<&str>, usize> = HashMap::new();
            for (_, c) in sessions.values() {
                *counts.entry(c.identity.as_deref()).or_default() += 1;
            }
            // The identity holding the most gives first; among equals, the oldest.
            let most = sessions
                .values()
                .filter(|(_, c)| c.idle_since().is_some_and(|t| t.elapsed() >= abandoned))
                .map(|(_, c)| counts[&c.identity.as_deref()])
                .max();
            let victim = most.and_then(|most| {
                oldest_abandoned(&sessions, abandoned, |c| {
                    counts[&c.identity.as_deref()] == most
                })
            });
            Some(victim.ok_or(Full::Listener { max })?)
        } else {
            None
        };
        if let Some(id) = victim
            && let Some((_, c)) = sessions.remove(&id)
        {
            c.end();
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
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

    /// How many sessions are open, by (server, identity) (`/metrics`).
    pub fn open_counts(&self) -> std::collections::BTreeMap<(Arc<str>, Option<Arc<str>>), u64> {
        let mut counts = std::collections::BTreeMap::new();
        for (server, c) in self.lock().values() {
            if !c.is_ended() {
                *counts
                    .entry((server.clone(), c.identity.clone()))
                    .or_default() += 1;
            }
        }
        counts
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

/// The id of the session unused longest, of those `whose` and abandoned for `abandoned`.
fn oldest_abandoned(
    sessions: &Sessions,
    abandoned: Duration,
    whose: impl Fn(&Conversation) -> bool,
) -> Option<String> {
    sessions
        .iter()
        .filter(|(_, (_, c))| whose(c))
        .filter_map(|(id, (_, c))| Some((c.idle_since()?, id)))
        .filter(|(since, _)| since.elapsed() >= abandoned)
        .min_by_key(|(since, _): &(Instant, &String)| *since)
        .map(|(_, id)| id.clone())
}
