//! Where each MCP client keeps its server list, and finding those files.
//!
//! Every path and key below is taken from the client's own documentation, cited at the
//! client. Discovery reads only `HOME`, `APPDATA` and `XDG_CONFIG_HOME` from the
//! environment (through [`Env`]), so tests point it at a temporary home.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use super::edit::Format;
use super::json_span::{Dialect, Node};

/// An MCP client whose configuration mcpwall can edit. Paths and keys below were checked
/// against each client's published documentation (linked) on 2026-11-29.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Client {
    /// Claude Code. <https://code.claude.com/docs/en/mcp> (scopes `local`, `project`, `user`): user-scope servers
    /// in `~/.claude.json` top-level `mcpServers`, local-scope servers in the same file under
    /// `projects["<abs path>"].mcpServers`, project-scope servers in `<project>/.mcp.json`
    /// `mcpServers`. Remote servers carry `"type": "http"|"sse"` and a `url`.
    ClaudeCode,
    /// Claude Desktop. <https://modelcontextprotocol.io/quickstart/user>: `mcpServers` in
    /// `claude_desktop_config.json`, macOS `~/Library/Application Support/Claude/`, Windows
    /// `%APPDATA%\Claude\`. The published docs name only macOS and Windows; the Linux location
    /// `~/.config/Claude/` (XDG config home) is where unofficial Linux builds keep it.
    ClaudeDesktop,
    /// Cursor. <https://cursor.com/docs/mcp>: `mcpServers` in
    /// `~/.cursor/mcp.json` (global) and `<project>/.cursor/mcp.json`; remote servers use `url`.
    Cursor,
    /// Windsurf. <https://docs.windsurf.com/windsurf/cascade/mcp>: `mcpServers` in
    /// `~/.codeium/windsurf/mcp_config.json`; remote servers use `serverUrl` (or `url`).
    Windsurf,
    /// VS Code. <https://code.visualstudio.com/docs/copilot/customization/mcp-servers>: key `servers`
    /// (beside `inputs`) in `<project>/.vscode/mcp.json` and the user profile's `mcp.json`
    /// (Linux `~/.config/Code/User/`, macOS `~/Library/Application Support/Code/User/`,
    /// Windows `%APPDATA%\Code\User\`); entries carry `"type": "stdio"|"http"|"sse"`. The
    /// files are JSON with comments, like every VS Code settings file.
    VsCode,
    /// Zed. <https://zed.dev/docs/ai/mcp>: key `context_servers` in `settings.json`
    /// (`~/.config/zed/` on macOS and Linux, `%APPDATA%\Zed\` on Windows, per
    /// <https://zed.dev/docs/configuring-zed>) and `<project>/.zed/settings.json`. Custom
    /// servers are `{"source": "custom", "command": …, "args": […], "env": {…}}`; entries
    /// without a string `command` (extension-provided servers, the older
    /// `"command": {"path": …}` form) are listed as skipped. The files are JSON with comments.
    Zed,
    /// Codex. <https://github.com/openai/codex/blob/main/docs/config.md>: TOML tables
    /// `[mcp_servers.<name>]` with `command`, `args`, `env` in `$CODEX_HOME/config.toml`
    /// (`~/.codex/config.toml` by default) and, for a trusted project, `<project>/.codex/config.toml`;
    /// remote servers have `url`.
    Codex,
}

impl Client {
    /// Every supported client, in display order.
    pub const ALL: [Client; 7] = [
        Client::ClaudeCode,
        Client::ClaudeDesktop,
        Client::Cursor,
        Client::Windsurf,
        Client::VsCode,
        Client::Zed,
        Client::Codex,
    ];

    /// The identifier used on the command line (`--client`) and in records.
    pub fn id(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::ClaudeDesktop => "claude-desktop",
            Client::Cursor => "cursor",
            Client::Windsurf => "windsurf",
            Client::VsCode => "vscode",
            Client::Zed => "zed",
            Client::Codex => "codex",
        }
    }

    /// Parse a `--client` value.
    pub fn from_id(id: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|c| c.id() == id)
    }

    /// How the client's files are written.
    pub fn format(self) -> Format {
        match self {
            Client::VsCode | Client::Zed => Format::Json(Dialect::Jsonc),
            Client::Codex => Format::Toml,
            _ => Format::Json(Dialect::Json),
        }
    }

    /// The syntax name for messages (`JSON`, `TOML`).
    pub fn syntax(self) -> &'static str {
        match self.format() {
            Format::Json(_) => "JSON",
            Format::Toml => "TOML",
        }
    }

    /// The key under which the client lists its servers.
    fn servers_key(self) -> &'static str {
        match self {
            Client::VsCode => "servers",
            Client::Zed => "context_servers",
            Client::Codex => "mcp_servers",
            _ => "mcpServers",
        }
    }

    /// The JSON paths of every server map in a parsed file of this client.
    pub fn server_maps(self, root: &Node) -> Vec<Vec<String>> {
        let mut maps = vec![vec![self.servers_key().to_string()]];
        if self == Client::ClaudeCode {
            // `~/.claude.json` keeps local-scope servers per project directory.
            if let Some(projects) = root.at(&["projects"]).and_then(Node::members) {
                for project in projects {
                    if project.value.member("mcpServers").is_some() {
                        maps.push(vec![
                            "projects".to_string(),
                            project.key.clone(),
                            "mcpServers".to_string(),
                        ]);
                    }
                }
            }
        }
        maps.retain(|path| root.at(path).and_then(Node::members).is_some());
        maps
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// Whether a file belongs to the user or to the current project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Under the home directory.
    User,
    /// Under the project directory.
    Project,
}

