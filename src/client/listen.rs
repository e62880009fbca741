//! Change notifications from a modern server. The 2026-07-28 revision
//! sends them only on a `subscriptions/listen` request the client keeps
//! open, saying in its filter what it wants: tool, prompt and resource
//! list changes, and updates of the resources it subscribed to
//! (`resources/subscribe` is gone). The client keeps one such listen per
//! session, asking for what it needs: the tool list once it has listed
//! it (a changed list is listed again before the next call, as on older
//! servers), prompt and resource lists when the holder listens for list
//! changes, and the URIs `client:subscribe` named. A listen is sent again
//! when more (or less) is wanted, after the server ended it, and on a new
//! session (a restarted server); one the server refuses is not asked for
//! again on that session. Notifications are matched to the listen by the
//! subscription id they carry (the listen's request id): those of a
//! listen given up are dropped.
//!
//! Over HTTP a replaced listen's stream is left to the server to end (or
//! to `close`); what it still brings is dropped by its id.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::{Client, Host, Operation, Request};
use crate::codec::Json;
use crate::protocol::{self, id_key};

/// A listen is renewed this often at least: it is a request with a time
/// limit like any other, just a long one.
const LISTEN_FOR: Duration = Duration::from_secs(24 * 3600);

/// How long a new listen's acknowledgement is waited for.
const ACKNOWLEDGEMENT_WAIT: Duration = Duration::from_secs(5);

pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// What a listen asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub uris: Vec<Vec<u8>>,
}

impl Filter {
    fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// The list changes it asks for, by their names in a filter.
    fn flags(&self) -> [(&'static str, bool); 3] {
        [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ]
    }

    fn params(&self) -> Json {
        let mut pairs = Vec::new();
        for (name, wanted) in self.flags() {
            if wanted {
                pairs.push((name, Json::Bool(true)));
            }
        }
        if !self.uris.is_empty() {
            pairs.push(("resourceSubscriptions", Json::Array(self.uris.iter().map(Json::str).collect())));
        }
        Json::object([("notifications", Json::object(pairs))])
    }

    /// What an acknowledgement's filter grants of this one, as the words
    /// of a warning for what it leaves out.
    fn refused_by(&self, granted: Option<&Json>) -> Vec<String> {
        let flag = |name: &str| granted.and_then(|g| g.get(name)) == Some(&Json::Bool(true));
        let mut refused = Vec::new();
        for (name, wanted) in self.flags() {
            if wanted && !flag(name) {
                refused.push(name.to_string());
            }
        }
        let subscribed: Vec<&Json> =
            granted.and_then(|g| g.get("resourceSubscriptions")).map(|u| u.elements().collect()).unwrap_or_default();
        for uri in &self.uris {
            if !subscribed.iter().any(|s| **s == Json::str(uri)) {
                refused.push(format!("updates of {}", String::from_utf8_lossy(uri)));
            }
        }
        refused
    }
}

/// The listen in flight.
pub(super) struct Listening {
    op: Operation,
    filter: Filter,
    /// Its request id, which its notifications carry as subscription id.
    id: Json,
    session: u64,
    /// The server ended it with `notifications/cancelled`.
    ended: bool,
    /// When it was sent: one ended soon after counts against the session.
    sent_at: Instant,
    /// The server acknowledged it: it is in place.
    acknowledged: bool,
}

/// What the client listens for.
#[derive(Default)]
pub(super) struct Subscriptions {
    listening: Option<Listening>,
    /// The URIs `client:subscribe` named, in order.
    uris: Vec<Vec<u8>>,
    /// A session whose server refused a listen.
    refused_on: Option<u64>,
    /// Listens sent: each has an id of its own, apart from `next_id`, as
    /// the probe's (the official clients do the same).
    sent: u64,
    /// The listen being replaced, whose notifications still count until
    /// it is cancelled.
    replaced: Option<Json>,
    /// Listens of this session that ended soon after they began: a server
    /// (or a proxy) that keeps doing that is not asked again.
    quick_ends: (u64, usize),
}

/// A listen that ends sooner than this after it began counts as a quick
/// end; [`QUICK_ENDS`] of them on one session end the listening there.
const QUICK_END: Duration = Duration::from_secs(5);
const QUICK_ENDS: usize = 3;

impl Subscriptions {
    /// Whether a notification goes on to the holder: one of a listen
    /// given up does not, nor the listen's own acknowledgement (checked
    /// here against what was asked). A server's end of the listen is
    /// noted, for it to be sent again.
    pub(super) fn admit(&mut self, msg: &Json, warn: &mut dyn FnMut(&str)) -> bool {
        let method = msg.get("method");
        let params = msg.get("params");
        if method == Some(&Json::str("notifications/cancelled")) {
            let ended = params.and_then(|p| p.get("requestId")).and_then(id_key);
            if let Some(l) = self.listening.as_mut().filter(|l| ended.is_some() && id_key(&l.id) == ended) {
                l.ended = true;
                return false;
            }
            return true;
        }
        let Some(subscription) = params.and_then(|p| p.get("_meta")).and_then(|m| m.get(SUBSCRIPTION_ID)) else {
            return true;
        };
        let from_replaced = self.replaced.as_ref().is_some_and(|r| id_key(r) == id_key(subscription));
        let Some(listening) = self.listening.as_mut().filter(|l| id_key(&l.id) == id_key(subscription)) else {
            return from_replaced;
        };
        if method == Some(&Json::str("notifications/subscriptions/acknowledged")) {
            listening.acknowledged = true;
            for refused in listening.filter.refused_by(params.and_then(|p| p.get("notifications"))) {
                warn(&format!("the server does not send {refused} (subscriptions/listen acknowledged without it)"));
            }
            return false;
        }
        true
    }
}

impl Client {
    /// `client:subscribe(uri)` on a modern server: the URI joins the
    /// listen's filter.
    pub(super) fn subscribe_uri(&mut self, uri: Vec<u8>) {
        if !self.subscriptions.uris.contains(&uri) {
            self.subscriptions.uris.push(uri);
        }
    }

