//! The tool list kept fresh: a list the server said changed is listed
//! again before the next tool call goes out (its schemas may have changed
//! with it), by the client itself beside an event loop, and at once for a
//! host that judges a run by what the tool is now (mount's `approve`). A
//! listing of a changed list counts as a refresh whoever asked for it, so
//! that watched registries follow it.

use std::rc::Rc;

use super::super::{Client, Host, Listing};
use super::{Request, Shape};
use crate::codec::Json;
use crate::error::Error;
use crate::interrupt::far_future;

impl Client {
    /// The tool list as the server now describes it, for a host that
    /// decides about a run by what the tool is now (mount's `approve`):
    /// what the server sent is routed first, and a list that a change
    /// notice made stale is listed again and waited for. Without it, a
    /// tool re-listed as destructive was approved by the annotations it
    /// had when it was mounted.
    pub fn current_tools<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.session.is_none() {
            return Ok(());
        }
        self.route_queued(host, "tools/list")?;
        if !(self.tools.stale && self.tools.listed) {
            return Ok(());
        }
        self.begin_refresh(host)?;
        if let Some(mut refresh) = self.tools.refreshing.take() {
            let waited = self.wait(host, &mut refresh, far_future());
            self.tools.refreshing = Some(refresh);
            waited?;
        }
        self.poll_refresh(host)
    }

    /// Lists a stale tool list again, without waiting: started if it is
    /// stale and none runs, moved on if one runs (an event loop's
    /// registry then follows the server without waiting for a call).
    pub fn refresh_tools<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.tools.stale && self.tools.listed && self.tools.refreshing.is_none() {
            self.begin_refresh(host)?;
        }
        self.poll_refresh(host)?;
        // A modern server's changes come on a listen: kept open here too,
        // without waiting for its acknowledgement (an event loop's turn).
        if self.session.is_some() {
            self.keep_listening(host, false)?;
        }
        Ok(())
    }

    /// A listing of the tools finished.
    /// A listing of a list the server said had changed counts as a
    /// refresh whoever asked for it: the host's own `discover` after the
    /// notice must move watched registries on as the client's would.
    pub(super) fn listed(&mut self, pages: &[Json], refreshed: bool) {
        self.learn_tools(pages);
        let refreshed = refreshed || (self.tools.stale && self.tools.listed);
        self.tools.listed = true;
        self.tools.stale = false;
        self.tools.fresh = Some(Listing { pages: pages.to_vec(), refreshed });
    }

    pub(super) fn begin_refresh<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.tools.refreshing.is_some() {
            return Ok(());
        }
        let request = Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list"))
            .shape(Shape::Tools { refresh: true })
            .asynchronous();
        let op = self.start(host, request)?;
        self.tools.refreshing = Some(Box::new(op));
        Ok(())
    }

    /// Moves the running refresh on; when it settles, the calls waiting
    /// for it go on (or fail with its error). A refresh that failed
    /// leaves the list stale, to be tried again.
    pub(super) fn poll_refresh<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        let Some(mut op) = self.tools.refreshing.take() else { return Ok(()) };
        let polled = self.poll(host, &mut op);
        if let Ok(false) = polled {
            self.tools.refreshing = Some(op);
            return Ok(());
        }
        let outcome = op.take_outcome().unwrap_or_else(|| Err(Error::NoResponse { what: "tools/list".into() }));
        self.tools.last_refresh = Some(outcome.map(|_| ()));
        self.tools.refreshes += 1;
        polled.map(|_| ())
    }
}
