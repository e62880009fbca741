//! A deadline kept by a thread, for bells whose system gives them no
//! timer that an event loop could poll (the pipe bell of the other
//! Unixes, Windows' socket bell): the thread sleeps until the deadline,
//! which may move meanwhile, rings, and waits for the next one. Started
//! with the first deadline; ended and joined with the bell.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(super) struct DeadlineThread {
    timer: Arc<Timer>,
    keeper: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Timer {
    state: Mutex<TimerState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct TimerState {
    deadline: Option<Instant>,
    closing: bool,
}

impl DeadlineThread {
    /// `ring` after `delay`, or never for None; the thread starts with the
    /// first deadline and keeps the first `ring` it is given.
    pub(super) fn set(&self, delay: Option<Duration>, ring: impl Fn() + Send + 'static) {
        let mut state = self.timer.state.lock().unwrap_or_else(|p| p.into_inner());
        state.deadline = delay.map(|d| Instant::now() + d);
        drop(state);
        self.timer.changed.notify_one();
        if delay.is_some() {
            let mut keeper = self.keeper.lock().unwrap_or_else(|p| p.into_inner());
            if keeper.is_none() {
                let timer = self.timer.clone();
                *keeper =
                    thread::Builder::new().name("mcp-deadline".into()).spawn(move || keep_time(&ring, &timer)).ok();
            }
        }
    }

    /// In a forked child, which has the handle but not the thread.
    #[cfg(unix)]
    pub(super) fn forget(&self) {
        std::mem::forget(self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

/// Sleeps until the deadline (which may move meanwhile), rings, and waits
/// for the next one.
fn keep_time(ring: &impl Fn(), timer: &Timer) {
    let mut state = timer.state.lock().unwrap_or_else(|p| p.into_inner());
    while !state.closing {
        state = match state.deadline {
            None => timer.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
            Some(at) if Instant::now() >= at => {
                state.deadline = None;
                ring();
                state
            }
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                timer.changed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0
            }
        };
    }
}

impl Drop for DeadlineThread {
    fn drop(&mut self) {
        self.timer.state.lock().unwrap_or_else(|p| p.into_inner()).closing = true;
        self.timer.changed.notify_one();
        if let Some(keeper) = self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = keeper.join();
        }
    }
}
