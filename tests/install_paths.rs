//! What `wrap` writes into a client config depends on where the running mcpwall was
//! installed from (docs/install.md): a copy in a one-off runner's cache (`npx`, `uvx`,
//! `pipx run`) is refused, since the config would outlive it; an npm install's `mcpwall`
//! on PATH (the launcher script of `mcpwall-rs`) counts as this binary, and is not mistaken
//! for the original (Node) mcpwall. Each test lays the binary out as that installer does and
//! runs it from there; the install test (.ci/dist) does the same with the real installers.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/sandbox.rs"]
mod sandbox;

use sandbox::{MCPWALL, Run, Sandbox};

const MCP_JSON: &str = "{\n  \"mcpServers\": {\n    \"notes\": { \"command\": \"sh\", \"args\": [\"-c\", \"cat\"] }\n  }\n}\n";

/// This binary at `rel` under the sandbox root (a hard link where the file system allows:
/// the running binary's path is the link's).
fn place_binary(sandbox: &Sandbox, rel: &str) -> PathBuf {
    let path = sandbox.root().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    if std::fs::hard_link(MCPWALL, &path).is_err() {
        std::fs::copy(MCPWALL, &path).unwrap();
    }
    path
}

/// `exe ARGS` in the project, with HOME and `path` only.
fn run(sandbox: &Sandbox, exe: &Path, args: &[&str], path: &str) -> Run {
    let mut command = Command::new(exe);
    command
        .args(args)
        .current_dir(sandbox.project())
        .env_clear()
        .env("HOME", sandbox.home())
        .env("PATH", path);
    sandbox.run_command(command, "")
}

fn show(run: &Run) -> String {
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        run.code, run.stdout, run.stderr
    )
}

#[test]
fn wrap_refuses_to_point_a_client_at_a_one_off_runners_cache() {
    let cases = [
        (
            "home/.npm/_npx/4b1f0a/node_modules/mcpwall-rs-linux-x64/bin/mcpwall",
            "npm install -g mcpwall-rs",
        ),
        (
            "home/.cache/uv/archive-v0/Xk3J2/bin/mcpwall",
            "uv tool install mcpwall",
        ),
        (
            "home/.local/share/pipx/.cache/0a1b2c/bin/mcpwall",
            "pipx install mcpwall",
        ),
    ];
    for (rel, install) in cases {
        let sandbox = Sandbox::new();
        sandbox.write("project/.mcp.json", MCP_JSON);
        let exe = place_binary(&sandbox, rel);
        for args in [&["wrap", "notes"][..], &["init", "--yes"][..]] {
            let run = run(&sandbox, &exe, args, "/usr/bin:/bin");
            assert_ne!(run.code, 0, "{rel} {args:?}: {}", show(&run));
            assert!(
                run.stderr.contains(install) && run.stderr.contains("nothing was written"),
                "{rel} {args:?}: {}",
                show(&run)
            );
            assert_eq!(
                sandbox.read("project/.mcp.json"),
                MCP_JSON,
                "{rel} {args:?}"
            );
        }
    }
}

#[test]
fn an_npm_install_writes_the_launcher_and_is_not_the_original_mcpwall() {
    let sandbox = Sandbox::new();
    sandbox.write("project/.mcp.json", MCP_JSON);
    // `npm install -g mcpwall-rs` with prefix `<root>/npm`: the launcher script, linked
    // from bin/, and the platform package nested under it.
    let modules = "npm/lib/node_modules";
    sandbox.write(
        &format!("{modules}/mcpwall-rs/bin/mcpwall.js"),
        "#!/usr/bin/env node\n// the launcher\n",
    );
    let exe = place_binary(
        &sandbox,
        &format!("{modules}/mcpwall-rs/node_modules/mcpwall-rs-linux-x64/bin/mcpwall"),
    );
    let bin = sandbox.root().join("npm/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(
        "../lib/node_modules/mcpwall-rs/bin/mcpwall.js",
        bin.join("mcpwall"),
    )
    .unwrap();
    let launcher = sandbox
        .root()
        .join(modules)
        .join("mcpwall-rs/bin/mcpwall.js");
    let mut perms = std::fs::metadata(&launcher).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&launcher, perms).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());

    let run1 = run(&sandbox, &exe, &["wrap", "notes", "--bare-command"], &path);
    assert_eq!(run1.code, 0, "{}", show(&run1));
    let written = sandbox.read("project/.mcp.json");
    assert!(written.contains("\"command\": \"mcpwall\""), "{written}");

    // The entry is this mcpwall's (a node script named `mcpwall` on PATH would otherwise be
    // taken for the original): `unwrap` restores it byte for byte.
    let status = run(&sandbox, &exe, &["status"], &path);
    assert!(
        !status.stdout.contains("original") && !status.stderr.contains("original"),
        "{}",
        show(&status)
    );
    let back = run(&sandbox, &exe, &["unwrap", "notes"], &path);
    assert_eq!(back.code, 0, "{}", show(&back));
    assert_eq!(sandbox.read("project/.mcp.json"), MCP_JSON);
}
