//! One process-wide signal that something arrived for some client: a
//! message queued in any inbox, a login's question, a reply settled on
//! another thread. A Lua call waiting on handles of several clients
//! (`mcp.wait_all`, `mcp.wait_any`) sleeps here, and then looks at each
//! client, rather than polling one descriptor per client: armed bells
//! cost three descriptors each and were kept, so 200 clients waited on
//! together ran out of the default 1024 before any of them was
//! dispatched.
//!
//! What it costs the hot path: every [`announce`] is one atomic add and
//! one atomic load; the lock and the wake-up are paid only while someone
//! waits. A waiter may be woken by another client's traffic; it then
//! looks at its own clients, finds nothing, and sleeps again.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

static ARRIVALS: AtomicU64 = AtomicU64::new(0);
static WAITERS: AtomicUsize = AtomicUsize::new(0);
static LOCK: Mutex<()> = Mutex::new(());
static ARRIVED: Condvar = Condvar::new();

/// Something was queued for a Lua thread to look at.
pub fn announce() {
    ARRIVALS.fetch_add(1, Ordering::SeqCst);
    if WAITERS.load(Ordering::SeqCst) > 0 {
        // Taken so that a waiter between its check and its sleep cannot
        // miss the wake-up.
        let _held = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        ARRIVED.notify_all();
    }
}

/// A mark to wait past: read it before looking at the clients, so that
/// what arrives while they are looked at ends the next wait at once.
pub fn mark() -> u64 {
    ARRIVALS.load(Ordering::SeqCst)
}

/// Sleeps until something is announced after `mark` was read, or until
/// `until`.
pub fn wait_past(mark: u64, until: Instant) {
    WAITERS.fetch_add(1, Ordering::SeqCst);
    let mut held = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let now = Instant::now();
        if ARRIVALS.load(Ordering::SeqCst) != mark || now >= until {
            break;
        }
        held = ARRIVED.wait_timeout(held, until - now).unwrap_or_else(|p| p.into_inner()).0;
    }
    drop(held);
    WAITERS.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_announcement_after_the_mark_ends_the_wait_at_once() {
        let mark = mark();
        announce();
        let begun = Instant::now();
        wait_past(mark, begun + Duration::from_secs(5));
        assert!(begun.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_wait_is_woken_from_another_thread_and_otherwise_runs_to_its_end() {
        let mark = mark();
        let announcer = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(30));
            announce();
        });
        let begun = Instant::now();
        wait_past(mark, begun + Duration::from_secs(5));
        assert!(begun.elapsed() < Duration::from_secs(2));
        announcer.join().unwrap();
        let quiet = Instant::now();
        // Other tests announce too: wait past a mark taken now, briefly.
        wait_past(super::mark(), quiet + Duration::from_millis(20));
    }
}
