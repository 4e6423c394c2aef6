//! The server process: spawn, signal, wait, exit code.
//!
//! The server runs as its own process tree ([`platform::ProcessTree`]: a process group
//! on Unix, a Job object on Windows) so that stopping it reaches the whole tree it starts
//! (`npx` → `node`, shell wrappers): forwarding SIGTERM to `npx` alone would leave the
//! real server running. It also means a terminal's Ctrl-C reaches only mcpwall, which
//! forwards it once, instead of the server receiving it twice.

use std::ffi::OsString;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::platform::{self, ProcessTree};
use crate::sandbox::Plan;
use crate::sandbox::helper::Handover;

/// What to run.
#[derive(Clone)]
pub struct ChildSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Added to (or replacing in) the environment the child inherits from mcpwall.
    pub env: Vec<(OsString, OsString)>,
    /// The sandbox it runs in (`None`: `sandbox: off`). On Unix the server is started
    /// through the sandbox helper ([`crate::sandbox::helper`]), which applies the plan to
    /// itself and then becomes the server; on Windows it is started as it is.
    pub sandbox: Option<Arc<Plan>>,
}

/// The environment's names only: its values may be secrets.
impl std::fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("sandbox", &self.sandbox.is_some())
            .finish()
    }
}

impl ChildSpec {
    /// The server's default name: the command's basename.
    pub fn basename(&self) -> String {
        std::path::Path::new(&self.program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.program.to_string_lossy().into_owned())
    }
}

/// The server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot start the server: command {command:?} not found (check the path or PATH)")]
    NotFound { command: String },
    #[error("cannot start the server: permission denied running {command:?} (is it executable?)")]
    PermissionDenied { command: String },
    #[error("cannot start the server {command:?}: {source}")]
    Other {
        command: String,
        #[source]
        source: io::Error,
    },
}

impl SpawnError {
    /// The shell's convention: 127 for a command not found, 126 for one that cannot run.
    pub fn exit_code(&self) -> u8 {
        match self {
            SpawnError::NotFound { .. } => 127,
            SpawnError::PermissionDenied { .. } | SpawnError::Other { .. } => 126,
        }
    }
}

/// A running server.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    /// The server's tree; kept after the server is reaped, for [`Self::end_leftovers`].
    tree: Option<ProcessTree>,
    status: Option<ExitStatus>,
}

/// Spawn the server with our environment and working directory, stdin/stdout piped
/// and stderr inherited.
pub fn spawn(spec: &ChildSpec) -> Result<(ServerProcess, ChildStdin, ChildStdout), SpawnError> {
    // On Linux every server starts through the helper, which ties its life to mcpwall's
    // (parent-death signal) and applies the sandbox, if any; elsewhere only a sandboxed
    // one does (Windows: never).
    let through_helper = cfg!(target_os = "linux") || (cfg!(unix) && spec.sandbox.is_some());
    let handover = through_helper.then_some(Handover::Now(spec.sandbox.as_deref()));
    launch(spec, handover)
}

/// A server whose start waits for its sandbox: on Unix the helper is already running (its
/// own start overlapping the caller's policy load) and waits for the plan on its input;
/// on Windows nothing runs yet.
#[derive(Debug)]
pub struct Prepared {
    spec: ChildSpec,
    waiting: Option<(ServerProcess, ChildStdin, ChildStdout)>,
}

/// Start the sandbox helper for `spec`'s server before its plan is known (`spec.sandbox`
/// is ignored); [`Prepared::start`] hands it the plan. Fails as [`spawn`] does for a
/// command that does not exist.
pub fn prepare(spec: &ChildSpec) -> Result<Prepared, SpawnError> {
    let waiting = if cfg!(unix) {
        Some(launch(spec, Some(Handover::OnStdin))?)
    } else {
        None
    };
    Ok(Prepared {
        spec: spec.clone(),
        waiting,
    })
}

impl Prepared {
    /// The server, in the sandbox of `plan` (`None`: `sandbox: off`).
    pub async fn start(
        self,
        plan: Option<Arc<Plan>>,
    ) -> Result<(ServerProcess, ChildStdin, ChildStdout), SpawnError> {
        let Some((server, mut stdin, stdout)) = self.waiting else {
            return spawn(&ChildSpec {
                sandbox: plan,
                ..self.spec
            });
        };
        use tokio::io::AsyncWriteExt;
        let message = crate::sandbox::helper::plan_message(plan.as_deref());
        if let Err(source) = stdin.write_all(&message).await {
            // The helper is gone (killed, or out of memory); it says why on stderr.
            return Err(SpawnError::Other {
                command: self.spec.program.to_string_lossy().into_owned(),
                source,
            });
        }
        Ok((server, stdin, stdout))
    }

