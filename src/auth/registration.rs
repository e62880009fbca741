//! Who the client is at the authorization server: the identity given in
//! `opts.auth`, one registered before (kept in the store), a client
//! metadata document's URL, or a dynamic registration (RFC 7591), made
//! again when the redirect URI it was registered with has changed.

use super::discovery::text;
use super::tokens::oauth_error;

use super::{Authorizer, ClientIdentity};
use crate::codec::{self, Json};
use crate::error::Result;
use crate::wire::headers;

impl Authorizer {
    /// Who we are: pre-registered (`opts.auth.client_id`), a Client ID
    /// Metadata Document where the server takes one, a registration kept
    /// from before for this redirect URI, else a new dynamic registration
    /// (RFC 7591).
    pub(super) fn identify(&mut self, redirect_uri: &str) -> Result<ClientIdentity> {
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
            .header(headers::CONTENT_TYPE, "application/json")
            .header(headers::ACCEPT, "application/json")
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
    pub(super) fn configured_identity(&self) -> Option<ClientIdentity> {
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
}

/// What a registration says the client is (OpenID Connect's
/// `application_type`, which the 2026-07-28 revision asks every
/// registration to send): a program on the user's machine, whose browser
/// comes back to a loopback address, is "native"; one that receives it
/// elsewhere is "web".
pub(super) fn application_type(redirect_uri: &str) -> &'static str {
    let host = url::Url::parse(redirect_uri).ok().and_then(|u| u.host_str().map(str::to_string));
    match host.as_deref() {
        Some("127.0.0.1" | "localhost" | "[::1]") => "native",
        _ => "web",
    }
}
