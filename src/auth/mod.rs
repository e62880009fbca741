//! Logging in to an MCP server behind OAuth 2.1, as the MCP authorization
//! spec lays it out: when the server refuses a request (401, or 403 for
//! want of scope), find who issues its tokens (`discovery`), get a client
//! identity there, get a token (a user's login with PKCE, or a machine's
//! own credentials), keep it (`store`), and put it where every HTTP
//! request reads it (the transport's bearer cell). The session core then
//! sends the refused request again.
//!
//! Everything here runs on the Lua thread that made the refused request:
//! a user's login needs the caller's `authorize` callback, and the
//! waits (each request, the loopback listener) honour Ctrl-C the way the
//! transport's do.
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
pub mod loopback;
pub mod pkce;
pub mod plain_http;
pub mod store;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use p256::ecdsa::SigningKey;
use ureq::Agent;
use url::form_urlencoded;
use url::Url;

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::protocol::SUPPORTED_VERSIONS;
use crate::wire::{interrupted, side_agent};
use discovery::{parse_challenge, text, texts, Challenge, Fetched};
use loopback::Listener;
use pkce::Pkce;
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

    /// Reads the protected-resource metadata (unless already read from
    /// the same place, and not `afresh`) and the authorization server's.
    fn discover(&mut self, challenge: &Challenge, afresh: bool) -> Result<()> {
        if self.issuer.is_some()
            && !afresh
            && (challenge.resource_metadata.is_none() || challenge.resource_metadata == self.metadata_url)
        {
            return Ok(());
        }
        let version = SUPPORTED_VERSIONS[0];
        let candidates = match &challenge.resource_metadata {
            Some(url) => vec![url.clone()],
            None => discovery::resource_metadata_urls(&self.server),
        };
        let mut found = None;
        for url in candidates {
            self.check_believable(&url, "its protected-resource metadata")?;
            if let Fetched::Found(doc) = discovery::fetch(&self.agent, &url, version)? {
                found = Some((url, doc));
                break;
            }
        }
        let Some((metadata_url, doc)) = found else {
            // A server from before protected-resource metadata is its own
            // authorization server.
            let origin = Url::parse(&discovery::origin_of(&self.server)).map_err(|e| self.fail(e.to_string()))?;
            self.named_issuer = Some(self.check_pinned(&[origin.to_string()])?);
            let issuer = self.server_metadata(&origin, false)?;
            self.adopt_issuer(issuer);
            return Ok(());
        };
        let Some(resource) = text(&doc, "resource") else {
            return Err(self.fail(format!(
                "its protected-resource metadata ({metadata_url}) names no resource (RFC 9728 requires it)"
            )));
        };
        if !discovery::resource_covers(&resource, &self.server) {
            return Err(self.fail(format!(
                "its protected-resource metadata ({metadata_url}) is for {resource}, not for this server; no token is asked for a resource that does not match"
            )));
        }
        self.resource = resource;
        self.resource_scopes = texts(&doc, "scopes_supported");
        let named = texts(&doc, "authorization_servers");
        if named.is_empty() {
            return Err(
                self.fail(format!("its protected-resource metadata ({metadata_url}) names no authorization server"))
            );
        }
        let issuer = self.check_pinned(&named)?;
        self.named_issuer = Some(issuer.clone());
        let issuer_url = Url::parse(&issuer).map_err(|_| {
            self.fail(format!(
                "its protected-resource metadata names an authorization server that is not a URL: {issuer}"
            ))
        })?;
        self.metadata_url = Some(metadata_url);
        let issuer = self.server_metadata(&issuer_url, true)?;
        self.adopt_issuer(issuer);
        Ok(())
    }

    /// Of the authorization servers a resource names, the one to use: the
    /// first, or the one `opts.auth.issuer` pins, or the one a
    /// pre-registered secret is bound to. Checked before anything is
    /// fetched from the one named.
    fn check_pinned(&self, named: &[String]) -> Result<String> {
        let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
        let chosen = |pin: &str| named.iter().find(|n| same(n, pin)).cloned();
        if let Some(pin) = &self.settings.issuer {
            return chosen(pin).ok_or_else(|| {
                self.fail(format!(
                    "it names the authorization server {}, and opts.auth.issuer allows only {pin}; nothing was sent there",
                    named.join(", ")
                ))
            });
        }
        if let Some(bound) = &self.secret_bound_to {
            return chosen(bound).ok_or_else(|| {
                self.fail(format!(
                    "it names the authorization server {}, and the pre-registered client {} is bound to {bound}, the first it was used with; nothing was sent there (set opts.auth.issuer to move it)",
                    named.join(", "),
                    self.settings.client_id.as_deref().unwrap_or_default()
                ))
            });
        }
        Ok(named[0].clone())
    }

    /// A pre-registered secret belongs to the authorization server it was
    /// registered with, which nothing but `opts.auth.issuer` tells us; an
    /// MCP server's metadata may name any issuer at all, and the secret
    /// would go there. So the secret is bound to the first issuer it is
    /// used with, and the binding kept in the store (under
    /// [`store::secret_binding_key`]) outlives the process. Dynamic and
    /// metadata-document clients need none: they register per issuer.
    fn bound_secret(&self) -> bool {
        self.settings.client_secret.is_some() && self.settings.issuer.is_none()
    }

    fn recall_secret_binding(&mut self, store: &mut Option<&mut dyn Store>) -> Result<()> {
        let (true, None, Some(store), Some(client_id)) =
            (self.bound_secret(), &self.secret_bound_to, store, &self.settings.client_id)
        else {
            return Ok(());
        };
        let record = store.load(&store::secret_binding_key(client_id))?;
        self.secret_bound_to = record.and_then(|r| text(&r, "issuer"));
        Ok(())
    }

    fn bind_secret(&mut self, store: &mut Option<&mut dyn Store>) -> Result<()> {
        if !self.bound_secret() || self.secret_bound_to.is_some() {
            return Ok(());
        }
        let Some(issuer) = self.named_issuer.clone() else { return Ok(()) };
        self.secret_bound_to = Some(issuer.clone());
        if let (Some(store), Some(client_id)) = (store, &self.settings.client_id) {
            store.save(&store::secret_binding_key(client_id), &Json::object([("issuer", Json::str(&issuer))]))?;
        }
        Ok(())
    }

    /// Metadata is believed only from where a network attacker could not
    /// have written it (see [`plain_http`]).
    fn check_believable(&self, url: &str, what: &str) -> Result<()> {
        self.require_trusted(url, || {
            format!("{what} at {url} would come over plain HTTP from another host; {HTTPS_REQUIRED}")
        })
    }

    /// `url` may carry a login (see [`plain_http`]), or the login stops
    /// with `refusal`.
    fn require_trusted(&self, url: &str, refusal: impl FnOnce() -> String) -> Result<()> {
        match Url::parse(url) {
            Ok(parsed) if may_carry_login(&parsed) => Ok(()),
            _ => Err(self.fail(refusal())),
        }
    }

    /// Takes `issuer` as the one tokens come from. A different issuer than
    /// before (a challenge naming other metadata) gets nothing of the old
    /// one's: a refresh token or a registration secret sent to it would
    /// hand the old issuer's credentials to whoever the server named.
    fn adopt_issuer(&mut self, issuer: Issuer) {
        let changed = self.issuer.as_ref().is_some_and(|old| old.issuer != issuer.issuer);
        if changed {
            self.client = None;
            self.tokens = None;
            self.requested_scope.clear();
            self.loaded = false;
            *self.bearer.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        self.issuer = Some(issuer);
    }

    /// The authorization server's metadata; for a server that advertised
    /// none, the 2025-03-26 fixed endpoints at its origin. `named` says a
    /// protected resource named this issuer: its metadata must then say
    /// the same issuer.
    fn server_metadata(&self, issuer: &Url, named: bool) -> Result<Issuer> {
        let version = SUPPORTED_VERSIONS[0];
        let issuer_text = issuer.as_str().trim_end_matches('/').to_string();
        for url in discovery::server_metadata_urls(issuer) {
            self.check_believable(&url, "the authorization server metadata")?;
            let Fetched::Found(doc) = discovery::fetch(&self.agent, &url, version)? else {
                continue;
            };
            let said = text(&doc, "issuer").unwrap_or_default();
            if named && said.trim_end_matches('/') != issuer_text {
                return Err(self.fail(format!(
                    "the authorization server metadata at {url} names the issuer {said}, not {issuer_text}"
                )));
            }
            let endpoint = |field: &str| {
                text(&doc, field)
                    .ok_or_else(|| self.fail(format!("the authorization server metadata at {url} has no {field}")))
            };
            let registration_endpoint = text(&doc, "registration_endpoint");
            let issuer = Issuer {
                issuer: if said.is_empty() { issuer_text.clone() } else { said.clone() },
                authorization_endpoint: endpoint("authorization_endpoint")?,
                token_endpoint: endpoint("token_endpoint")?,
                registration_endpoint,
                auth_methods: texts(&doc, "token_endpoint_auth_methods_supported"),
                challenge_methods: texts(&doc, "code_challenge_methods_supported"),
                scopes_supported: texts(&doc, "scopes_supported"),
                client_metadata_documents: matches!(
                    doc.get("client_id_metadata_document_supported"),
                    Some(Json::Bool(true))
                ),
                iss_in_response: matches!(
                    doc.get("authorization_response_iss_parameter_supported"),
                    Some(Json::Bool(true))
                ),
                from_metadata: true,
            };
            self.check_endpoints(&issuer)?;
            return Ok(issuer);
        }
        if named {
            return Err(self.fail(format!("the authorization server {issuer_text} publishes no metadata")));
        }
        let fallback = Issuer {
            issuer: issuer_text.clone(),
            authorization_endpoint: format!("{issuer_text}/authorize"),
            token_endpoint: format!("{issuer_text}/token"),
            registration_endpoint: Some(format!("{issuer_text}/register")),
            auth_methods: Vec::new(),
            challenge_methods: Vec::new(),
            scopes_supported: Vec::new(),
            client_metadata_documents: false,
            iss_in_response: false,
            from_metadata: false,
        };
        self.check_endpoints(&fallback)?;
        Ok(fallback)
    }

    /// Codes, verifiers and secrets go to these endpoints: HTTPS only,
    /// or plain HTTP to this machine (the spec asks HTTPS of every
    /// authorization server endpoint).
    fn check_endpoints(&self, issuer: &Issuer) -> Result<()> {
        let endpoints = [Some(&issuer.authorization_endpoint), Some(&issuer.token_endpoint)];
        for endpoint in endpoints.into_iter().chain([issuer.registration_endpoint.as_ref()]).flatten() {
            self.check_sendable(endpoint, "the authorization server's endpoint")?;
        }
        Ok(())
    }

    fn check_sendable(&self, endpoint: &str, what: &str) -> Result<()> {
        self.require_trusted(endpoint, || {
            format!("{what} {endpoint} is not HTTPS; codes and secrets are not sent over it")
        })
    }

    fn issuer(&self) -> &Issuer {
        self.issuer.as_ref().expect("discovered before use")
    }

    fn store_key(&self) -> String {
        store::key(&self.issuer().issuer, &self.resource)
    }

    /// A saved login for this issuer and resource: its registration and
    /// tokens.
    fn load(&mut self, store: &mut Option<&mut dyn Store>) -> Result<()> {
        let Some(store) = store else { return Ok(()) };
        let Some(record) = store.load(&self.store_key())? else { return Ok(()) };
        if let Some(client) = record.get("client") {
            if let (Some(client_id), Some(method)) = (text(client, "client_id"), text(client, "method")) {
                self.client = Some(ClientIdentity {
                    client_id,
                    client_secret: text(client, "client_secret"),
                    method,
                    redirect_uri: text(client, "redirect_uri"),
                    registered: true,
                });
            }
        }
        if let Some(access) = text(&record, "access_token") {
            self.tokens = Some(Tokens {
                access,
                refresh: text(&record, "refresh_token"),
                expires_at: match record.get("expires_at") {
                    Some(Json::Int(at)) => Some(*at),
                    _ => None,
                },
                scope: text(&record, "scope"),
            });
            self.origin = Origin::Stored;
        }
        Ok(())
    }

    /// Puts a loaded token in place if it is not the one just refused and
    /// has not expired.
    fn offer_loaded(&mut self) -> bool {
        let Some(tokens) = &self.tokens else { return false };
        let current = self.bearer.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let fresh = tokens.expires_at.is_none_or(|at| at - now_seconds() > REFRESH_MARGIN_SECONDS);
        if current.as_deref() == Some(tokens.access.as_str()) || !fresh {
            return false;
        }
        self.set_bearer();
        true
    }

    fn save(&self, store: &mut Option<&mut dyn Store>) -> Result<()> {
        let (Some(store), Some(tokens)) = (store, &self.tokens) else { return Ok(()) };
        let mut record = vec![("access_token", Json::str(&tokens.access))];
        if let Some(client) = self.client.as_ref().filter(|c| c.registered) {
            let mut fields = vec![("client_id", Json::str(&client.client_id)), ("method", Json::str(&client.method))];
            if let Some(secret) = &client.client_secret {
                fields.push(("client_secret", Json::str(secret)));
            }
            if let Some(uri) = &client.redirect_uri {
                fields.push(("redirect_uri", Json::str(uri)));
            }
            record.push(("client", Json::object(fields)));
        }
        if let Some(at) = tokens.expires_at {
            record.push(("expires_at", Json::Int(at)));
        }
        record.push(("issuer", Json::str(&self.issuer().issuer)));
        if let Some(refresh) = &tokens.refresh {
            record.push(("refresh_token", Json::str(refresh)));
        }
        record.push(("resource", Json::str(&self.resource)));
        if let Some(scope) = &tokens.scope {
            record.push(("scope", Json::str(scope)));
        }
        store.save(&self.store_key(), &Json::object(record))
    }

    fn set_bearer(&self) {
        let access = self.tokens.as_ref().map(|t| t.access.clone());
        *self.bearer.lock().unwrap_or_else(|p| p.into_inner()) = access;
    }

    /// A new access token from the refresh token.
    fn refresh(&mut self) -> Result<()> {
        let refresh =
            self.tokens.as_ref().and_then(|t| t.refresh.clone()).ok_or_else(|| self.fail("no refresh token"))?;
        let client = self
            .client
            .clone()
            .or_else(|| self.configured_identity())
            .ok_or_else(|| self.fail("no client identity to refresh with"))?;
        let form = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", refresh.clone()),
            ("resource", self.resource.clone()),
        ];
        let mut tokens = self.token_request(form, &client)?;
        // A server that does not rotate refresh tokens keeps the old one
        // good (RFC 6749 section 6).
        tokens.refresh = tokens.refresh.or(Some(refresh));
        self.tokens = Some(tokens);
        self.origin = Origin::Refreshed;
        self.set_bearer();
        Ok(())
    }

    /// A new login with `scope`, by the configured grant.
    fn log_in(&mut self, mut scope: Vec<String>, user: &mut dyn User) -> Result<()> {
        self.requested_scope = scope.clone();
        let tokens = match self.settings.grant {
            Grant::ClientCredentials => self.client_credentials(&scope)?,
            Grant::IdentityAssertion => self.identity_assertion(&scope)?,
            Grant::JwtBearer => self.workload_identity(&scope)?,
            Grant::AuthorizationCode => {
                if self.issuer().scopes_supported.iter().any(|s| s == OFFLINE_ACCESS)
                    && !scope.iter().any(|s| s == OFFLINE_ACCESS)
                {
                    scope.push(OFFLINE_ACCESS.to_string());
                }
                self.authorization_code(&scope, user)?
            }
        };
        self.tokens = Some(tokens);
        self.origin = Origin::LoggedIn;
        self.set_bearer();
        Ok(())
    }

    /// A machine's token: `client_credentials` with its secret (HTTP
    /// Basic, or in the body where the server takes only that) or its
    /// signed assertion.
    fn client_credentials(&mut self, scope: &[String]) -> Result<Tokens> {
        let Some(client_id) = self.settings.client_id.clone() else {
            return Err(self.fail("opts.auth.grant = \"client_credentials\" needs opts.auth.client_id"));
        };
        let method = match (&self.settings.signing_key, &self.settings.client_secret) {
            (Some(_), _) => "private_key_jwt".to_string(),
            (None, Some(_)) => self.secret_method(),
            (None, None) => return Err(self.fail(
                "opts.auth.grant = \"client_credentials\" needs opts.auth.client_secret or opts.auth.private_key_pem",
            )),
        };
        let client = ClientIdentity {
            client_id,
            client_secret: self.settings.client_secret.clone(),
            method,
            redirect_uri: None,
            registered: false,
        };
        let mut form = vec![("grant_type", "client_credentials".to_string())];
        if !scope.is_empty() {
            form.push(("scope", scope.join(" ")));
        }
        form.push(("resource", self.resource.clone()));
        let tokens = self.token_request(form, &client)?;
        self.client = Some(client);
        Ok(tokens)
    }

    /// How a secret goes to the token endpoint: Basic unless the server
    /// lists only the body (RFC 8414's default is Basic).
    fn secret_method(&self) -> String {
        let methods = &self.issuer().auth_methods;
        match methods.iter().any(|m| m == "client_secret_post") && !methods.iter().any(|m| m == "client_secret_basic") {
            true => "client_secret_post".into(),
            false => "client_secret_basic".into(),
        }
    }

    /// A user's login: PKCE, the browser sent to the authorization
    /// endpoint, the code it came back with exchanged for tokens.
    fn authorization_code(&mut self, scope: &[String], user: &mut dyn User) -> Result<Tokens> {
        let issuer = self.issuer().clone();
        if issuer.from_metadata && !issuer.challenge_methods.iter().any(|m| m == "S256") {
            return Err(self.fail(format!(
                "the authorization server {} does not advertise PKCE with S256 (code_challenge_methods_supported), which this client requires",
                issuer.issuer
            )));
        }
        let listener = self.listen()?;
        let redirect_uri = match &listener {
            Some(listener) => listener.redirect_uri.clone(),
            None => self.settings.redirect_uri.clone(),
        };
        let client = self.identify(&redirect_uri)?;
        let pkce = Pkce::new()?;
        let state = pkce::random_text(16)?;
        let mut url = Url::parse(&issuer.authorization_endpoint).map_err(|_| {
            self.fail(format!("its authorization endpoint is not a URL: {}", issuer.authorization_endpoint))
        })?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", &redirect_uri)
                .append_pair("code_challenge", &pkce.challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", &self.resource);
            if !scope.is_empty() {
                query.append_pair("scope", &scope.join(" "));
            }
        }
        let came_back = match (user.authorize(url.as_str())?, &listener) {
            (Some(came_back), _) => came_back,
            (None, Some(listener)) => {
                let deadline = Instant::now().checked_add(self.settings.login_timeout);
                listener.wait(deadline.unwrap_or_else(crate::interrupt::far_future), &state)?
            }
            (None, None) => {
                return Err(self.fail(format!(
                    "opts.auth.authorize returned nothing, and the redirect URI {redirect_uri} is not a loopback http address this module can listen on; return the URL the browser was sent back to"
                )))
            }
        };
        drop(listener);
        let code = self.code_from(&came_back, &state)?;
        let form = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", pkce.verifier),
            ("resource", self.resource.clone()),
        ];
        let tokens = self.token_request(form, &client)?;
        self.client = Some(client);
        Ok(tokens)
    }

    /// The loopback listener for the redirect, on the port a saved
    /// registration was made with when it is free (the registration
    /// names it), else where `opts.auth.redirect_uri` says.
    fn listen(&mut self) -> Result<Option<Listener>> {
        let registered = self.client.as_ref().filter(|c| c.registered).and_then(|c| c.redirect_uri.clone());
        if self.settings.redirect_uri == DEFAULT_REDIRECT_URI {
            if let Some(uri) = registered {
                if let Ok(Some(listener)) = Listener::bind(&uri) {
                    return Ok(Some(listener));
                }
            }
        }
        Listener::bind(&self.settings.redirect_uri)
    }

    /// The code in the URL the browser came back to, after checking that
    /// it answers this login (`state`) and is not an error.
    fn code_from(&self, came_back: &str, state: &str) -> Result<String> {
        // Never quoted: it holds the code.
        let url = Url::parse(came_back).map_err(|_| {
            self.fail("opts.auth.authorize returned something that is not a whole URL (scheme and host included)")
        })?;
        let field = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
        // The state first: an error without this login's state is not
        // this login's answer (RFC 6749 section 4.1.2.1).
        if field("state").as_deref() != Some(state) {
            return Err(self.fail("the login came back with a state that is not this login's; it was not used"));
        }
        self.check_response_issuer(field("iss"))?;
        if let Some(error) = field("error") {
            let quote = |text: &str| crate::server_text::quoted_str(text, crate::server_text::TEXT_CHARS);
            let description = field("error_description").map(|d| format!(" ({})", quote(&d))).unwrap_or_default();
            let error = quote(&error);
            return Err(self.fail(format!("the authorization server refused the login: {error}{description}")));
        }
        field("code").ok_or_else(|| self.fail("the login came back without a code"))
    }

    /// The mix-up defence of RFC 9207: the browser may come back from
    /// another authorization server than the one this login went to (a
    /// server the user also uses, steered by an attacker), and its code
    /// redeemed at ours, or ours at its token endpoint, hands the attacker
    /// a code and the PKCE verifier together. An `iss` that is not our
    /// issuer is refused whether it was promised or not; a missing one is
    /// refused where the metadata promised it. The comparison is exact, as
    /// the RFC asks (the query's percent-encoding undone, nothing else).
    fn check_response_issuer(&self, iss: Option<String>) -> Result<()> {
        let ours = &self.issuer().issuer;
        match iss {
            Some(iss) if &iss != ours => Err(self.fail(format!(
                "the login came back from the issuer {iss}, not from {ours} where it was sent (RFC 9207 mix-up defence); the code was not redeemed"
            ))),
            None if self.issuer().iss_in_response => Err(self.fail(format!(
                "the login came back without iss, which the authorization server {ours} promises (authorization_response_iss_parameter_supported); the code was not redeemed"
            ))),
            _ => Ok(()),
        }
    }

    /// Who we are: pre-registered (`opts.auth.client_id`), a Client ID
    /// Metadata Document where the server takes one, a registration kept
    /// from before for this redirect URI, else a new dynamic registration
    /// (RFC 7591).
    fn identify(&mut self, redirect_uri: &str) -> Result<ClientIdentity> {
        let issuer = self.issuer().clone();
        if let Some(client) = self.configured_identity() {
            return Ok(client);
        }
        if let Some(client) =
            self.client.as_ref().filter(|c| c.registered && c.redirect_uri.as_deref() == Some(redirect_uri))
        {
            return Ok(client.clone());
        }
        let Some(endpoint) = issuer.registration_endpoint.clone() else {
            return Err(self.fail(format!(
                "the authorization server {} takes no dynamic client registration; register a client there and set opts.auth.client_id (and client_secret)",
                issuer.issuer
            )));
        };
        // Ask for the first way of authenticating the server lists that a
        // registration can give us; a public client ("none") needs no secret.
        let wanted = issuer
            .auth_methods
            .iter()
            .find(|m| matches!(m.as_str(), "none" | "client_secret_basic" | "client_secret_post"));
        let mut fields = vec![
            ("application_type", Json::str(application_type(redirect_uri))),
            ("client_name", Json::str(&self.settings.client_name)),
            ("grant_types", Json::Array(vec![Json::str("authorization_code"), Json::str("refresh_token")])),
            ("redirect_uris", Json::Array(vec![Json::str(redirect_uri)])),
            ("response_types", Json::Array(vec![Json::str("code")])),
        ];
        if let Some(method) = wanted {
            fields.push(("token_endpoint_auth_method", Json::str(method)));
        }
        let body = codec::encode(&Json::object(fields));
        let response = self
            .agent
            .post(&endpoint)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .send(&body[..]);
        let (status, reply) = self.read_reply(&endpoint, response)?;
        if !(200..300).contains(&status) {
            return Err(self.fail(format!(
                "the client registration at {endpoint} was refused (HTTP {status}{})",
                oauth_error(&reply)
            )));
        }
        let client_id = text(&reply, "client_id")
            .ok_or_else(|| self.fail(format!("the client registration at {endpoint} gave no client_id")))?;
        let client_secret = text(&reply, "client_secret");
        let method = text(&reply, "token_endpoint_auth_method").unwrap_or_else(|| match (&client_secret, wanted) {
            (_, Some(m)) => m.clone(),
            (Some(_), None) => "client_secret_basic".into(),
            (None, None) => "none".into(),
        });
        let client = ClientIdentity {
            client_id,
            client_secret,
            method,
            redirect_uri: Some(redirect_uri.to_string()),
            registered: true,
        };
        self.client = Some(client.clone());
        Ok(client)
    }

    /// The identity the options give without registering: a
    /// pre-registered client, or a Client ID Metadata Document where the
    /// server takes one.
    fn configured_identity(&self) -> Option<ClientIdentity> {
        let identity = |client_id: &str, client_secret: Option<String>, method: String| ClientIdentity {
            client_id: client_id.to_string(),
            client_secret,
            method,
            redirect_uri: None,
            registered: false,
        };
        if let Some(client_id) = &self.settings.client_id {
            let method = match &self.settings.client_secret {
                Some(_) => self.secret_method(),
                None => "none".into(),
            };
            return Some(identity(client_id, self.settings.client_secret.clone(), method));
        }
        match (self.issuer().client_metadata_documents, &self.settings.client_metadata_url) {
            (true, Some(url)) => Some(identity(url, None, "none".into())),
            _ => None,
        }
    }

    /// A token endpoint request, authenticated as `client` says.
    fn token_request(&self, mut form: Vec<(&str, String)>, client: &ClientIdentity) -> Result<Tokens> {
        let endpoint = self.issuer().token_endpoint.clone();
        let mut basic = None;
        match client.method.as_str() {
            "client_secret_basic" => {
                let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                let secret = client.client_secret.as_deref().unwrap_or_default();
                let pair = format!("{}:{}", encode(&client.client_id), encode(secret));
                basic = Some(format!("Basic {}", STANDARD.encode(pair)));
            }
            "client_secret_post" => {
                form.push(("client_id", client.client_id.clone()));
                form.push(("client_secret", client.client_secret.clone().unwrap_or_default()));
            }
            "private_key_jwt" => {
                let key = self
                    .settings
                    .signing_key
                    .as_ref()
                    .ok_or_else(|| self.fail("private_key_jwt needs opts.auth.private_key_pem"))?;
                form.push(("client_id", client.client_id.clone()));
                form.push(("client_assertion_type", assertion::ASSERTION_TYPE.to_string()));
                // The audience is the authorization server's issuer
                // (RFC 7523 as the MCP extension profiles it).
                form.push((
                    "client_assertion",
                    assertion::client_assertion(key, &client.client_id, &self.issuer().issuer)?,
                ));
            }
            _ => form.push(("client_id", client.client_id.clone())),
        }
        let reply = self.post_form(&endpoint, &form, basic)?;
        let access = text(&reply, "access_token")
            .ok_or_else(|| self.fail(format!("the token endpoint {endpoint} gave no access_token")))?;
        let token_type = text(&reply, "token_type").unwrap_or_else(|| "Bearer".into());
        if !token_type.eq_ignore_ascii_case("bearer") {
            return Err(self.fail(format!(
                "the token endpoint {endpoint} gave a {token_type} token; this client sends Bearer tokens only"
            )));
        }
        let refresh = text(&reply, "refresh_token");
        for (name, token) in [("access", Some(&access)), ("refresh", refresh.as_ref())] {
            // A token goes into an HTTP header on every request: one with
            // a line break or another control byte would fail each of
            // them (or smuggle a header), and once saved, every later run.
            if token.is_some_and(|t| t.bytes().any(|b| b < 0x20 || b == 0x7f)) {
                return Err(self.fail(format!(
                    "the token endpoint {endpoint} gave a {name} token with control characters; it was neither used nor saved"
                )));
            }
        }
        let expires_at = match reply.get("expires_in") {
            Some(Json::Int(seconds)) => Some(now_seconds().saturating_add(*seconds)),
            Some(Json::Float(seconds)) if seconds.is_finite() => Some(now_seconds().saturating_add(*seconds as i64)),
            _ => None,
        };
        Ok(Tokens { access, refresh, expires_at, scope: text(&reply, "scope") })
    }

    /// A form POSTed to a token endpoint; its JSON reply, which must come
    /// with a 200.
    fn post_form(&self, endpoint: &str, form: &[(&str, String)], basic: Option<String>) -> Result<Json> {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let mut request = self
            .agent
            .post(endpoint)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Accept", "application/json");
        if let Some(basic) = basic {
            request = request.header("Authorization", basic);
        }
        let (status, reply) = self.read_reply(endpoint, request.send(body.as_bytes()))?;
        if status != 200 {
            return Err(self.fail(format!(
                "the token endpoint {endpoint} refused the request (HTTP {status}{})",
                oauth_error(&reply)
            )));
        }
        Ok(reply)
    }

    /// Cross-app access (SEP-990): the enterprise identity provider
    /// trades the user's ID token for an identity assertion grant (RFC
    /// 8693 token exchange) naming this authorization server and
    /// resource, which the authorization server then takes as a JWT
    /// bearer grant (RFC 7523) from this client. No browser: the user
    /// logged in to the identity provider already.
    fn identity_assertion(&mut self, scope: &[String]) -> Result<Tokens> {
        let (Some(idp), Some(client_id)) = (self.settings.identity.clone(), self.settings.client_id.clone()) else {
            return Err(self.fail("cross-app access needs opts.auth.client_id and opts.auth.idp"));
        };
        let mut exchange = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange".to_string()),
            ("requested_token_type", "urn:ietf:params:oauth:token-type:id-jag".to_string()),
            ("subject_token", idp.id_token.clone()),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token".to_string()),
            ("audience", self.issuer().issuer.clone()),
            ("resource", self.resource.clone()),
        ];
        if !scope.is_empty() {
            exchange.push(("scope", scope.join(" ")));
        }
        if let Some(idp_client) = &idp.client_id {
            exchange.push(("client_id", idp_client.clone()));
        }
        if let Some(idp_secret) = &idp.client_secret {
            exchange.push(("client_secret", idp_secret.clone()));
        }
        self.check_sendable(&idp.token_endpoint, "the identity provider's token endpoint")?;
        let reply = self.post_form(&idp.token_endpoint, &exchange, None)?;
        let grant = text(&reply, "access_token").ok_or_else(|| {
            self.fail(format!(
                "the identity provider's token endpoint {} gave no identity assertion",
                idp.token_endpoint
            ))
        })?;
        self.jwt_bearer(client_id, grant, scope, false)
    }

    /// A workload's login (SEP-1933): the identity token its platform
    /// gave it (`opts.auth.assertion`) is the grant. A refusal is the
    /// answer: no other grant is tried, and the token is not sent again.
    fn workload_identity(&mut self, scope: &[String]) -> Result<Tokens> {
        let (Some(client_id), Some(assertion)) = (self.settings.client_id.clone(), self.settings.assertion.clone())
        else {
            return Err(self.fail("opts.auth.grant = \"jwt_bearer\" needs opts.auth.client_id and opts.auth.assertion"));
        };
        self.jwt_bearer(client_id, assertion, scope, true)
    }

    /// RFC 7523's JWT-bearer grant at the authorization server, with
    /// `assertion`; `for_resource` names the resource (the identity
    /// assertion of cross-app access names it already).
    fn jwt_bearer(
        &mut self,
        client_id: String,
        assertion: String,
        scope: &[String],
        for_resource: bool,
    ) -> Result<Tokens> {
        let client = ClientIdentity {
            client_id,
            client_secret: self.settings.client_secret.clone(),
            method: match self.settings.client_secret {
                Some(_) => self.secret_method(),
                None => "none".into(),
            },
            redirect_uri: None,
            registered: false,
        };
        let mut form =
            vec![("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer".to_string()), ("assertion", assertion)];
        if !scope.is_empty() {
            form.push(("scope", scope.join(" ")));
        }
        if for_resource {
            form.push(("resource", self.resource.clone()));
        }
        let tokens = self.token_request(form, &client)?;
        self.client = Some(client);
        Ok(tokens)
    }

    /// A request to the authorization server (or identity provider) that
    /// got no whole answer: Ctrl-C, the time limit, or the connection.
    fn request_failed(&self, endpoint: &str, e: ureq::Error) -> Error {
        match e {
            e if interrupted(&e) => Error::Interrupted { what: "login".into() },
            ureq::Error::Timeout(_) => self.fail(format!(
                "the request to {endpoint} timed out: no whole answer within {} s (opts.timeout)",
                codec::format_float(self.settings.timeout.as_secs_f64())
            )),
            e => self.fail(format!("the request to {endpoint} failed ({e})")),
        }
    }

    /// Status and JSON body of an authorization server's reply (an empty
    /// object when the body is not JSON).
    fn read_reply(
        &self,
        endpoint: &str,
        response: std::result::Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<(u16, Json)> {
        let mut response = response.map_err(|e| self.request_failed(endpoint, e))?;
        let status = response.status().as_u16();
        // A body cut off by the time limit is the endpoint's silence, not
        // an empty answer: reported as such, never parsed.
        let body = match response.body_mut().with_config().limit(1 << 20).read_to_vec() {
            Ok(body) => body,
            Err(e @ (ureq::Error::Timeout(_) | ureq::Error::Io(_))) => return Err(self.request_failed(endpoint, e)),
            Err(_) => Vec::new(),
        };
        let reply = match codec::decode(&body) {
            Ok(doc @ Json::Object(_)) => doc,
            _ => Json::Object(Vec::new()),
        };
        Ok((status, reply))
    }
}

/// `: error (description)` of an OAuth error reply, for a message.
fn oauth_error(reply: &Json) -> String {
    let quote = |text: String| crate::server_text::quoted_str(&text, crate::server_text::TEXT_CHARS);
    match (text(reply, "error").map(quote), text(reply, "error_description").map(quote)) {
        (Some(e), Some(d)) => format!(": {e} ({d})"),
        (Some(e), None) => format!(": {e}"),
        _ => String::new(),
    }
}

/// What a registration says the client is (OpenID Connect's
/// `application_type`, which the 2026-07-28 revision asks every
/// registration to send): a program on the user's machine, whose browser
/// comes back to a loopback address, is "native"; one that receives it
/// elsewhere is "web".
fn application_type(redirect_uri: &str) -> &'static str {
    let host = url::Url::parse(redirect_uri).ok().and_then(|u| u.host_str().map(str::to_string));
    match host.as_deref() {
        Some("127.0.0.1" | "localhost" | "[::1]") => "native",
        _ => "web",
    }
}
