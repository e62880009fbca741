//! Async requests made while their session starts, or while a login runs
//! beside the holder (see `login`). Each waits in the client, in the
//! order it was made, and its handle holds a stand-in (see
//! [`Operation::queued_as`]) until the session is ready: then every
//! queued request goes out at once, whether or not its handle is being
//! looked at, and a handle takes its request back when next moved on. A
//! handshake or a login that fails settles them all with its error, the
//! one a blocking call would raise; `close` settles them as closed.

use std::collections::{HashMap, VecDeque};

use super::request::{Next, Operation};
use super::{Client, Host, Ticket};
use crate::error::Error;

/// The requests waiting for a session, and those sent since, until their
/// handles take them back.
#[derive(Default)]
pub(super) struct Queue {
    waiting: VecDeque<(u64, Operation, Next)>,
    sent: HashMap<u64, Operation>,
    numbered: u64,
    /// Requests settled here, with no reply whose arrival rang the
    /// client's descriptor (a failed handshake, `close`): the holder rings
    /// it once for them, so that an event loop takes them.
    settled_quietly: bool,
}

/// The session number a stand-in's ticket carries: no session has it, so
/// nothing of a session's is ever taken for it.
pub(super) const QUEUED: u64 = u64::MAX;

impl Client {
    /// Queues `op` until the session is ready, leaving in its place the
    /// stand-in its handle holds meanwhile.
    pub(super) fn enqueue(&mut self, op: &mut Operation, next: Next) {
        self.queue.numbered += 1;
        let number = self.queue.numbered;
        let stand_in = Operation::queued_as(number, op);
        let waiting = std::mem::replace(op, stand_in);
        self.queue.waiting.push_back((number, waiting, next));
    }

    /// The session is ready: every queued request goes out, in order. A
    /// request that fails on the way settles with its error; what a
    /// holder's callback raised meanwhile is the holder's to report.
    pub(super) fn send_queued<H: Host>(&mut self, host: &mut H) {
        // Only those queued so far: one that needs yet another session is
        // queued again behind them, for the next handshake.
        let waiting = std::mem::take(&mut self.queue.waiting);
        for (number, mut op, next) in waiting {
            let sent = match next {
                Next::Start => self.launch(host, &mut op),
                Next::Send => self.send(host, &mut op),
            };
            if let Err(raised) = sent {
                op.fail_in_queue(host.settle_error(&raised));
                self.queue.settled_quietly = true;
            }
            self.queue.sent.insert(number, op);
        }
    }

    /// Queued requests with nothing under way for them (their session
    /// died while a login ran) start a new one.
    pub(super) fn resume_queue<H: Host>(&mut self, host: &mut H) {
        let idle = !self.live() && self.connecting.is_none() && !self.logging_in();
        if idle && !self.queue.waiting.is_empty() {
            self.connect_detached(host);
        }
    }

    /// The handshake failed: every queued request settles with `error`.
    pub(super) fn fail_queued(&mut self, error: &Error) {
        self.settle_queued(|_| error.clone());
    }

    /// Every queued request settles as closed (`client:close`).
    pub(super) fn close_queued(&mut self) {
        self.settle_queued(|op| Error::Closed { what: op.what().to_string() });
    }

    fn settle_queued(&mut self, error: impl Fn(&Operation) -> Error) {
        for (number, mut op, _) in std::mem::take(&mut self.queue.waiting) {
            let error = error(&op);
            op.fail_in_queue(error);
            self.queue.sent.insert(number, op);
            self.queue.settled_quietly = true;
        }
    }

    /// Whether queued requests settled with nothing rung for them since
    /// the last call (see [`Queue::settled_quietly`]).
    pub fn take_settled_quietly(&mut self) -> bool {
        std::mem::take(&mut self.queue.settled_quietly)
    }

    /// The request behind stand-in `number` once it left the queue,
    /// without taking it.
    pub(super) fn peek_sent(&self, number: u64) -> Option<&Operation> {
        self.queue.sent.get(&number)
    }

    /// The request behind stand-in `number`, once it left the queue.
    pub(super) fn take_sent(&mut self, number: u64) -> Option<Operation> {
        self.queue.sent.remove(&number)
    }

    /// Takes the request behind stand-in `number` out of the queue, if
    /// it is still there (cancelled before it went out).
    pub(super) fn unqueue(&mut self, number: u64) -> bool {
        let before = self.queue.waiting.len();
        self.queue.waiting.retain(|(n, ..)| *n != number);
        self.queue.waiting.len() != before
    }

    /// Nobody will take the queued request `ticket` stands for.
    pub(super) fn forget_queued(&mut self, ticket: &Ticket) {
        let crate::protocol::IdKey::Int(number) = ticket.key else { return };
        let number = number as u64;
        self.unqueue(number);
        if let Some(mut op) = self.queue.sent.remove(&number) {
            if let Some(ticket) = op.take_ticket() {
                self.forget(&ticket);
            }
        }
    }
}