/// One client configuration file that exists.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// Whose file it is.
    pub client: Client,
    /// Where it is, as found (not canonicalised, so messages show the familiar path).
    pub path: PathBuf,
    /// User or project file.
    pub scope: Scope,
}

/// Where project files sit in their project, for each client (`.mcp.json`,
/// `.cursor/mcp.json`, …): the same places [`Env::candidates`] looks in the project.
const PROJECT_FILES: &[(Client, &[&str])] = &[
    (Client::ClaudeCode, &[".mcp.json"]),
    (Client::Cursor, &[".cursor", "mcp.json"]),
    (Client::VsCode, &[".vscode", "mcp.json"]),
    (Client::Zed, &[".zed", "settings.json"]),
    (Client::Codex, &[".codex", "config.toml"]),
];

impl ConfigFile {
    /// The project a project file belongs to: the working directory for the files found
    /// there (or named inside it), otherwise the directory holding `.mcp.json` or the
    /// `.cursor`/`.vscode`/… folder (a file known from the wrap records, found from
    /// elsewhere). `None` for a user file.
    pub fn project_dir(&self, env: &Env) -> Option<PathBuf> {
        if self.scope != Scope::Project {
            return None;
        }
        if self.path.starts_with(&env.project_dir) {
            return Some(env.project_dir.clone());
        }
        project_of(self.client, &self.path).or_else(|| self.path.parent().map(Path::to_path_buf))
    }

    /// A file known only from a wrap record: a project file if it sits where `client`
    /// keeps project files (and that is not the home directory, where the same names are
    /// user files), otherwise a user file.
    pub fn recorded(client: Client, path: PathBuf, env: &Env) -> ConfigFile {
        let scope = match project_of(client, &path) {
            Some(project) if project != env.home => Scope::Project,
            _ => Scope::User,
        };
        ConfigFile {
            client,
            path,
            scope,
        }
    }
}

/// The project directory `path` would be `client`'s project file of, if its name fits.
fn project_of(client: Client, path: &Path) -> Option<PathBuf> {
    let (_, tail) = PROJECT_FILES.iter().find(|(c, _)| *c == client)?;
    let mut dir = path;
    for name in tail.iter().rev() {
        if dir.file_name()? != std::ffi::OsStr::new(name) {
            return None;
        }
        dir = dir.parent()?;
    }
    Some(dir.to_path_buf())
}

/// The parts of the environment discovery depends on.
#[derive(Debug, Clone)]
pub struct Env {
    /// The user's home directory (`HOME`, or `USERPROFILE` on Windows).
    pub home: PathBuf,
    /// The project directory: the working directory.
    pub project_dir: PathBuf,
    /// `APPDATA` (Windows roaming application data), if set.
    pub appdata: Option<PathBuf>,
    /// `XDG_CONFIG_HOME`, if set; otherwise `~/.config` is used.
    pub xdg_config_home: Option<PathBuf>,
    /// `CODEX_HOME`, if set; otherwise `~/.codex` is used.
    pub codex_home: Option<PathBuf>,
    /// `PATH`, to tell whether a wrapped entry's mcpwall command still resolves.
    pub path_var: Option<std::ffi::OsString>,
}

/// The environment could not tell where home is.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// Neither `HOME` nor `USERPROFILE` is set.
    #[error("cannot find your home directory: set HOME")]
    NoHome,
    /// The working directory is unreadable.
    #[error("cannot read the current directory: {0}")]
    NoCwd(#[source] std::io::Error),
}

