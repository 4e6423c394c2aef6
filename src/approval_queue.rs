//! The out-of-band approval queue: calls held by an `ask` rule while the client has no
//! elicitation UI wait in `~/.mcpwall/pending/` until `mcpwall approve` decides them.
//!
//! One owner-only directory (mode 0700 on Unix), two owner-only files per call (0600, each written to a temporary
//! file and renamed into place, so a reader never sees half of one):
//! - `CODE.json`: the [`ApprovalRequest`] the proxy published (what the approver sees);
//! - `CODE.decision`: what `mcpwall approve` wrote: approve or deny, and the digest of
//!   the call it was shown. The proxy applies it only to the held call with that code
//!   and digest, then removes both files.
//!
//! Codes are six characters of a fixed alphabet ([`valid_code`]): a code typed on the
//! command line can never name a path outside the directory.

use std::fs::{self, DirBuilder};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

pub use crate::session::ApprovalRequest;

/// What `mcpwall approve` decided about one call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    pub approve: bool,
    /// The digest of the call the approver was shown.
    pub digest: String,
}

/// A held call as offered to every replica of a gateway (`settings.shared_state`): what
/// `mcpwall approve` on any replica's machine shows, and which replica holds it (only
/// that one can forward or refuse it; the decision reaches it through the shared state).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Offer {
    /// The holder's `serve --replica` name, if it has one.
    pub replica: Option<String>,
    pub request: ApprovalRequest,
}

/// The pending directory.
#[derive(Debug, Clone)]
pub struct ApprovalQueue {
    dir: PathBuf,
}

/// Whether `code` can be a code mcpwall handed out (and so a safe file name).
pub fn valid_code(code: &str) -> bool {
    code.len() == 6
        && code
            .bytes()
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'9').contains(&b))
}

impl ApprovalQueue {
    /// `home/.mcpwall/pending`, created (0700) if missing; an existing one is made 0700.
    pub fn open(home: &Path) -> io::Result<ApprovalQueue> {
        let dir = home.join(".mcpwall").join("pending");
        crate::platform::owner_only_dir(DirBuilder::new().recursive(true)).create(&dir)?;
        crate::platform::restrict_to_owner(&dir)?;
        Ok(ApprovalQueue { dir })
    }

