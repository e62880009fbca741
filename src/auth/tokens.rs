//! The tokens: kept in and offered from the store, refreshed, put where
//! every HTTP request reads them, and the token endpoint's requests and
//! replies that every grant shares.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use url::form_urlencoded;

use super::discovery::text;
use super::dpop;
use super::store::{self, Store};

use super::{assertion, now_seconds, Authorizer, ClientIdentity, Origin, Tokens, REFRESH_MARGIN_SECONDS};
use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::wire::headers;
use crate::wire::interrupted;

impl Authorizer {
    pub(super) fn store_key(&self) -> String {
        store::key(&self.issuer().issuer, &self.resource)
    }

    /// A saved login for this issuer and resource: its registration and
    /// tokens.
    pub(super) fn load(&mut self, store: &mut Option<&mut dyn Store>) -> Result<()> {
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
            let bound = text(&record, "token_type").is_some_and(|t| t.eq_ignore_ascii_case("dpop"));
            // A bound token is worth nothing without its key: kept only
            // where DPoP is on and the key came back with it.
            let key = text(&record, "dpop_key");
            let restored = match (&self.settings.dpop, key) {
                (Some(proofs), Some(key)) => proofs.restore_key(&key),
                _ => false,
            };
            if bound && !restored {
                return Ok(());
            }
            self.tokens = Some(Tokens {
                access,
                refresh: text(&record, "refresh_token"),
                expires_at: match record.get("expires_at") {
                    Some(Json::Int(at)) => Some(*at),
                    _ => None,
                },
                scope: text(&record, "scope"),
                bound,
            });
            self.origin = Origin::Stored;
        }
        Ok(())
    }

    /// Puts a loaded token in place if it is not the one just refused and
    /// has not expired.
    pub(super) fn offer_loaded(&mut self) -> bool {
        let Some(tokens) = &self.tokens else { return false };
        let current = self.bearer.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let fresh = tokens.expires_at.is_none_or(|at| at - now_seconds() > REFRESH_MARGIN_SECONDS);
        if current.as_deref() == Some(tokens.access.as_str()) || !fresh {
            return false;
        }
        self.set_bearer();
        true
    }

    pub(super) fn save(&self, store: &mut Option<&mut dyn Store>) -> Result<()> {
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
        if let (true, Some(proofs)) = (tokens.bound, &self.settings.dpop) {
            record.push(("dpop_key", Json::str(proofs.key_text())));
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
        if tokens.bound {
            record.push(("token_type", Json::str("DPoP")));
        }
        store.save(&self.store_key(), &Json::object(record))
    }

    pub(super) fn set_bearer(&self) {
        let access = self.tokens.as_ref().map(|t| t.access.clone());
        if let Some(proofs) = &self.settings.dpop {
            proofs.set_bound(self.tokens.as_ref().is_some_and(|t| t.bound));
        }
        *self.bearer.lock().unwrap_or_else(|p| p.into_inner()) = access;
    }

    /// A new access token from the refresh token.
    pub(super) fn refresh(&mut self) -> Result<()> {
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

    /// A token endpoint request, authenticated as `client` says.
    pub(super) fn token_request(&self, mut form: Vec<(&str, String)>, client: &ClientIdentity) -> Result<Tokens> {
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
        // Bearer also where a proof was sent: a server without DPoP
        // ignores it (RFC 9449 section 5).
        let bound = token_type.eq_ignore_ascii_case("dpop") && self.settings.dpop.is_some();
        if !token_type.eq_ignore_ascii_case("bearer") && !bound {
            let hint = if token_type.eq_ignore_ascii_case("dpop") {
                "set opts.auth.dpop = true to use DPoP-bound tokens"
            } else {
                "this client sends Bearer and DPoP tokens only"
            };
            return Err(self.fail(format!("the token endpoint {endpoint} gave a {token_type} token; {hint}")));
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
        Ok(Tokens { access, refresh, expires_at, scope: text(&reply, "scope"), bound })
    }

    /// A form POSTed to a token endpoint; its JSON reply, which must come
    /// with a 200.
    pub(super) fn post_form(&self, endpoint: &str, form: &[(&str, String)], basic: Option<String>) -> Result<Json> {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        // The proof goes to this issuer's token endpoint only (not to an
        // identity provider's); a nonce it asks for is worth one more try.
        let proofs = self.settings.dpop.as_ref().filter(|_| endpoint == self.issuer().token_endpoint);
        let mut tries = 0;
        let (status, reply) = loop {
            tries += 1;
            let mut request = self
                .agent
                .post(endpoint)
                .header(headers::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(headers::ACCEPT, "application/json");
            if let Some(basic) = &basic {
                request = request.header(headers::AUTHORIZATION, basic.as_str());
            }
            if let Some(proofs) = proofs {
                request = request.header(dpop::DPOP, proofs.proof("POST", endpoint, None)?);
            }
            let response = request.send(body.as_bytes());
            let nonce = response.as_ref().ok().and_then(|r| r.headers().get(dpop::DPOP_NONCE)?.to_str().ok());
            let new_nonce = proofs.is_some_and(|p| p.remember_nonce(endpoint, nonce));
            let (status, reply) = self.read_reply(endpoint, response)?;
            let asks = status == 400 && dpop::asks_for_nonce(text(&reply, "error").as_deref());
            if !(asks && new_nonce && tries == 1) {
                break (status, reply);
            }
        };
        if status != 200 {
            return Err(self.fail(format!(
                "the token endpoint {endpoint} refused the request (HTTP {status}{})",
                oauth_error(&reply)
            )));
        }
        Ok(reply)
    }

    /// A request to the authorization server (or identity provider) that
    /// got no whole answer: Ctrl-C, the time limit, or the connection.
    pub(super) fn request_failed(&self, endpoint: &str, e: ureq::Error) -> Error {
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
    pub(super) fn read_reply(
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
pub(super) fn oauth_error(reply: &Json) -> String {
    let quote = |text: String| crate::server_text::quoted_str(&text, crate::server_text::TEXT_CHARS);
    match (text(reply, "error").map(quote), text(reply, "error_description").map(quote)) {
        (Some(e), Some(d)) => format!(": {e} ({d})"),
        (Some(e), None) => format!(": {e}"),
        _ => String::new(),
    }
}
