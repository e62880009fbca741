//! The server process's life: started in a process group of its own,
//! stopped by the spec's sequence, and stopped at the host's exit if
//! nobody closed it; how it ended, worded for an error (read without
//! reaping it: `exit_watch`).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio as Pipe};
use std::sync::{Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

use super::super::{Launch, Options};
use super::exit_watch::{exit_status_without_reaping, ChildEnd, ExitWatch};

/// The spec's shutdown: close stdin, wait, SIGTERM, wait, SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// Starts the server with all three pipes, in a process group of its own
/// (see the module's header), and remembers the group for the exit hook.
pub(super) fn spawn_in_group(options: &Options) -> std::io::Result<Child> {
    let mut command = match &options.launch {
        Launch::Shell(line) => {
            // argv[0] "sh", as system(3) gives it: the shell's own
            // messages then read as they do under the reference.
            let mut c = Command::new("/bin/sh");
            c.arg0("sh").arg("-c").arg(line);
            c
        }
        Launch::Argv(argv) => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
    };
    command.stdin(Pipe::piped()).stdout(Pipe::piped()).stderr(Pipe::piped()).process_group(0);
    for (key, value) in &options.env {
        command.env(key, value);
    }
    if let Some(dir) = &options.cwd {
        command.current_dir(dir);
    }
    let child = command.spawn()?;
    remember_group(child.id() as libc::pid_t);
    Ok(child)
}

/// Process groups of servers still running, for the exit hook, with the
/// process that started each (see `Stdio::owner`).
static LIVE_GROUPS: Mutex<Vec<(libc::pid_t, libc::pid_t)>> = Mutex::new(Vec::new());
static EXIT_HOOK: Once = Once::new();

pub(super) fn current_pid() -> libc::pid_t {
    // SAFETY: getpid(2) has no preconditions.
    unsafe { libc::getpid() }
}

fn remember_group(pgid: libc::pid_t) {
    EXIT_HOOK.call_once(|| {
        // SAFETY: registers a plain extern "C" function. The module stays
        // loaded until the process exits (`stay_loaded` in lib.rs), so the
        // hook never points into unloaded code.
        unsafe { libc::atexit(stop_groups_at_exit) };
    });
    LIVE_GROUPS.lock().unwrap_or_else(|p| p.into_inner()).push((pgid, current_pid()));
}

/// Called before the leader is reaped, so the exit hook never signals a
/// group id that may have been reused.
fn forget_group(pgid: libc::pid_t) {
    LIVE_GROUPS.lock().unwrap_or_else(|p| p.into_inner()).retain(|&(g, _)| g != pgid);
}

/// The host is exiting without having closed its clients (`os.exit()`
/// without closing the state). Nothing will reap these children; ask them
/// to stop, give them a second, then make sure.
extern "C" fn stop_groups_at_exit() {
    // Held to the end: a reaper thread still running cannot reap a leader
    // (and free its group id) meanwhile, since it forgets the group first.
    let live = LIVE_GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    let me = current_pid();
    let groups: Vec<libc::pid_t> = live.iter().filter(|&&(_, owner)| owner == me).map(|&(g, _)| g).collect();
    if groups.is_empty() {
        return;
    }
    for &g in &groups {
        signal_group(g, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline && groups.iter().any(|&g| exit_status_without_reaping(g).is_none()) {
        thread::sleep(Duration::from_millis(10));
    }
    for &g in &groups {
        signal_group(g, libc::SIGKILL);
    }
}

/// The spec's shutdown: stdin is closed already; wait, SIGTERM, wait,
/// SIGKILL, each wait bounded by [`GRACE`]. Then the rest of the group is
/// killed and the leader reaped.
pub(super) fn stop_group(child: &mut Child, exit: &ExitWatch) {
    let pgid = child.id() as libc::pid_t;
    if wait_for_exit(pgid, GRACE).is_none() {
        signal_group(pgid, libc::SIGTERM);
        if wait_for_exit(pgid, GRACE).is_none() {
            signal_group(pgid, libc::SIGKILL);
        }
    }
    // The leader is a zombie now (we have not reaped it), so its group id
    // cannot have been reused: whatever is left in the group (a grandchild
    // that outlived its wrapper) is ours to end.
    signal_group(pgid, libc::SIGKILL);
    forget_group(pgid);
    // After SIGKILL the leader is gone at once, so these waits are short.
    exit.finish();
    let _ = child.wait();
}

fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals a process group; it has
    // no memory effects on this process.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// How the child ended, for an error's code, waiting up to `within` for
/// it to end: its exit status, "signal N", or "-1" when that is not known.
pub(super) fn exit_code(pid: Option<libc::pid_t>, within: Duration) -> String {
    match pid.and_then(|pid| wait_for_exit(pid, within)) {
        Some(ChildEnd::Exited(code)) => code.to_string(),
        Some(ChildEnd::Killed(sig)) => format!("signal {sig}"),
        None => "-1".into(),
    }
}

fn wait_for_exit(pid: libc::pid_t, within: Duration) -> Option<ChildEnd> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(end) = exit_status_without_reaping(pid) {
            return Some(end);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}
