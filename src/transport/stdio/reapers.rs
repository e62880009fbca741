//! Shutdowns moved off the Lua thread (a client dropped by the garbage
//! collector must not hold Lua for the seconds a shutdown can take), and
//! the wait for them when the Lua state closes, on every system.

use std::sync::Mutex;
use std::thread::{self, JoinHandle};

static REAPERS: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Runs a shutdown on a thread of its own, for [`join_reapers`] to wait for.
pub(super) fn reap_in_background(shutdown: impl FnOnce() + Send + 'static) {
    let reaper = thread::spawn(shutdown);
    REAPERS.lock().unwrap_or_else(|p| p.into_inner()).push(reaper);
}

/// Waits for every shutdown handed to the background. Called when the Lua
/// state closes, before the module's code is unloaded; each one ends within
/// the bounded shutdown sequence.
pub fn join_reapers() {
    let reapers = std::mem::take(&mut *REAPERS.lock().unwrap_or_else(|p| p.into_inner()));
    for r in reapers {
        let _ = r.join();
    }
}
