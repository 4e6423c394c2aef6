//! Tool pins shared by the replicas of a gateway (`settings.shared_state`).
//!
//! The shared record (the pin file's JSON, in the shared state) is what every replica
//! judges a listing against: a definition pinned, or a change withheld, by one replica is
//! pinned or withheld on all of them. Each replica keeps its pin file as a copy of it, and
//! `mcpwall pins approve` edits that file on the machine it runs on; the replica then
//! carries the approval into the shared record the next time it judges a listing.
//!
//! An approval is recognised, not inferred: an entry pending in the shared record
//! (`observed`) that the local file no longer has pending, and that the local file now
//! pins as approved by the user with the observed definition's digest (or, for a removed
//! entry, no longer pins at all). Anything else in the local file is overwritten by the
//! shared record, so one replica's stale file cannot undo another's observation.

use super::pins::{ApprovedBy, PinFile, Status};

/// The shared record `shared` with the approvals `local` (this machine's pin file) made
/// of entries pending in it.
pub fn merge_approvals(mut shared: PinFile, local: Option<&PinFile>) -> PinFile {
    let Some(local) = local else {
        return shared;
    };
    let pending: Vec<_> = shared.observed.keys().cloned().collect();
    for key in pending {
        if local.observed.contains_key(&key) {
            continue;
        }
        let Some(observed) = shared.observed.get(&key) else {
            continue;
        };
        let approved = match (observed.status, local.pinned.get(&key)) {
            (Status::Removed, None) => {
                shared.pinned.remove(&key);
                true
            }
            (_, Some(pin))
                if pin.approved_by == ApprovedBy::User
                    && observed.digest.as_deref() == Some(pin.digest.as_str()) =>
            {
                shared.pinned.insert(key.clone(), pin.clone());
                true
            }
            _ => false,
        };
        if approved {
            shared.observed.remove(&key);
        }
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::pins::{EntryKey, Observed, Pinned, ServerIdentity, digest};
    use serde_json::json;

    fn file() -> PinFile {
        PinFile::new(
            ServerIdentity {
                name: "fs".into(),
                command: vec!["fs".into()],
            },
            1,
        )
    }

    fn pin(def: &serde_json::Value, by: ApprovedBy) -> Pinned {
        Pinned {
            digest: digest(def),
            definition: def.clone(),
            approved_by: by,
            at: 1,
            allow_poisoned: false,
        }
    }

    fn observed(status: Status, def: Option<&serde_json::Value>) -> Observed {
        Observed {
            status,
            definition: def.cloned(),
            digest: def.map(digest),
            fields: Vec::new(),
            findings: Vec::new(),
            at: 2,
        }
    }

    #[test]
    fn an_approval_made_locally_enters_the_shared_record_and_nothing_else_does() {
        let (old, new) = (json!({"name":"read","d":1}), json!({"name":"read","d":2}));
        let (read, gone, other) = (
            EntryKey::tool("read"),
            EntryKey::tool("gone"),
            EntryKey::tool("other"),
        );
        let mut shared = file();
        shared
            .pinned
            .insert(read.clone(), pin(&old, ApprovedBy::FirstUse));
        shared
            .pinned
            .insert(gone.clone(), pin(&old, ApprovedBy::FirstUse));
        shared
            .pinned
            .insert(other.clone(), pin(&old, ApprovedBy::FirstUse));
        shared
            .observed
            .insert(read.clone(), observed(Status::Changed, Some(&new)));
        shared
            .observed
            .insert(gone.clone(), observed(Status::Removed, None));
        shared
            .observed
            .insert(other.clone(), observed(Status::Changed, Some(&new)));

        // This machine approved `read` and `gone`; its copy of `other` is stale (it never
        // saw the change), which is no approval.
        let mut local = shared.clone();
        local
            .approve(&[read.clone(), gone.clone()], 3, false)
            .unwrap();
        local.observed.remove(&other);
        local
            .pinned
            .insert(other.clone(), pin(&old, ApprovedBy::User));

        let merged = merge_approvals(shared.clone(), Some(&local));
        assert_eq!(merged.pinned[&read].digest, digest(&new));
        assert!(!merged.observed.contains_key(&read));
        assert!(!merged.pinned.contains_key(&gone));
        assert!(!merged.observed.contains_key(&gone));
        assert_eq!(merged.pinned[&other].digest, digest(&old));
        assert!(merged.observed.contains_key(&other), "still pending");
        // Without a local file the shared record stands as it is.
        assert_eq!(merge_approvals(shared.clone(), None), shared);
    }
}