    pub(super) fn unsubscribe_uri(&mut self, uri: &[u8]) {
        self.subscriptions.uris.retain(|u| u != uri);
    }

    /// What the client wants to hear of, as far as the server offers it.
    fn wanted<H: Host>(&self, host: &H) -> Filter {
        let capabilities = self.initialized.as_ref().and_then(|r| r.get("capabilities"));
        let offers = |kind: &str, flag: &str| {
            capabilities.and_then(|c| c.get(kind)).and_then(|k| k.get(flag)).is_some_and(Json::is_truthy)
        };
        let lists = host.listens_for_list_changes();
        Filter {
            tools: self.tools.listed && offers("tools", "listChanged"),
            prompts: lists && offers("prompts", "listChanged"),
            resources: lists && offers("resources", "listChanged"),
            uris: if offers("resources", "subscribe") { self.subscriptions.uris.clone() } else { Vec::new() },
        }
    }

    /// Keeps one listen open on a modern session for what the client
    /// wants: sent when there is none (or it ended, or its session did),
    /// sent again when what is wanted changed, and left alone otherwise.
    /// With `wait`, the acknowledgement is waited for (a blocking caller,
    /// whose next request must not overtake the listen); an async one or
    /// an event loop's turn goes on at once.
    pub(super) fn keep_listening<H: Host>(&mut self, host: &mut H, wait: bool) -> Result<(), H::Error> {
        if self.envelope.is_none() {
            return Ok(());
        }
        self.notice_listen_end(host)?;
        if self.subscriptions.refused_on == Some(self.session_number) {
            return Ok(());
        }
        let wanted = self.wanted(host);
        let current = self.subscriptions.listening.as_ref().map(|l| &l.filter);
        if current == Some(&wanted) || (current.is_none() && wanted.is_empty()) {
            return Ok(());
        }
        let old = self.subscriptions.listening.take();
        self.subscriptions.replaced = old.as_ref().map(|l| l.id.clone());
        if !wanted.is_empty() {
            self.subscriptions.sent += 1;
            let id = Json::str(format!("lua-mcp-listen-{}", self.subscriptions.sent));
            let message = protocol::request(id.clone(), "subscriptions/listen", wanted.params());
            let limits = super::Limits { timeout: Some(LISTEN_FOR), ..Default::default() };
            let request = Request::message(message, Rc::from("subscriptions/listen")).limits(limits).detached();
            let op = self.start(host, request)?;
            let session = self.session_number;
            let sent_at = Instant::now();
            let listening = Listening { op, filter: wanted, id, session, ended: false, acknowledged: false, sent_at };
            self.subscriptions.listening = Some(listening);
            if wait {
                self.await_acknowledgement(host)?;
            }
        }
        if let Some(mut old) = old {
            self.cancel(host, &mut old.op, "the client listens for something else now");
            if let Some(ticket) = old.op.ticket() {
                self.forget(ticket);
            }
        }
        self.subscriptions.replaced = None;
        Ok(())
    }

