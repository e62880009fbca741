//! Who issues the server's tokens: the protected resource's metadata
//! (RFC 9728), the authorization server's (RFC 8414, or OpenID's), the
//! 2025-03-26 fallback endpoints, and the checks that keep a login from
//! being steered: an issuer pinned by `opts.auth.issuer`, a pre-registered
//! secret bound to the first issuer it was used with, metadata believed
//! only over HTTPS or loopback, endpoints that may receive a secret.

use url::Url;

use super::discovery::{self, text, texts, Challenge, Fetched};
use super::plain_http::{may_carry_login, HTTPS_REQUIRED};
use super::store::{self, Store};

use super::{Authorizer, Issuer};
use crate::codec::Json;
use crate::error::Result;
use crate::protocol::SUPPORTED_VERSIONS;

impl Authorizer {
    /// Reads the protected-resource metadata (unless already read from
    /// the same place, and not `afresh`) and the authorization server's.
    pub(super) fn discover(&mut self, challenge: &Challenge, afresh: bool) -> Result<()> {
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
    pub(super) fn check_pinned(&self, named: &[String]) -> Result<String> {
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
    pub(super) fn bound_secret(&self) -> bool {
        self.settings.client_secret.is_some() && self.settings.issuer.is_none()
    }

    pub(super) fn recall_secret_binding(&mut self, store: &mut Option<&mut dyn Store>) -> Result<()> {
        let (true, None, Some(store), Some(client_id)) =
            (self.bound_secret(), &self.secret_bound_to, store, &self.settings.client_id)
        else {
            return Ok(());
        };
        let record = store.load(&store::secret_binding_key(client_id))?;
        self.secret_bound_to = record.and_then(|r| text(&r, "issuer"));
        Ok(())
    }

    pub(super) fn bind_secret(&mut self, store: &mut Option<&mut dyn Store>) -> Result<()> {
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
    pub(super) fn check_believable(&self, url: &str, what: &str) -> Result<()> {
        self.require_trusted(url, || {
            format!("{what} at {url} would come over plain HTTP from another host; {HTTPS_REQUIRED}")
        })
    }

    /// `url` may carry a login (see [`plain_http`]), or the login stops
    /// with `refusal`.
    pub(super) fn require_trusted(&self, url: &str, refusal: impl FnOnce() -> String) -> Result<()> {
        match Url::parse(url) {
            Ok(parsed) if may_carry_login(&parsed) => Ok(()),
            _ => Err(self.fail(refusal())),
        }
    }

    /// Takes `issuer` as the one tokens come from. A different issuer than
    /// before (a challenge naming other metadata) gets nothing of the old
    /// one's: a refresh token or a registration secret sent to it would
    /// hand the old issuer's credentials to whoever the server named.
    pub(super) fn adopt_issuer(&mut self, issuer: Issuer) {
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
    pub(super) fn server_metadata(&self, issuer: &Url, named: bool) -> Result<Issuer> {
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
    pub(super) fn check_endpoints(&self, issuer: &Issuer) -> Result<()> {
        let endpoints = [Some(&issuer.authorization_endpoint), Some(&issuer.token_endpoint)];
        for endpoint in endpoints.into_iter().chain([issuer.registration_endpoint.as_ref()]).flatten() {
            self.check_sendable(endpoint, "the authorization server's endpoint")?;
        }
        Ok(())
    }

    pub(super) fn check_sendable(&self, endpoint: &str, what: &str) -> Result<()> {
        self.require_trusted(endpoint, || {
            format!("{what} {endpoint} is not HTTPS; codes and secrets are not sent over it")
        })
    }

    pub(super) fn issuer(&self) -> &Issuer {
        self.issuer.as_ref().expect("discovered before use")
    }
}
