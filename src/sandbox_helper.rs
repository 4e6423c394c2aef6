//! `mcpwall-sandbox`: the sandbox helper as a binary of its own.
//!
//! mcpwall starts every server through the helper ([`mcpwall::sandbox::helper`]), which
//! restricts itself and then execs the server. Re-executing mcpwall itself for that costs
//! loading a large program once more (0.84 ms of a 3 ms start on the shared bench); this
//! binary holds only the helper, so the start pays for a small one. mcpwall uses it when it
//! is installed beside it (`cargo install` installs both) and re-executes itself otherwise.

fn main() -> std::process::ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match argv.get(1) {
        Some(arg) if *arg == *mcpwall::sandbox::helper::ARG => {
            mcpwall::sandbox::helper::main(&argv[2..])
        }
        _ => {
            eprintln!(
                "mcpwall-sandbox: mcpwall starts this program itself, with its own arguments \
                 ({} {}); it is not run by hand",
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION")
            );
            std::process::ExitCode::from(2)
        }
    }
}
