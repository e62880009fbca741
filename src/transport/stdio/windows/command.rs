//! How a server's command becomes a Windows process: a string runs
//! through `cmd.exe /d /s /c`, as the reference's `os.execute` does; an
//! argv runs its program directly, found the way cmd.exe finds one.
//!
//! std's `Command` looks for `NAME.exe` on PATH and no further, so
//! `{ "npx", ... }` would not find `npx.cmd`, the form in which npm
//! installs every command on Windows. So the program is resolved here:
//! a name with a directory is used as given; any other is looked for in
//! each PATH entry, with each of PATHEXT's extensions (or as given when
//! it already has one). Not in the working directory, which cmd.exe
//! searches first: an editor starting `{ "npx", ... }` inside a project it
//! does not trust would run that project's own `npx.cmd`. (A string
//! command is cmd.exe's to resolve, and it still looks there first.) A `.cmd`
//! or `.bat` found that way is handed to std, which runs it through
//! cmd.exe with the quoting batch files need and refuses an argument
//! cmd.exe would read as more commands (`"&"`, `"|"`, a `"%VAR%"`), with
//! an error that says so.

use std::ffi::OsString;
use std::os::windows::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::super::{Launch, Options};

/// The command for `options.launch`, with its environment and directory.
pub(super) fn command(options: &Options) -> std::io::Result<Command> {
    let mut command = match &options.launch {
        Launch::Shell(line) => {
            // `/s /c "line"`: cmd.exe strips the outer quotes and runs the
            // line as typed, which is what `os.execute(line)` does.
            let mut c = Command::new(system_cmd());
            c.raw_arg(format!("/d /s /c \"{line}\""));
            c
        }
        Launch::Argv(argv) => {
            let path = options.env.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case("PATH")).map(|(_, v)| v.into());
            let program = resolve(&argv[0], path)?;
            let mut c = Command::new(program);
            c.args(&argv[1..]);
            c
        }
    };
    for (key, value) in &options.env {
        command.env(key, value);
    }
    if let Some(dir) = &options.cwd {
        command.current_dir(dir);
    }
    Ok(command)
}

/// cmd.exe from the system directory, not whatever a PATH entry or the
/// working directory holds under that name.
fn system_cmd() -> PathBuf {
    let root = std::env::var_os("SystemRoot").unwrap_or_else(|| "C:\\Windows".into());
    Path::new(&root).join("System32").join("cmd.exe")
}

/// Where `name` is on PATH, as cmd.exe would find it there; NotFound
/// with the name when nowhere.
pub(super) fn resolve(name: &str, path: Option<OsString>) -> std::io::Result<PathBuf> {
    let given = Path::new(name);
    if given.components().count() > 1 || given.is_absolute() {
        return Ok(given.to_path_buf());
    }
    let path = path.or_else(|| std::env::var_os("PATH")).unwrap_or_default();
    let extensions = extensions(name);
    for dir in std::env::split_paths(&path) {
        for ext in &extensions {
            let candidate = dir.join(format!("{name}{ext}"));
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{name} was not found on PATH (with PATHEXT's extensions; the working directory is not searched)"),
    ))
}

/// The endings to try: none when the name has one PATHEXT lists, else
/// each of PATHEXT's (cmd.exe's default list when it is unset).
fn extensions(name: &str) -> Vec<String> {
    let pathext = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
    let listed: Vec<String> = pathext.split(';').filter(|e| !e.is_empty()).map(str::to_ascii_lowercase).collect();
    let lower = name.to_ascii_lowercase();
    if listed.iter().any(|e| lower.ends_with(e.as_str())) {
        return vec![String::new()];
    }
    listed
}
