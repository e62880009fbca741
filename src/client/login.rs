//! Logins that run beside the holder. A refusal (401, or 403 asking for
//! more scope) of an async request begins the holder's login without
//! waiting for it: the request, and every async request made while the
//! login runs, waits in the queue (see `queue`) and goes out under the
//! new credentials once it ends; a login that fails settles them with
//! the refusal or the login's own error, as a blocking call would raise
//! it. A blocking request that meets a login under way waits for it
//! rather than starting another.

use std::time::Instant;

use super::{Client, Host};
use crate::error::Error;

impl Client {
    /// Begins the holder's login for `refusal`, unless one runs already;
    /// false when the holder has none.
    pub(super) fn begin_login<H: Host>(
        &mut self,
        host: &mut H,
        refusal: &Error,
        again: bool,
    ) -> Result<bool, H::Error> {
        if self.login.is_some() {
            return Ok(true);
        }
        if !host.begin_login(refusal, again)? {
            return Ok(false);
        }
        self.login = Some(refusal.clone());
        self.login_failure = None;
        Ok(true)
    }

    /// Whether a login runs beside the holder.
    pub(super) fn logging_in(&self) -> bool {
        self.login.is_some()
    }

    /// Moves a login on (the holder answers what it asks) and, once it
    /// has ended, what waited for it: new credentials send the queued
    /// requests again; a failed login settles them.
    pub(super) fn poll_login<H: Host>(&mut self, host: &mut H) {
        let Some(refusal) = self.login.as_ref() else { return };
        let failure = match host.login_ended() {
            Ok(None) => return,
            Ok(Some(true)) => None,
            Ok(Some(false)) => Some(refusal.clone()),
            Err(raised) => Some(host.settle_error(&raised)),
        };
        self.login = None;
        match failure {
            // A handshake that waited for the login begins again as it
            // is moved on (see `Client::connection_step`).
            None => {
                self.credentials += 1;
                if self.live() {
                    self.send_queued(host);
                }
            }
            Some(error) => {
                self.fail_queued(&error);
                self.login_failure = Some(error);
            }
        }
    }

    /// Waits for a login under way to end: a blocking request does not
    /// start a second one, and gets the error of one that failed. Ctrl-C
    /// ends the wait (the login goes on).
    pub(super) fn await_login<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.login.is_none() {
            return Ok(());
        }
        while self.login.is_some() {
            if crate::interrupt::requested() {
                return Err(Error::Interrupted { what: "login".into() }.into());
            }
            self.poll_login(host);
            if self.login.is_some() {
                let until = Instant::now() + crate::interrupt::SLICE;
                match self.session.as_mut() {
                    Some(_) => {
                        self.pump(host, until)?;
                    }
                    None => std::thread::sleep(until.saturating_duration_since(Instant::now())),
                }
            }
        }
        match self.login_failure.clone() {
            Some(failure) => Err(failure.into()),
            None => Ok(()),
        }
    }
}
