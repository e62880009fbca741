//! Noticing, while we wait, that the host wants its Lua thread back.
//!
//! lua5.4's Ctrl-C handler does not interrupt C code: it sets a debug hook
//! on the state and waits for Lua code to run, which it does only once the
//! native call returns. A call that waits 60 s for a server keeps the
//! user's Ctrl-C waiting as long. So every wait on a server runs in slices
//! of [`SLICE`], and between slices asks [`requested`]; the binding answers
//! by looking for a hook that was not there when the call began. The core
//! knows nothing of Lua: it only sees a yes or no. The same answer ends a
//! call whose Lua callback raised ([`request`]), and is held at no while
//! the cancellation of an interrupted request still goes out
//! ([`shielded`]).

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long a wait goes without asking. Ctrl-C is noticed within this; a
/// reply that arrives meanwhile still wakes the wait at once.
pub const SLICE: Duration = Duration::from_millis(50);

/// The check of the innermost [`watching`], lent by it for as long as it
/// runs: a boxed check was an allocation of every call.
type Check = *const (dyn Fn() -> bool + 'static);

thread_local! {
    static CHECK: Cell<Option<Check>> = const { Cell::new(None) };
    /// Set by [`request`]: the current call is to end as if interrupted.
    static REQUESTED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `body` with `check` answering [`requested`] on this thread. Nested
/// calls (a callback that calls the client again) restore the outer check.
pub fn watching<T>(check: &dyn Fn() -> bool, body: impl FnOnce() -> T) -> T {
    struct Restore(Option<Check>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CHECK.with(|c| c.set(self.0));
            REQUESTED.with(|r| r.set(self.1));
        }
    }
    // SAFETY: only `requested` calls through the pointer, on this thread,
    // and only until `Restore` puts the outer check back, which it does
    // before this function returns or unwinds; `check` outlives this call.
    let lent = unsafe { std::mem::transmute::<*const (dyn Fn() -> bool + '_), Check>(check) };
    let _restore = Restore(CHECK.with(|c| c.replace(Some(lent))), REQUESTED.with(|r| r.replace(false)));
    body()
}

/// Ends the waits of the current call as Ctrl-C would, whatever the
/// host's hook says: for an error raised in a Lua callback, which must
/// reach the caller (it may be the host's own interrupt, raised by its
/// hook while the callback ran and so never seen by [`requested`]).
pub fn request() {
    REQUESTED.with(|r| r.set(true));
}

/// Whether this thread runs a Lua call that can be interrupted: waits on
/// other threads need no slices.
pub fn watched() -> bool {
    CHECK.with(|c| c.get().is_some())
}

/// Runs `body` where [`requested`] answers no: for what must still go out
/// after an interruption (the cancellation of the interrupted request).
pub fn shielded<T>(body: impl FnOnce() -> T) -> T {
    watching(&|| false, body)
}

/// Whether the host asked for its thread back. Always false on threads
/// that are not running a Lua call (readers, stream threads).
pub fn requested() -> bool {
    // SAFETY: a lent check is alive while it is in the slot (see `watching`).
    REQUESTED.with(Cell::get) || CHECK.with(Cell::get).is_some_and(|check| unsafe { (*check)() })
}

/// A deadline for a timeout too long to add to now: never, in practice.
/// A century from the first time it is asked for, kept: every blocking
/// call waits until it, and reading the clock for it cost one of the
/// call's reads.
pub fn far_future() -> Instant {
    static FAR: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *FAR.get_or_init(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600))
}