impl Env {
    /// Read `HOME`, `APPDATA`, `XDG_CONFIG_HOME` and the working directory.
    pub fn from_process() -> Result<Env, EnvError> {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = var("HOME")
            .or_else(|| var("USERPROFILE"))
            .ok_or(EnvError::NoHome)?;
        let project_dir = std::env::current_dir().map_err(EnvError::NoCwd)?;
        Ok(Env {
            home,
            project_dir,
            appdata: var("APPDATA"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
            codex_home: var("CODEX_HOME"),
            path_var: std::env::var_os("PATH"),
        })
    }

    /// `~/.mcpwall`.
    pub fn mcpwall_dir(&self) -> PathBuf {
        self.home.join(".mcpwall")
    }

    fn config_home(&self) -> PathBuf {
        self.xdg_config_home
            .clone()
            .unwrap_or_else(|| self.home.join(".config"))
    }

    /// Every place a client file may be, whether or not it exists.
    pub fn candidates(&self) -> Vec<ConfigFile> {
        let home = &self.home;
        let project = &self.project_dir;
        let mac_support = home.join("Library").join("Application Support");
        let mut out = Vec::new();
        let mut add = |client, scope, path: PathBuf| {
            out.push(ConfigFile {
                client,
                path,
                scope,
            })
        };

        add(Client::ClaudeCode, Scope::User, home.join(".claude.json"));
        add(
            Client::ClaudeCode,
            Scope::Project,
            project.join(".mcp.json"),
        );

        let desktop = Path::new("Claude").join("claude_desktop_config.json");
        add(
            Client::ClaudeDesktop,
            Scope::User,
            mac_support.join(&desktop),
        );
        if let Some(appdata) = &self.appdata {
            add(Client::ClaudeDesktop, Scope::User, appdata.join(&desktop));
        }
        add(
            Client::ClaudeDesktop,
            Scope::User,
            self.config_home().join(&desktop),
        );

        add(
            Client::Cursor,
            Scope::User,
            home.join(".cursor").join("mcp.json"),
        );
        add(
            Client::Cursor,
            Scope::Project,
            project.join(".cursor").join("mcp.json"),
        );

        add(
            Client::Windsurf,
            Scope::User,
            home.join(".codeium")
                .join("windsurf")
                .join("mcp_config.json"),
        );

        add(
            Client::VsCode,
            Scope::Project,
            project.join(".vscode").join("mcp.json"),
        );
        let vscode_user = Path::new("Code").join("User").join("mcp.json");
        add(
            Client::VsCode,
            Scope::User,
            self.config_home().join(&vscode_user),
        );
        add(Client::VsCode, Scope::User, mac_support.join(&vscode_user));
        if let Some(appdata) = &self.appdata {
            add(Client::VsCode, Scope::User, appdata.join(&vscode_user));
        }

        let zed = Path::new("zed").join("settings.json");
        add(
            Client::Zed,
            Scope::Project,
            project.join(".zed").join("settings.json"),
        );
        add(Client::Zed, Scope::User, self.config_home().join(&zed));
        add(Client::Zed, Scope::User, home.join(".config").join(&zed));
        if let Some(appdata) = &self.appdata {
            add(
                Client::Zed,
                Scope::User,
                appdata.join("Zed").join("settings.json"),
            );
        }

        let codex_home = self
            .codex_home
            .clone()
            .unwrap_or_else(|| home.join(".codex"));
        add(
            Client::Codex,
            Scope::Project,
            project.join(".codex").join("config.toml"),
        );
        add(Client::Codex, Scope::User, codex_home.join("config.toml"));
        out
    }
}

/// The client files that exist, each once (a project inside home can make two candidates
/// name one file).
pub fn discover(env: &Env) -> Vec<ConfigFile> {
    let mut seen = HashSet::new();
    env.candidates()
        .into_iter()
        .filter(|file| file.path.is_file())
        .filter(|file| {
            let key = std::fs::canonicalize(&file.path).unwrap_or_else(|_| file.path.clone());
            seen.insert(key)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env {
            home: "/home/u".into(),
            project_dir: "/home/u/here".into(),
            appdata: None,
            xdg_config_home: None,
            codex_home: None,
            path_var: None,
        }
    }

    #[test]
    fn r24_recorded_files_know_their_project() {
        let env = env();
        let file = |client, path: &str| ConfigFile::recorded(client, path.into(), &env);
        let vscode = file(Client::VsCode, "/work/app/.vscode/mcp.json");
        assert_eq!(vscode.scope, Scope::Project);
        assert_eq!(vscode.project_dir(&env), Some("/work/app".into()));
        let claude = file(Client::ClaudeCode, "/work/app/.mcp.json");
        assert_eq!(claude.project_dir(&env), Some("/work/app".into()));
        // The same names under home are the user's files.
        assert_eq!(
            file(Client::Cursor, "/home/u/.cursor/mcp.json").scope,
            Scope::User
        );
        assert_eq!(
            file(Client::Codex, "/home/u/.codex/config.toml").scope,
            Scope::User
        );
        // A name that is not a project file's, or another client's.
        assert_eq!(
            file(Client::ClaudeCode, "/work/app/odd.json").scope,
            Scope::User
        );
        assert_eq!(
            file(Client::Cursor, "/work/app/.vscode/mcp.json").scope,
            Scope::User
        );
    }
}
