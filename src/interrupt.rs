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

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

/// How long a wait goes without asking. Ctrl-C is noticed within this; a
/// reply that arrives meanwhile still wakes the wait at once.
pub const SLICE: Duration = Duration::from_millis(50);

type Check = Box<dyn Fn() -> bool>;

thread_local! {
    static CHECK: RefCell<Option<Check>> = const { RefCell::new(None) };
    /// Set by [`request`]: the current call is to end as if interrupted.
    static REQUESTED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `body` with `check` answering [`requested`] on this thread. Nested
/// calls (a callback that calls the client again) restore the outer check.
pub fn watching<T>(check: Check, body: impl FnOnce() -> T) -> T {
    struct Restore(Option<Check>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            CHECK.with(|c| *c.borrow_mut() = outer);
            REQUESTED.with(|r| r.set(self.1));
        }
    }
    let _restore = Restore(CHECK.with(|c| c.borrow_mut().replace(check)), REQUESTED.with(|r| r.replace(false)));
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
    CHECK.with(|c| c.borrow().is_some())
}

/// Runs `body` where [`requested`] answers no: for what must still go out
/// after an interruption (the cancellation of the interrupted request).
pub fn shielded<T>(body: impl FnOnce() -> T) -> T {
    watching(Box::new(|| false), body)
}

/// Whether the host asked for its thread back. Always false on threads
/// that are not running a Lua call (readers, stream threads).
pub fn requested() -> bool {
    REQUESTED.with(Cell::get) || CHECK.with(|c| c.borrow().as_ref().is_some_and(|check| check()))
}

/// A deadline for a timeout too long to add to now: never, in practice.
/// A century from the first time it is asked for, kept: every blocking
/// call waits until it, and reading the clock for it cost one of the
/// call's reads.
pub fn far_future() -> Instant {
    static FAR: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *FAR.get_or_init(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600))
}
