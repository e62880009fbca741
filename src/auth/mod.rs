//! Logging in to an MCP server behind OAuth 2.1, as the MCP authorization
//! spec lays it out: when the server refuses a request (401, or 403 for
//! want of scope), find who issues its tokens (`discovery`), get a client
//! identity there, get a token (a user's login with PKCE, or a machine's
//! own credentials), keep it (`store`), and put it where every HTTP
//! request reads it (the transport's bearer cell). The session core then
//! sends the refused request again.
//!
//! An [`Authorizer`] runs where its holder puts it: on the Lua thread
//! for a blocking request, or on a thread of its own for an async one
//! (`binding::login`), with what is Lua's (`authorize`, a store of Lua
//! functions) reached through the [`User`] and [`Store`] traits either
//! way. Its waits (each request, the loopback listener) honour Ctrl-C the
//! way the transport's do.
//!
//! One file per job: `issuer` (whose tokens, and the checks that keep a
//! login from being steered), `registration` (who the client is there),
//! `grants` (how a token is got), `tokens` (the store, refresh, the token
//! endpoint); `discovery`, `loopback`, `pkce`, `assertion`, `plain_http`
//! and `store` below them.
//!
//! What the conformance suite's servers do, and a real server may too:
//! * the refusal of `initialize` is the usual first contact, so the
//!   login happens inside the handshake;
//! * a 403 asking for scope we already asked for will never be met by
//!   asking again (a server can say so for ever): only new scope is
//!   worth a second login;
//! * a 2025-03-26 server has no protected-resource metadata and may serve
//!   authorization-server metadata whose issuer is not its origin, so
//!   the issuer is checked only against a protected resource's word.

pub mod assertion;
pub mod discovery;
pub mod dpop;
mod grants;
mod issuer;
pub mod loopback;
pub mod pkce;
pub mod plain_http;
mod registration;
pub mod store;
mod tokens;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use p256::ecdsa::SigningKey;
use ureq::Agent;
use url::Url;

use crate::error::{Error, Result};
use crate::wire::side_agent;
use discovery::{parse_challenge, Challenge};
use plain_http::{may_carry_login, HTTPS_REQUIRED};
use store::Store;

/// How a token is got.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Grant {
    /// A user logs in in a browser (authorization code with PKCE).
    AuthorizationCode,
    /// A machine uses its own credentials: a secret or a signing key.
    ClientCredentials,
    /// The user's enterprise identity provider vouches for them
    /// (cross-app access): see [`Authorizer::identity_assertion`].
    IdentityAssertion,
    /// A workload presents the identity token its platform gave it (RFC
    /// 7523's JWT-bearer grant; workload identity federation, SEP-1933).
    JwtBearer,
}