    /// The queue at `home`, without creating it (the CLI only reads and answers).
    pub fn at(home: &Path) -> ApprovalQueue {
        ApprovalQueue {
            dir: home.join(".mcpwall").join("pending"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, code: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("{code}.{ext}"))
    }

    /// Write `bytes` to `CODE.ext` at once (temporary file, 0600, renamed into place).
    fn write_atomic(&self, code: &str, ext: &str, bytes: &[u8]) -> io::Result<()> {
        let mut tmp = crate::platform::owner_only_temp(tempfile::Builder::new().prefix(".tmp-"))
            .tempfile_in(&self.dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        tmp.persist(self.path(code, ext)).map_err(|e| e.error)?;
        Ok(())
    }

    /// Offer a held call to the approver.
    pub fn publish(&self, request: &ApprovalRequest) -> io::Result<()> {
        if !valid_code(&request.code) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad code"));
        }
        let text = serde_json::to_vec_pretty(request).map_err(io::Error::other)?;
        self.write_atomic(&request.code, "json", &text)
    }

    /// The call is no longer waiting: remove its files (missing ones are fine).
    pub fn withdraw(&self, code: &str) {
        if valid_code(code) {
            let _ = fs::remove_file(self.path(code, "json"));
            let _ = fs::remove_file(self.path(code, "decision"));
        }
    }

    /// The decision written for `code`, if any (an unreadable one counts as none).
    pub fn decision(&self, code: &str) -> Option<Decision> {
        if !valid_code(code) {
            return None;
        }
        let bytes = fs::read(self.path(code, "decision")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Drop a decision that did not apply (its digest names another call).
    pub fn discard_decision(&self, code: &str) {
        if valid_code(code) {
            let _ = fs::remove_file(self.path(code, "decision"));
        }
    }

    /// Apply the decisions written for the calls `session` holds for `mcpwall approve`. A
    /// decision written for another call than the one held under its code is discarded;
    /// the codes of those are returned (the transport may say so).
    pub fn apply_decisions(
        &self,
        session: &mut crate::session::Session,
        out: &mut crate::session::Outbox,
    ) -> Vec<String> {
        let mut discarded = Vec::new();
        for (code, digest) in session.awaiting_cli() {
            let Some(decision) = self.decision(&code) else {
                continue;
            };
            if decision.digest != digest
                || !session.decide_approval(&code, &digest, decision.approve, out)
            {
                self.discard_decision(&code);
                discarded.push(code);
            }
        }
        discarded
    }

    /// Record the approver's decision about the call `request` describes.
    pub fn record(&self, request: &ApprovalRequest, approve: bool) -> io::Result<()> {
        let decision = Decision {
            approve,
            digest: request.digest.clone(),
        };
        let text = serde_json::to_vec(&decision).map_err(io::Error::other)?;
        self.write_atomic(&request.code, "decision", &text)
    }

    /// The call offered under `code`.
    pub fn get(&self, code: &str) -> Option<ApprovalRequest> {
        if !valid_code(code) {
            return None;
        }
        let bytes = fs::read(self.path(code, "json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Every call offered, oldest deadline first, with whether a decision is already
    /// written for it. A missing directory is an empty queue.
    pub fn list(&self) -> io::Result<Vec<(ApprovalRequest, bool)>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let name = entry?.file_name();
            let Some(code) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if let Some(request) = self.get(code) {
                let decided = self.path(code, "decision").exists();
                out.push((request, decided));
            }
        }
        out.sort_by_key(|(r, _)| (r.expires_unix, r.code.clone()));
        Ok(out)
    }
}

/// Why an offered call can no longer be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// The mcpwall that held it is no longer running (killed, crashed): nothing is left
    /// to forward or refuse it.
    HolderGone,
    /// Its time ran out: the holder refused it.
    Expired,
}

impl Stale {
    /// Why, for a person.
    pub fn describe(self, request: &ApprovalRequest) -> String {
        match self {
            Stale::HolderGone => format!(
                "the mcpwall that held it (pid {}) is no longer running, so the call can never run",
                request.pid
            ),
            Stale::Expired => "its time ran out and it was refused".to_string(),
        }
    }
}

/// Whether `request` can still be decided at `now` (seconds since the epoch).
pub fn staleness(request: &ApprovalRequest, now: u64) -> Option<Stale> {
    // A reused pid reads as running: the call is then shown until it expires, never
    // approved into another process.
    if !crate::platform::process_exists(request.pid) {
        Some(Stale::HolderGone)
    } else if request.expires_unix < now {
        Some(Stale::Expired)
    } else {
        None
    }
}

impl ApprovalQueue {
    /// Remove the files of every offered call that can no longer be decided (its holder
    /// is gone, or it expired); returns those calls and why.
    pub fn sweep(&self, now: u64) -> io::Result<Vec<(ApprovalRequest, Stale)>> {
        let mut gone = Vec::new();
        for (request, _) in self.list()? {
            if let Some(why) = staleness(&request, now) {
                self.withdraw(&request.code);
                gone.push((request, why));
            }
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(code: &str) -> ApprovalRequest {
        ApprovalRequest {
            code: code.into(),
            server: "srv".into(),
            method: "tools/call".into(),
            tool: Some("run".into()),
            arguments: "{}".into(),
            rule: "ask-run".into(),
            digest: "d1".into(),
            expires_unix: 1,
            pid: 1,
        }
    }

    #[test]
    fn files_are_private_and_round_trip() {
        let home = tempfile::tempdir().unwrap();
        let q = ApprovalQueue::open(home.path()).unwrap();
        let private = |p: &Path, unix_mode: u32| {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = fs::metadata(p).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, unix_mode, "{p:?}");
            }
            let _ = unix_mode;
            crate::platform::assert_owner_only(p);
        };
        private(q.dir(), 0o700);
        q.publish(&request("abc234")).unwrap();
        private(&q.dir().join("abc234.json"), 0o600);
        assert_eq!(q.list().unwrap(), vec![(request("abc234"), false)]);
        q.record(&request("abc234"), true).unwrap();
        private(&q.dir().join("abc234.decision"), 0o600);
        assert_eq!(
            q.decision("abc234"),
            Some(Decision {
                approve: true,
                digest: "d1".into()
            })
        );
        q.withdraw("abc234");
        assert!(q.list().unwrap().is_empty());
        assert!(q.decision("abc234").is_none());
    }

    #[test]
    fn codes_cannot_name_other_paths() {
        for bad in ["../x", "abc/23", "ABC234", "abc2345", "", "abc 23"] {
            assert!(!valid_code(bad), "{bad}");
        }
        assert!(valid_code("k7mn2x"));
    }
}
