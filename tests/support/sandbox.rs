//! Drives the real `mcpwall` binary in a sandbox: a temporary HOME and project directory,
//! an environment cleared of everything but HOME and PATH (so no real credential, config or
//! client file can leak in), and a deadline on every run. Include it with
//! `#[path = "support/sandbox.rs"] mod sandbox;`.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The binary under test.
pub const MCPWALL: &str = env!("CARGO_BIN_EXE_mcpwall");

/// How long one run may take before the test fails instead of hanging.
const RUN_DEADLINE: Duration = Duration::from_secs(60);

/// A temporary root holding `home/` and the project directory; removed on drop.
pub struct Sandbox {
    root: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

/// What one run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Sandbox {
    /// `<root>/home` and `<root>/project`, both empty.
    pub fn new() -> Sandbox {
        let root = tempfile::tempdir().expect("temp dir");
        let base = root.path().canonicalize().expect("canonical temp dir");
        Sandbox::with_dirs(root, base.join("home"), base.join("project"))
    }

    /// `<root>/home` and `<root>/home/project`, for output that must show the project
    /// directory both as itself and relative to HOME.
    pub fn project_inside_home() -> Sandbox {
        let root = tempfile::tempdir().expect("temp dir");
        let base = root.path().canonicalize().expect("canonical temp dir");
        let home = base.join("home");
        Sandbox::with_dirs(root, home.clone(), home.join("project"))
    }

    /// Like [`Sandbox::new`], with `tree` (which holds `home/` and `project/`) copied in.
    pub fn from_tree(tree: &Path) -> Sandbox {
        let sandbox = Sandbox::new();
        copy_tree(tree, &sandbox.root());
        sandbox
    }

    fn with_dirs(root: tempfile::TempDir, home: PathBuf, project: PathBuf) -> Sandbox {
        std::fs::create_dir_all(&home).expect("home dir");
        std::fs::create_dir_all(&project).expect("project dir");
        Sandbox {
            root,
            home,
            project,
        }
    }

    /// The canonical temporary root; every path of the sandbox lies under it.
    pub fn root(&self) -> PathBuf {
        self.root.path().canonicalize().expect("canonical temp dir")
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn project(&self) -> &Path {
        &self.project
    }

    /// Read a file given relative to the root.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.path().join(rel)).expect("read sandbox file")
    }

    /// Write a file given relative to the root, creating its directories.
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.root.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("create dirs");
        std::fs::write(path, text).expect("write sandbox file");
    }

    /// Replace the sandbox paths with `$PROJECT_DIR` and `$HOME` (project first: it may
    /// lie inside home).
    pub fn scrub(&self, text: &str) -> String {
        text.replace(&*self.project.to_string_lossy(), "$PROJECT_DIR")
            .replace(&*self.home.to_string_lossy(), "$HOME")
    }

    /// `mcpwall ARGS` in the project directory with only HOME and the caller's PATH set,
    /// stdin empty and both outputs piped; adjust it, then spawn it or give it to
    /// [`Sandbox::run_command`].
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut command = Command::new(MCPWALL);
        command
            .args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Run `mcpwall ARGS` with `stdin` as its input.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S], stdin: &str) -> Run {
        self.run_command(self.command(args), stdin)
    }

    /// Run `command` with `stdin` as its input; fails the test after [`RUN_DEADLINE`].
    pub fn run_command(&self, mut command: Command, stdin: &str) -> Run {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpwall runs");
        let mut input = child.stdin.take().expect("stdin");
        let bytes = stdin.as_bytes().to_vec();
        // A child that exits without reading its input closes the pipe: ignore that error.
        let writer = std::thread::spawn(move || {
            let _ = input.write_all(&bytes);
        });
        // Drain both pipes while waiting: an output larger than the pipe buffer would
        // otherwise block the child until the deadline.
        let stdout = drain(child.stdout.take().expect("stdout"));
        let stderr = drain(child.stderr.take().expect("stderr"));
        let deadline = Instant::now() + RUN_DEADLINE;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{command:?} did not finish within {RUN_DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        writer.join().expect("stdin writer");
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout.join().expect("stdout reader")).into_owned(),
            stderr: String::from_utf8_lossy(&stderr.join().expect("stderr reader")).into_owned(),
        }
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read tree") {
        let entry = entry.expect("tree entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create dir");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}