/// The enterprise identity provider of cross-app access.
#[derive(Clone)]
pub struct IdentityProvider {
    pub token_endpoint: String,
    /// The user's ID token from that provider.
    pub id_token: String,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

/// `opts.auth`, read by the binding.
pub struct Settings {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// A Client ID Metadata Document's URL, used as the client id where
    /// the authorization server supports that.
    pub client_metadata_url: Option<String>,
    pub client_name: String,
    /// Where the browser is sent back; a loopback `http` address is
    /// listened on (port 0: any free one).
    pub redirect_uri: String,
    pub grant: Grant,
    /// `private_key_jwt`: the machine's key.
    pub signing_key: Option<SigningKey>,
    /// Cross-app access: the identity provider.
    pub identity: Option<IdentityProvider>,
    /// The JWT-bearer grant: the workload's identity token.
    pub assertion: Option<String>,
    /// The only authorization server credentials may go to.
    pub issuer: Option<String>,
    /// How long a user's login may take.
    pub login_timeout: Duration,
    /// Each request to the authorization server.
    pub timeout: Duration,
    pub ca_pem: Option<Vec<u8>>,
    /// DPoP (`opts.auth.dpop`): the key tokens are asked to be bound to,
    /// shared with the transport, which proves each request with it.
    pub dpop: Option<Arc<dpop::Proofs>>,
}

/// The default redirect URI: loopback, any free port.
pub const DEFAULT_REDIRECT_URI: &str = "http://127.0.0.1/callback";

/// A token about to expire within this is refreshed before a request
/// rather than after the server refuses it.
const REFRESH_MARGIN_SECONDS: i64 = 60;

/// How long a failed refresh before a call rests before the next try.
const REFRESH_BACKOFF: Duration = Duration::from_secs(60);

/// The scope that asks for a refresh token (SEP-2207): requested only
/// where the authorization server lists it.
const OFFLINE_ACCESS: &str = "offline_access";

/// The person at the keyboard, or whoever stands in for them.
pub trait User {
    /// Sends the user to the authorization URL. Returns the URL the
    /// browser was sent back to, or None when the module is to wait for
    /// the browser at its loopback redirect URI.
    fn authorize(&mut self, url: &str) -> Result<Option<String>>;
}

/// The authorization server, as its metadata (or the 2025-03-26
/// fallback) describes it.
#[derive(Clone, Debug)]
struct Issuer {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
    auth_methods: Vec<String>,
    challenge_methods: Vec<String>,
    scopes_supported: Vec<String>,
    client_metadata_documents: bool,
    /// `authorization_response_iss_parameter_supported` (RFC 9207): the
    /// browser must then come back with `iss`.
    iss_in_response: bool,
    /// False for the fallback endpoints: nothing was advertised.
    from_metadata: bool,
}

/// Who we are at the authorization server.
#[derive(Clone, Debug)]
struct ClientIdentity {
    client_id: String,
    client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post`, `private_key_jwt` or
    /// `none`.
    method: String,
    /// The redirect URI it was registered with (dynamic registration).
    redirect_uri: Option<String>,
    /// Registered here, dynamically: kept in the store with the tokens.
    registered: bool,
}

#[derive(Clone, Debug)]
struct Tokens {
    access: String,
    refresh: Option<String>,
    /// Unix seconds.
    expires_at: Option<i64>,
    scope: Option<String>,
    /// Bound to the DPoP key (`token_type: DPoP`).
    bound: bool,
}

/// How the current access token was got: a refused one is worth a
/// refresh only if it did not come from one.
#[derive(Clone, Copy, PartialEq)]
enum Origin {
    Stored,
    Refreshed,
    LoggedIn,
}

pub struct Authorizer {
    settings: Settings,
    agent: Agent,
    server: Url,
    /// What requests carry as `Authorization: Bearer`.
    bearer: Arc<Mutex<Option<String>>>,
    /// The `resource` parameter (RFC 8707): the protected resource's own
    /// identifier, else the server's URL.
    resource: String,
    /// Where the protected-resource metadata was read from, so that a
    /// challenge naming another one is followed.
    metadata_url: Option<String>,
    resource_scopes: Vec<String>,
    issuer: Option<Issuer>,
    client: Option<ClientIdentity>,
    tokens: Option<Tokens>,
    origin: Origin,
    /// The scope of the last login, to tell a step-up from a loop.
    requested_scope: Vec<String>,
    /// The store was read for this issuer.
    loaded: bool,
    /// When a refresh before a call last failed.
    refresh_failed: Option<Instant>,
    /// The issuer a pre-registered secret was first used with (kept in
    /// the store): see [`Authorizer::bind_secret`].
    secret_bound_to: Option<String>,
    /// The authorization server as discovery named it (the resource's
    /// word, or a 2025-03-26 server's origin): what a binding holds, since
    /// it is what the next discovery compares.
    named_issuer: Option<String>,
}

fn now_seconds() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

fn words(scope: &str) -> Vec<String> {
    scope.split_whitespace().map(str::to_string).collect()
}

impl Authorizer {
    pub fn new(settings: Settings, server_url: &str, bearer: Arc<Mutex<Option<String>>>) -> Result<Authorizer> {
        let server = Url::parse(server_url)
            .map_err(|e| Error::BadInput(format!("mcp.new: opts.url is not a URL ({e}): {server_url}")))?;
        let agent = side_agent(settings.ca_pem.as_deref(), settings.timeout)?;
        let mut resource = server.clone();
        resource.set_fragment(None);
        Ok(Authorizer {
            settings,
            agent,
            resource: resource.to_string(),
            server,
            bearer,
            metadata_url: None,
            resource_scopes: Vec::new(),
            issuer: None,
            client: None,
            tokens: None,
            origin: Origin::Stored,
            requested_scope: Vec::new(),
            loaded: false,
            refresh_failed: None,
            secret_bound_to: None,
            named_issuer: None,
        })
    }

    /// The DPoP key, when `opts.auth.dpop` asked for one.
    pub fn dpop(&self) -> Option<Arc<dpop::Proofs>> {
        self.settings.dpop.clone()
    }

    fn fail(&self, detail: impl Into<String>) -> Error {
        Error::Authorization { url: self.server.to_string(), detail: detail.into() }
    }

    /// Before a request: a token that expires within a minute is
    /// refreshed now, when there is a refresh token. A failure here is
    /// left for the server's refusal to deal with.
    pub fn refresh_if_expiring(&mut self, mut store: Option<&mut dyn Store>) {
        let expiring = self.tokens.as_ref().is_some_and(|t| {
            t.refresh.is_some() && t.expires_at.is_some_and(|at| at - now_seconds() < REFRESH_MARGIN_SECONDS)
        });
        let resting = self.refresh_failed.is_some_and(|at| at.elapsed() < REFRESH_BACKOFF);
        if !expiring || resting {
            return;
        }
        match self.refresh() {
            Ok(()) => {
                self.refresh_failed = None;
                let _ = self.save(&mut store);
            }
            // Not tried again before every call: a server that is down
            // would cost each call a token request's timeout.
            Err(_) => self.refresh_failed = Some(Instant::now()),
        }
    }

    /// The server refused a request: `status` and its `WWW-Authenticate`.
    /// True when a new token is in place; false when no new token would
    /// change the answer (a 403 that is not about scope, a step-up to
    /// scope already asked for, a token just issued refused again).
    pub fn recover(
        &mut self,
        status: u16,
        www_authenticate: Option<&str>,
        again: bool,
        user: &mut dyn User,
        mut store: Option<&mut dyn Store>,
    ) -> Result<bool> {
        if !may_carry_login(&self.server) {
            return Err(self.fail(format!(
                "it is plain HTTP on another host, and a login would send its tokens in clear; {HTTPS_REQUIRED}"
            )));
        }
        let challenge = www_authenticate.map(parse_challenge).unwrap_or_default();
        let step_up = status == 403;
        if step_up && challenge.error.as_deref() != Some("insufficient_scope") {
            return Ok(false);
        }
        if !step_up && again && self.origin == Origin::LoggedIn {
            // A token the authorization server just issued was refused:
            // another login would end the same way.
            return Ok(false);
        }
        self.recall_secret_binding(&mut store)?;
        // A token refused after it was accepted may mean the resource
        // moved to another authorization server, which only its metadata
        // says: read afresh then, so that the new server gets a
        // registration of its own and none of the old one's credentials.
        let reread = !step_up && self.tokens.is_some();
        self.discover(&challenge, reread)?;
        self.bind_secret(&mut store)?;
        if !self.loaded {
            self.loaded = true;
            self.load(&mut store)?;
            if !step_up && self.offer_loaded() {
                return Ok(true);
            }
        }
        // A refused token is refreshed, unless it came from a refresh
        // and was refused again already.
        let refreshed_and_refused = again && self.origin == Origin::Refreshed;
        if !step_up && !refreshed_and_refused && self.refresh().is_ok() {
            self.save(&mut store)?;
            return Ok(true);
        }
        let scope = self.scope_for(&challenge);
        if step_up && scope.iter().all(|s| self.requested_scope.contains(s) || self.granted(s)) {
            return Ok(false);
        }
        self.log_in(scope, user)?;
        self.save(&mut store)?;
        Ok(true)
    }

    /// The scope to ask for: what was asked before, plus the challenge's
    /// scope, else everything the protected resource lists, else none.
    fn scope_for(&self, challenge: &Challenge) -> Vec<String> {
        let scope = match &challenge.scope {
            Some(s) => words(s),
            None => self.resource_scopes.clone(),
        };
        // What was asked before stays asked for: a login after a step-up
        // that dropped the stepped-up scope would only be refused again.
        let mut union = self.requested_scope.clone();
        union.extend(scope.into_iter().filter(|s| !self.requested_scope.contains(s)));
        union
    }

    fn granted(&self, scope: &str) -> bool {
        self.tokens.as_ref().and_then(|t| t.scope.as_deref()).is_some_and(|s| s.split_whitespace().any(|g| g == scope))
    }
}

#[cfg(test)]
mod tests;
