//! Other users' home directories, for `~user` paths: read once from the password file.
//!
//! `/etc/passwd` rather than `getpwnam`: the lookup is safe code with no libc state, and
//! a user only a directory service (LDAP, NSS modules) knows still gets a home path from
//! the caller's fallback, never a relative one.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The password file.
const PASSWD: &str = "/etc/passwd";

/// `user`'s home directory as the password file lists it.
pub fn home_of(user: &str) -> Option<&'static str> {
    static HOMES: OnceLock<HashMap<String, String>> = OnceLock::new();
    HOMES
        .get_or_init(|| {
            std::fs::read_to_string(PASSWD)
                .map(|text| parse(&text))
                .unwrap_or_default()
        })
        .get(user)
        .map(String::as_str)
}

/// `name:password:uid:gid:gecos:home:shell` lines; comments and short lines skipped.
fn parse(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let home = *fields.get(5)?;
            (fields.len() >= 7 && !fields[0].is_empty() && home.starts_with('/')).then(|| {
                let trimmed = home.trim_end_matches('/');
                let home = if trimmed.is_empty() { "/" } else { trimmed };
                (fields[0].to_string(), home.to_string())
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_lines_give_homes() {
        let homes = parse(
            "# comment\nroot:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000:Alice,,,:/home/alice/:/bin/bash\nbroken:x\n",
        );
        assert_eq!(homes["root"], "/root");
        assert_eq!(homes["alice"], "/home/alice");
        assert!(!homes.contains_key("broken"));
    }
}
