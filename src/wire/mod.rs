//! The wire under every HTTP request this module makes: the session's
//! (`transport::http`) and the login's (`auth`).
//!
//! Every HTTP wait must be interruptible by Ctrl-C and bounded. ureq waits
//! for input inside its own calls, where the host cannot take its thread
//! back (see `interrupt`); so each connection is ureq's own chain (proxy,
//! TCP, TLS) with its waits for input cut into slices on a Lua call's
//! thread. Between slices it asks `interrupt::requested` (and stops with
//! [`UserInterrupt`]) and whether this thread's pause time has come (and
//! stops with [`Pause`], which leaves the connection as it was).
//!
//! A session's POSTs to a plain `http://` URL go out on connections kept
//! here rather than through ureq (`kept`), on the same chain.
//!
//! Also here, because every agent is built with them: the trust settings
//! ([`tls_config`]) and a resolver that looks a server's name up once per
//! client ([`RememberingResolver`]); and because both users write them, the
//! names of the headers that go over it (`headers`).

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::tls::{parse_pem, PemItem, RootCerts, TlsConfig};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::time::Duration as WireDuration;
use ureq::unversioned::transport::{
    Buffers, ConnectProxyConnector, ConnectionDetails, Connector, NextTimeout, RustlsConnector, Transport as Wire,
};
use ureq::Agent;

use crate::error::{Error, Result};
use crate::interrupt;

pub(crate) mod headers;
mod kept;
mod tcp;

pub(crate) use kept::{KeptConnections, USER_AGENT};
pub(crate) use tcp::{last_socket, Socket};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Looks a server's name up once per client. ureq asks its resolver before
/// every request, even one that goes out on a pooled connection, and its
/// own resolver starts a thread for every lookup with a time limit (ours
/// all have one): a thread per call, even for 127.0.0.1. An address
/// given as numbers needs no lookup at all; a name is looked up again
/// after a request could not connect (see `transport::http::Shared::failed`).
#[derive(Debug, Default)]
pub(crate) struct RememberingResolver {
    known: Mutex<Option<KnownAddress>>,
    lookup: DefaultResolver,
}

/// The addresses the last URL's scheme and authority resolved to.
#[derive(Debug)]
struct KnownAddress {
    scheme: String,
    authority: String,
    addrs: ResolvedSocketAddrs,
}

impl RememberingResolver {
    pub(crate) fn forget(&self) {
        *lock(&self.known) = None;
    }
}

/// The one resolver both of a client's agents share.
#[derive(Debug, Clone)]
pub(crate) struct SharedResolver(pub(crate) Arc<RememberingResolver>);

impl Resolver for SharedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> std::result::Result<ResolvedSocketAddrs, ureq::Error> {
        let this = &self.0;
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return this.lookup.resolve(uri, config, timeout);
        };
        // Compared as the URL wrote them: making the `host:port` text
        // and parsing it was an allocation and 2,000 instructions of
        // every request.
        if let Some(known) = lock(&this.known).as_ref() {
            if known.scheme == scheme.as_str() && known.authority == authority.as_str() {
                return Ok(known.addrs.clone());
            }
        }
        let Some(host_port) = DefaultResolver::host_and_port(scheme, authority) else {
            return this.lookup.resolve(uri, config, timeout);
        };
        let addrs = match host_port.parse::<SocketAddr>() {
            Ok(addr) => {
                let mut addrs = self.empty();
                addrs.push(addr);
                addrs
            }
            Err(_) => this.lookup.resolve(uri, config, timeout)?,
        };
        let (scheme, authority) = (scheme.as_str().to_string(), authority.as_str().to_string());
        *lock(&this.known) = Some(KnownAddress { scheme, authority, addrs: addrs.clone() });
        Ok(addrs)
    }
}

/// What `SlicedWire` fails with when the host wants its thread back. A
/// type of our own rather than `ErrorKind::Interrupted`, which rustls and
/// `Read::read_to_end` retry as a mere signal.
#[derive(Debug)]
struct UserInterrupt;

impl std::fmt::Display for UserInterrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted by the user")
    }
}

impl std::error::Error for UserInterrupt {}

/// What `SlicedWire` fails with when this thread's [`PAUSE_AT`] comes.
/// The connection is left as it was: ureq's body reader hands the error
/// up and reads on at the next call.
#[derive(Debug)]
pub(crate) struct Pause;

impl std::fmt::Display for Pause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("paused")
    }
}

impl std::error::Error for Pause {}

thread_local! {
    /// When set, a wait for input on this thread stops at this instant
    /// with [`Pause`]. The Lua thread reads its reply stream only until
    /// the session wants its thread back (its `receive` deadline), and a
    /// stream read past its reply only so long.
    static PAUSE_AT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `body` with waits for input pausing at `at`.
pub(crate) fn pausing_at<T>(at: Instant, body: impl FnOnce() -> T) -> T {
    with_pause(Some(at), body)
}

/// Runs `body` without pausing: for a request of its own made while a
/// stream is read (an answer to the server), which must not be cut off.
pub(crate) fn never_pausing<T>(body: impl FnOnce() -> T) -> T {
    with_pause(None, body)
}

fn with_pause<T>(at: Option<Instant>, body: impl FnOnce() -> T) -> T {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            PAUSE_AT.set(self.0);
        }
    }
    let _restore = Restore(PAUSE_AT.replace(at));
    body()
}

/// Whether `err` is, or wraps, an error of type `E` (ureq's body reader
/// wraps its own errors in an `io::Error`).
fn wraps<E: std::error::Error + 'static>(err: &std::io::Error) -> bool {
    let Some(inner) = err.get_ref() else { return false };
    if inner.is::<E>() {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(inner);
    while let Some(e) = source {
        if e.is::<E>() || e.downcast_ref::<std::io::Error>().is_some_and(wraps::<E>) {
            return true;
        }
        if let Some(ureq::Error::Io(io)) = e.downcast_ref::<ureq::Error>() {
            if wraps::<E>(io) {
                return true;
            }
        }
        source = e.source();
    }
    false
}

