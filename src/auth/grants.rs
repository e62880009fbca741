//! How a token is got: a user's login (authorization code with PKCE, the
//! loopback redirect, the `iss` check of RFC 9207), a machine's own
//! credentials (client credentials, with a secret or a private key), and
//! the enterprise grants (identity assertion, workload identity), each
//! ending in the token endpoint (see `tokens`).

use std::time::Instant;

use url::Url;

use super::discovery::text;
use super::loopback::Listener;
use super::pkce::Pkce;

use super::{pkce, Authorizer, ClientIdentity, Grant, Origin, Tokens, User, DEFAULT_REDIRECT_URI, OFFLINE_ACCESS};
use crate::error::Result;

impl Authorizer {
    /// A new login with `scope`, by the configured grant.
    pub(super) fn log_in(&mut self, mut scope: Vec<String>, user: &mut dyn User) -> Result<()> {
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
    pub(super) fn client_credentials(&mut self, scope: &[String]) -> Result<Tokens> {
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
    pub(super) fn secret_method(&self) -> String {
        let methods = &self.issuer().auth_methods;
        match methods.iter().any(|m| m == "client_secret_post") && !methods.iter().any(|m| m == "client_secret_basic") {
            true => "client_secret_post".into(),
            false => "client_secret_basic".into(),
        }
    }

    /// A user's login: PKCE, the browser sent to the authorization
    /// endpoint, the code it came back with exchanged for tokens.
    pub(super) fn authorization_code(&mut self, scope: &[String], user: &mut dyn User) -> Result<Tokens> {
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
    pub(super) fn listen(&mut self) -> Result<Option<Listener>> {
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
    pub(super) fn code_from(&self, came_back: &str, state: &str) -> Result<String> {
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
    pub(super) fn check_response_issuer(&self, iss: Option<String>) -> Result<()> {
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

    /// Cross-app access (SEP-990): the enterprise identity provider
    /// trades the user's ID token for an identity assertion grant (RFC
    /// 8693 token exchange) naming this authorization server and
    /// resource, which the authorization server then takes as a JWT
    /// bearer grant (RFC 7523) from this client. No browser: the user
    /// logged in to the identity provider already.
    pub(super) fn identity_assertion(&mut self, scope: &[String]) -> Result<Tokens> {
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
    pub(super) fn workload_identity(&mut self, scope: &[String]) -> Result<Tokens> {
        let (Some(client_id), Some(assertion)) = (self.settings.client_id.clone(), self.settings.assertion.clone())
        else {
            return Err(self.fail("opts.auth.grant = \"jwt_bearer\" needs opts.auth.client_id and opts.auth.assertion"));
        };
        self.jwt_bearer(client_id, assertion, scope, true)
    }

    /// RFC 7523's JWT-bearer grant at the authorization server, with
    /// `assertion`; `for_resource` names the resource (the identity
    /// assertion of cross-app access names it already).
    pub(super) fn jwt_bearer(
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
}