    /// Waits (up to [`ACKNOWLEDGEMENT_WAIT`]) for the server to say the
    /// listen is in place: over HTTP the listen goes out on a connection
    /// of its own, and a request sent right after it could reach the
    /// server first, and change what the listen was to hear of before it
    /// was heard (a Python SDK server was seen to do that).
    fn await_acknowledgement<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        let until = std::time::Instant::now() + ACKNOWLEDGEMENT_WAIT;
        loop {
            let waiting = self.subscriptions.listening.as_ref().is_some_and(|l| !l.acknowledged && !l.ended);
            let now = std::time::Instant::now();
            if !waiting || now >= until {
                return Ok(());
            }
            let ticket = self.subscriptions.listening.as_ref().and_then(|l| l.op.ticket().cloned());
            let settled = ticket.is_none_or(|t| self.ticket_settled(&t));
            if settled {
                return Ok(());
            }
            self.pump(host, until.min(now + crate::interrupt::SLICE))?;
        }
    }

    /// A listen that ended (the server's result or cancellation, a drop,
    /// its session's end) is let go, to be sent again; one the server
    /// refused is not asked for again on this session.
    fn notice_listen_end<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        let Some(mut listening) = self.subscriptions.listening.take() else { return Ok(()) };
        let settled = listening.session != self.session_number || self.poll(host, &mut listening.op)?;
        if !settled && !listening.ended {
            self.subscriptions.listening = Some(listening);
            return Ok(());
        }
        if listening.ended {
            self.cancel(host, &mut listening.op, "the server ended the subscription");
        }
        if listening.session == self.session_number && listening.sent_at.elapsed() < QUICK_END {
            let (session, ends) = &mut self.subscriptions.quick_ends;
            if *session != self.session_number {
                *session = self.session_number;
                *ends = 0;
            }
            *ends += 1;
            if *ends >= QUICK_ENDS {
                self.subscriptions.refused_on = Some(self.session_number);
                host.warn(&format!(
                    "no change notifications from this server: it ended {QUICK_ENDS} listens within {} s of their start",
                    QUICK_END.as_secs()
                ));
            }
        }
        // Its whole reply is the outcome: an error in it is a refusal.
        if let Some(Ok(reply)) = listening.op.take_outcome() {
            if let Some(error) = reply.get("error").filter(|e| e.is_truthy()) {
                let refusal = crate::server_text::bounded(protocol::rpc_error(error, "subscriptions/listen"));
                self.subscriptions.refused_on = Some(self.session_number);
                host.warn(&format!("no change notifications from this server: {refusal}"));
            }
        }
        if let Some(ticket) = listening.op.ticket() {
            self.forget(ticket);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode, encode};

    #[test]
    fn a_filter_asks_for_what_is_wanted_and_names_what_an_acknowledgement_left_out() {
        let filter = Filter { tools: true, prompts: false, resources: true, uris: vec![b"memo://a".to_vec()] };
        let params = String::from_utf8(encode(&filter.params())).unwrap();
        assert_eq!(
            params,
            r#"{"notifications":{"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["memo://a"]}}"#
        );
        let granted = decode(br#"{"toolsListChanged":true}"#).unwrap();
        assert_eq!(filter.refused_by(Some(&granted)), vec!["resourcesListChanged", "updates of memo://a"]);
    }
}