/// Whether a request on a [`side_agent`] stopped for Ctrl-C.
pub fn interrupted(err: &ureq::Error) -> bool {
    matches!(err, ureq::Error::Io(e) if is_user_interrupt(e))
}

pub(crate) fn is_user_interrupt(err: &std::io::Error) -> bool {
    wraps::<UserInterrupt>(err)
}

pub(crate) fn is_pause(err: &std::io::Error) -> bool {
    wraps::<Pause>(err)
}

/// Trusts the bundled Mozilla roots, or only the PEM certificates given
/// (`opts.ca_file`).
pub(crate) fn tls_config(ca_pem: Option<&[u8]>) -> Result<TlsConfig> {
    let mut tls = TlsConfig::builder();
    if let Some(pem) = ca_pem {
        let certs: Vec<_> = parse_pem(pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(cert)) => Some(cert),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(Error::BadInput("mcp: opts.ca_file holds no PEM certificate".into()));
        }
        tls = tls.root_certs(RootCerts::from(certs));
    }
    Ok(tls.build())
}

/// An agent for requests beside the session's (authorization metadata,
/// token endpoints): the same trust and the same Ctrl-C slices, no
/// redirects followed (a token request redirected elsewhere would carry
/// its secrets along), no pooled connections kept.
pub fn side_agent(ca_pem: Option<&[u8]>, timeout: Duration) -> Result<Agent> {
    let config = Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_idle_connections(0)
        .user_agent(USER_AGENT)
        .timeout_global(Some(timeout))
        .tls_config(tls_config(ca_pem)?)
        .build();
    Ok(Agent::with_parts(config, sliced_connector(), DefaultResolver::default()))
}

/// ureq's own chain (proxy, TCP, TLS), its waits for input in slices: the
/// connector of every agent here.
pub(crate) fn sliced_connector() -> impl Connector {
    let chain = ().chain(ConnectProxyConnector::default()).chain(tcp::QuickAckTcp);
    Sliced(chain.chain(RustlsConnector::default()))
}

/// A connector whose connections wait for input in slices (see the module's
/// header), wrapped around the whole chain so that TLS never sees a slice end.
#[derive(Debug)]
struct Sliced<C>(C);

impl<In: Wire, C: Connector<In>> Connector<In> for Sliced<C> {
    type Out = SlicedWire<C::Out>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> std::result::Result<Option<Self::Out>, ureq::Error> {
        Ok(self.0.connect(details, chained)?.map(|wire| SlicedWire { wire, unsent: Vec::new() }))
    }
}

/// Also holds back what ureq transmits until it waits for input: ureq
/// writes a request's head and its body with a write each, and two small
/// segments cost the server two wake-ups (and us a system call) per
/// request; held back, they leave in one write.
#[derive(Debug)]
struct SlicedWire<T> {
    wire: T,
    unsent: Vec<u8>,
}

/// Bytes held back at most before they are sent anyway.
const HOLD_BACK_LIMIT: usize = 64 << 10;

impl<T: Wire> SlicedWire<T> {
    fn flush(&mut self, timeout: NextTimeout) -> std::result::Result<(), ureq::Error> {
        let mut sent = 0;
        while sent < self.unsent.len() {
            let buffer = self.wire.buffers().output();
            let n = buffer.len().min(self.unsent.len() - sent);
            buffer[..n].copy_from_slice(&self.unsent[sent..sent + n]);
            self.wire.transmit_output(n, timeout)?;
            sent += n;
        }
        self.unsent.clear();
        Ok(())
    }
}

impl<T: Wire> Wire for SlicedWire<T> {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.wire.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> std::result::Result<(), ureq::Error> {
        let output = self.wire.buffers().output();
        self.unsent.extend_from_slice(&output[..amount]);
        if self.unsent.len() >= HOLD_BACK_LIMIT {
            self.flush(timeout)?;
        }
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> std::result::Result<bool, ureq::Error> {
        if !self.unsent.is_empty() {
            self.flush(timeout)?;
        }
        let pause_at = PAUSE_AT.get();
        // Stream threads run no Lua call: one wait, however long.
        if !interrupt::watched() && pause_at.is_none() {
            return self.wire.await_input(timeout);
        }
        let start = Instant::now();
        loop {
            let left = timeout.after.saturating_sub(start.elapsed());
            let mut slice = left.min(interrupt::SLICE);
            let mut pausing = false;
            if let Some(at) = pause_at {
                let until = at.saturating_duration_since(Instant::now());
                if until <= slice {
                    // A zero wait would mean no limit at all to the socket.
                    if until.is_zero() {
                        return Err(ureq::Error::Io(std::io::Error::other(Pause)));
                    }
                    (slice, pausing) = (until, true);
                }
            }
            let last = slice == left && !timeout.after.is_not_happening() && !pausing;
            match self.wire.await_input(NextTimeout { after: WireDuration::Exact(slice), ..timeout }) {
                // The slice ended, not the wait: nothing was read.
                Err(ureq::Error::Timeout(_)) if !last => {
                    if interrupt::requested() {
                        return Err(ureq::Error::Io(std::io::Error::other(UserInterrupt)));
                    }
                    if pausing {
                        return Err(ureq::Error::Io(std::io::Error::other(Pause)));
                    }
                }
                other => return other,
            }
        }
    }

    fn is_open(&mut self) -> bool {
        self.wire.is_open()
    }

    fn is_tls(&self) -> bool {
        self.wire.is_tls()
    }
}