    /// The server will not run: end the waiting helper (its input closes, so it exits
    /// without starting anything) and reap it.
    pub async fn abandon(self) {
        if let Some((mut server, stdin, _)) = self.waiting {
            drop(stdin);
            server.signal(platform::SIGKILL);
            let _ = server.wait().await;
        }
    }
}

/// Spawn through the sandbox helper (`Some`: with this handover of the plan) or directly.
fn launch(
    spec: &ChildSpec,
    helper: Option<Handover<'_>>,
) -> Result<(ServerProcess, ChildStdin, ChildStdout), SpawnError> {
    let command = spec.program.to_string_lossy().into_owned();
    let mut builder = match helper {
        Some(handover) => {
            // The helper would say it too, but only after it started: a missing command
            // keeps the error (and exit code 127) it has without the sandbox.
            if !platform::program_exists(&spec.program, &spec.env) {
                return Err(SpawnError::NotFound { command });
            }
            let mut b = Command::new(platform::own_executable());
            b.args(crate::sandbox::helper::command_line(
                handover,
                &spec.program,
                &spec.args,
            ));
            b
        }
        None => {
            let mut b = Command::new(platform::resolve_program(&spec.program));
            b.args(&spec.args);
            b
        }
    };
    builder
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    ProcessTree::prepare(&mut builder);
    let mut child = builder.spawn().map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => SpawnError::NotFound {
            command: command.clone(),
        },
        io::ErrorKind::PermissionDenied => SpawnError::PermissionDenied {
            command: command.clone(),
        },
        _ => SpawnError::Other {
            command: command.clone(),
            source,
        },
    })?;
    let stdin = child.stdin.take().expect("stdin was piped");
    let stdout = child.stdout.take().expect("stdout was piped");
    // Only fails when the server has already exited: then there is nothing to stop.
    let tree = ProcessTree::adopt(&child).ok();
    Ok((
        ServerProcess {
            child,
            tree,
            status: None,
        },
        stdin,
        stdout,
    ))
}

impl ServerProcess {
    /// Send `signal` (`platform::SIGTERM`, ...) to the server's tree. A no-op once the
    /// server has exited.
    pub fn signal(&self, signal: i32) {
        // The group is ours and its leader not yet reaped, so its id cannot have been
        // recycled.
        if self.status.is_none()
            && let Some(tree) = &self.tree
        {
            let _ = tree.signal(signal);
        }
    }

    /// Wait for the server to exit. Cancel-safe; returns the same status when called again.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        let s = self.child.wait().await?;
        // The leader is gone; members of its group may live on, but we no longer own
        // the id, so [`Self::signal`] stops signalling it.
        self.status = Some(s);
        Ok(s)
    }

    pub fn exited(&self) -> Option<ExitStatus> {
        self.status
    }

    /// After the server exited, end what it left running in its group that still
    /// holds its stdout open (a background child): SIGTERM, then SIGKILL after `grace`.
    /// Only called while stdout is still open, so a descendant is alive; one that stayed
    /// in the group keeps its id from being handed to a new process, so the signal
    /// reaches no one else.
    pub async fn end_leftovers(&self, grace: std::time::Duration) {
        let Some(tree) = &self.tree else {
            return;
        };
        let _ = tree.signal(platform::SIGTERM);
        let deadline = std::time::Instant::now() + grace;
        while tree.exists() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // A group that has emptied meanwhile makes this fail with ESRCH.
        let _ = tree.signal(platform::SIGKILL);
    }
}

/// Our exit code for the server's status: its code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), platform::exit_signal(status)) {
        (Some(code), _) => (code & 0xff) as u8,
        (None, Some(sig)) => (128 + sig).min(255) as u8,
        (None, None) => 1,
    }
}

/// A server's exit status for a person: its code, or the signal that ended it.
pub(crate) fn describe(status: std::process::ExitStatus) -> String {
    match (status.code(), crate::platform::exit_signal(status)) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "unknown status".to_string(),
    }
}
