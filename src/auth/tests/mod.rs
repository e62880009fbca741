//! The login against the canned authorization server (`canned`), so
//! that each rule of `recover` is pinned by what went over the wire.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use serde_json::{json, Value};
use url::Url;

mod canned;

use super::dpop::Proofs;
use super::store::{self, Store};
use super::{pkce, Authorizer, Grant, IdentityProvider, Settings, User, DEFAULT_REDIRECT_URI};
use crate::codec::{self, Json};
use crate::error::Result;
use canned::AuthServer;

/// The user with a browser: answers the authorization URL with the
/// redirect the authorization server would send the browser to (a code,
/// the login's state, and `iss` when given), and notes each URL.
struct Browser {
    iss: Option<String>,
    asked: Vec<String>,
}

impl User for Browser {
    fn authorize(&mut self, url: &str) -> Result<Option<String>> {
        self.asked.push(url.to_string());
        let url = Url::parse(url).unwrap();
        let mut back = Url::parse(&query(&url, "redirect_uri").unwrap()).unwrap();
        back.query_pairs_mut().append_pair("code", "code-1").append_pair("state", &query(&url, "state").unwrap());
        if let Some(iss) = &self.iss {
            back.query_pairs_mut().append_pair("iss", iss);
        }
        Ok(Some(back.into()))
    }
}

fn query(url: &Url, name: &str) -> Option<String> {
    url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// A store in memory.
#[derive(Default)]
struct Memory(HashMap<String, Json>);

impl Store for Memory {
    fn load(&mut self, key: &str) -> Result<Option<Json>> {
        Ok(self.0.get(key).cloned())
    }

    fn save(&mut self, key: &str, record: &Json) -> Result<()> {
        self.0.insert(key.to_string(), record.clone());
        Ok(())
    }
}

impl Memory {
    /// The record under `key`, to read as JSON.
    fn record(&self, key: &str) -> Value {
        serde_json::from_slice(&codec::encode(&self.0[key])).unwrap()
    }

    /// The record of the login to `base/mcp` at the issuer `base`.
    fn login(&self, base: &str) -> Value {
        self.record(&store::key(base, &format!("{base}/mcp")))
    }

    fn keep_login(&mut self, base: &str, record: Value) {
        let record = codec::decode(record.to_string().as_bytes()).unwrap();
        self.0.insert(store::key(base, &format!("{base}/mcp")), record);
    }
}

/// `opts.auth` as the binding reads it when given only `grant`.
fn settings(grant: Grant) -> Settings {
    Settings {
        client_id: None,
        client_secret: None,
        client_metadata_url: None,
        client_name: "lua-mcp".into(),
        redirect_uri: DEFAULT_REDIRECT_URI.into(),
        grant,
        signing_key: None,
        identity: None,
        assertion: None,
        issuer: None,
        login_timeout: Duration::from_secs(10),
        timeout: Duration::from_secs(10),
        ca_pem: None,
        dpop: None,
    }
}

/// Sends the browser back to a web app rather than to a loopback listener.
fn at_app(settings: Settings) -> Settings {
    Settings { redirect_uri: "https://app.example/callback".into(), ..settings }
}

/// A machine with a pre-registered client and its secret.
fn machine() -> Settings {
    Settings {
        client_id: Some("machine".into()),
        client_secret: Some("s3cret".into()),
        ..settings(Grant::ClientCredentials)
    }
}

/// A client of the MCP server at `base/mcp`: its authorizer, the bearer
/// cell its requests read, its user and its store.
struct Session {
    server: AuthServer,
    authorizer: Authorizer,
    bearer: Arc<Mutex<Option<String>>>,
    user: Browser,
    store: Memory,
}

impl Session {
    fn new(server: AuthServer, settings: Settings) -> Session {
        let url = format!("{}/mcp", server.base);
        Session::at(server, &url, settings)
    }

    fn at(server: AuthServer, url: &str, settings: Settings) -> Session {
        let bearer = Arc::new(Mutex::new(None));
        let authorizer = Authorizer::new(settings, url, bearer.clone()).unwrap();
        let user = Browser { iss: Some(server.base.clone()), asked: Vec::new() };
        Session { server, authorizer, bearer, user, store: Memory::default() }
    }

    /// The server refused a request with a 401; `again`: one sent with
    /// credentials a login or refresh gave.
    fn refused(&mut self, again: bool) -> Result<bool> {
        let challenge = self.server.challenge();
        self.authorizer.recover(401, Some(&challenge), again, &mut self.user, Some(&mut self.store))
    }

    fn bearer(&self) -> Option<String> {
        self.bearer.lock().unwrap().clone()
    }
}

fn basic(id: &str, secret: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{id}:{secret}")))
}

/// The record kept for the next run: the tokens and the registration.
fn assert_saved(s: &Session, base: &str, access: &str, refresh: &str, client_id: &str) {
    let saved = s.store.login(base);
    assert_eq!(saved["access_token"], access);
    assert_eq!(saved["refresh_token"], refresh);
    assert_eq!(saved["client"]["client_id"], client_id);
}

/// A registration kept from an earlier run, with a stale token and no
/// refresh token, so that the next login needs the user.
fn saved_registration(base: &str, redirect_uri: &str) -> Value {
    json!({
        "access_token": "at-old",
        "expires_at": 1,
        "issuer": base,
        "resource": format!("{base}/mcp"),
        "client": {
            "client_id": "old-client",
            "client_secret": "old-secret",
            "method": "client_secret_basic",
            "redirect_uri": redirect_uri,
        },
    })
}

// Each grant gets a token.

#[test]
fn a_user_login_sends_the_pkce_verifier_whose_s256_challenge_went_to_the_browser() {
    let mut s = Session::new(AuthServer::start(), settings(Grant::AuthorizationCode));
    let base = s.server.base.clone();
    assert!(s.refused(false).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
    assert_eq!(
        s.server.requests(),
        [
            "GET /.well-known/oauth-protected-resource/mcp",
            "GET /.well-known/oauth-authorization-server",
            "POST /register",
            "POST /token"
        ]
    );
    let [url] = &s.user.asked[..] else { panic!("asked {:?}", s.user.asked) };
    let url = Url::parse(url).unwrap();
    let redirect_uri = query(&url, "redirect_uri").unwrap();
    assert!(redirect_uri.starts_with("http://127.0.0.1:") && redirect_uri.ends_with("/callback"), "{redirect_uri}");
    assert_eq!(query(&url, "response_type").as_deref(), Some("code"));
    assert_eq!(query(&url, "client_id").as_deref(), Some("client-1"));
    assert_eq!(query(&url, "code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(query(&url, "scope").as_deref(), Some("mcp"));
    assert_eq!(query(&url, "resource"), Some(format!("{base}/mcp")));
    let registered: Value = serde_json::from_str(&s.server.seen()[2].body).unwrap();
    assert_eq!(registered["redirect_uris"], json!([redirect_uri]));
    assert_eq!(registered["application_type"], "native");
    assert_eq!(registered["token_endpoint_auth_method"], "client_secret_basic");
    let token = &s.server.token_requests()[0];
    assert_eq!(token.form("grant_type").as_deref(), Some("authorization_code"));
    assert_eq!(token.form("code").as_deref(), Some("code-1"));
    assert_eq!(token.form("redirect_uri"), Some(redirect_uri));
    assert_eq!(token.form("resource"), Some(format!("{base}/mcp")));
    let verifier = token.form("code_verifier").unwrap();
    assert_eq!(Some(pkce::s256(&verifier)), query(&url, "code_challenge"));
    assert_eq!(token.header("authorization"), Some(basic("client-1", "secret-1").as_str()));
    // Kept for the next run: the tokens and the registration.
    assert_saved(&s, &base, "at-1", "rt-1", "client-1");
}

#[test]
fn a_machine_sends_its_secret_by_basic_unless_the_server_takes_it_only_in_the_body() {
    for (methods, by_basic) in
        [(vec!["client_secret_basic", "client_secret_post"], true), (vec!["client_secret_post"], false)]
    {
        let server = AuthServer::start();
        server.set(|b| b.auth_methods = methods);
        let mut s = Session::new(server, machine());
        let base = s.server.base.clone();
        assert!(s.refused(false).unwrap());
        assert_eq!(s.bearer().as_deref(), Some("at-1"));
        assert!(s.user.asked.is_empty());
        assert!(!s.server.requests().contains(&"POST /register".to_string()));
        let [token] = &s.server.token_requests()[..] else { panic!("{:?}", s.server.requests()) };
        assert_eq!(token.form("grant_type").as_deref(), Some("client_credentials"));
        assert_eq!(token.form("scope").as_deref(), Some("mcp"));
        assert_eq!(token.form("resource"), Some(format!("{base}/mcp")));
        match by_basic {
            true => {
                assert_eq!(token.header("authorization"), Some(basic("machine", "s3cret").as_str()));
                assert_eq!(token.form("client_secret"), None);
            }
            false => {
                assert_eq!(token.header("authorization"), None);
                assert_eq!(token.form("client_id").as_deref(), Some("machine"));
                assert_eq!(token.form("client_secret").as_deref(), Some("s3cret"));
            }
        }
        // The secret is bound to the first issuer it went to.
        assert_eq!(s.store.record("secret-of machine")["issuer"], base);
    }
}

#[test]
fn a_machine_with_a_key_signs_an_assertion_whose_audience_is_the_issuer() {
    // Any scalar below the curve order is a key.
    let key = SigningKey::from_slice(&[7; 32]).unwrap();
    let public = VerifyingKey::from(&key);
    let with_key =
        Settings { client_id: Some("machine".into()), signing_key: Some(key), ..settings(Grant::ClientCredentials) };
    let mut s = Session::new(AuthServer::start(), with_key);
    assert!(s.refused(false).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
    let [token] = &s.server.token_requests()[..] else { panic!("{:?}", s.server.requests()) };
    assert_eq!(token.header("authorization"), None);
    assert_eq!(token.form("client_id").as_deref(), Some("machine"));
    assert_eq!(
        token.form("client_assertion_type").as_deref(),
        Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    );
    let jwt = token.form("client_assertion").unwrap();
    let (signed, signature) = jwt.rsplit_once('.').unwrap();
    let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(signature).unwrap()).unwrap();
    assert!(public.verify(signed.as_bytes(), &signature).is_ok());
    let claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(signed.split('.').nth(1).unwrap()).unwrap()).unwrap();
    assert_eq!(claims["aud"], s.server.base);
    assert_eq!(claims["iss"], "machine");
    assert_eq!(claims["sub"], "machine");
}

#[test]
fn cross_app_access_trades_the_id_token_at_the_identity_provider_then_the_assertion_at_the_issuer() {
    let server = AuthServer::start();
    let base = server.base.clone();
    let cross_app = Settings {
        client_id: Some("app".into()),
        identity: Some(IdentityProvider {
            token_endpoint: format!("{base}/idp/token"),
            id_token: "id-token-of-alice".into(),
            client_id: Some("idp-client".into()),
            client_secret: None,
        }),
        ..settings(Grant::IdentityAssertion)
    };
    let mut s = Session::new(server, cross_app);
    assert!(s.refused(false).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
    assert!(s.user.asked.is_empty());
    let seen = s.server.seen();
    let exchange = seen.iter().find(|r| r.path() == "/idp/token").unwrap();
    assert_eq!(exchange.form("grant_type").as_deref(), Some("urn:ietf:params:oauth:grant-type:token-exchange"));
    assert_eq!(exchange.form("requested_token_type").as_deref(), Some("urn:ietf:params:oauth:token-type:id-jag"));
    assert_eq!(exchange.form("subject_token").as_deref(), Some("id-token-of-alice"));
    assert_eq!(exchange.form("subject_token_type").as_deref(), Some("urn:ietf:params:oauth:token-type:id_token"));
    assert_eq!(exchange.form("audience"), Some(base.clone()));
    assert_eq!(exchange.form("resource"), Some(format!("{base}/mcp")));
    assert_eq!(exchange.form("client_id").as_deref(), Some("idp-client"));
    let [token] = &s.server.token_requests()[..] else { panic!("{:?}", s.server.requests()) };
    assert_eq!(token.form("grant_type").as_deref(), Some("urn:ietf:params:oauth:grant-type:jwt-bearer"));
    assert_eq!(token.form("assertion").as_deref(), Some("id-jag-of-alice"));
    assert_eq!(token.form("client_id").as_deref(), Some("app"));
    // The identity assertion names the resource already.
    assert_eq!(token.form("resource"), None);
}

#[test]
fn a_workload_presents_its_platform_token_as_a_jwt_bearer_grant_for_the_resource() {
    let workload = Settings {
        client_id: Some("workload".into()),
        assertion: Some("platform-token".into()),
        ..settings(Grant::JwtBearer)
    };
    let mut s = Session::new(AuthServer::start(), workload);
    assert!(s.refused(false).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
    let [token] = &s.server.token_requests()[..] else { panic!("{:?}", s.server.requests()) };
    assert_eq!(token.form("grant_type").as_deref(), Some("urn:ietf:params:oauth:grant-type:jwt-bearer"));
    assert_eq!(token.form("assertion").as_deref(), Some("platform-token"));
    assert_eq!(token.form("client_id").as_deref(), Some("workload"));
    assert_eq!(token.form("resource"), Some(format!("{}/mcp", s.server.base)));
}

// The redirect's `iss` (RFC 9207).

#[test]
fn a_redirect_from_another_issuer_is_refused_before_the_code_is_redeemed_promised_or_not() {
    for promises_iss in [true, false] {
        let server = AuthServer::start();
        server.set(|b| b.promises_iss = promises_iss);
        let mut s = Session::new(server, settings(Grant::AuthorizationCode));
        s.user.iss = Some("https://attacker.invalid".into());
        let e = s.refused(false).unwrap_err().to_string();
        let ours = &s.server.base;
        assert_eq!(
            e,
            s.server.failed(&format!(
                "the login came back from the issuer https://attacker.invalid, not from {ours} where it was sent \
                 (RFC 9207 mix-up defence); the code was not redeemed"
            ))
        );
        assert!(s.server.token_requests().is_empty());
        assert_eq!(s.bearer(), None);
    }
}

#[test]
fn a_redirect_without_iss_is_refused_where_the_metadata_promises_it_and_taken_where_not() {
    let mut s = Session::new(AuthServer::start(), settings(Grant::AuthorizationCode));
    s.user.iss = None;
    let e = s.refused(false).unwrap_err().to_string();
    let ours = &s.server.base;
    assert_eq!(
        e,
        s.server.failed(&format!(
            "the login came back without iss, which the authorization server {ours} promises \
             (authorization_response_iss_parameter_supported); the code was not redeemed"
        ))
    );
    assert!(s.server.token_requests().is_empty());

    let server = AuthServer::start();
    server.set(|b| b.promises_iss = false);
    let mut s = Session::new(server, settings(Grant::AuthorizationCode));
    s.user.iss = None;
    assert!(s.refused(false).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
}

#[test]
fn authorization_server_metadata_naming_another_issuer_stops_the_login_before_anything_is_sent() {
    let server = AuthServer::start();
    server.set(|b| b.claimed_issuer = Some("https://elsewhere.example".into()));
    let mut s = Session::new(server, settings(Grant::AuthorizationCode));
    let base = s.server.base.clone();
    let e = s.refused(false).unwrap_err().to_string();
    assert_eq!(
        e,
        s.server.failed(&format!(
            "the authorization server metadata at {base}/.well-known/oauth-authorization-server \
             names the issuer https://elsewhere.example, not {base}"
        ))
    );
    assert!(s.user.asked.is_empty());
    assert!(s.server.requests().iter().all(|r| r.starts_with("GET /.well-known/")));
}

// Refresh.

/// A session whose store holds a login from an earlier run: a token with
/// a refresh token, from a registered client.
fn restarted() -> Session {
    let mut s = Session::new(AuthServer::start(), at_app(settings(Grant::AuthorizationCode)));
    let base = s.server.base.clone();
    let mut saved = saved_registration(&base, "https://app.example/callback");
    saved["refresh_token"] = json!("rt-old");
    saved.as_object_mut().unwrap().remove("expires_at");
    s.store.keep_login(&base, saved);
    s
}

#[test]
fn a_refused_stored_token_is_refreshed_before_a_new_login() {
    let mut s = restarted();
    let base = s.server.base.clone();
    // The first refusal (a request without a token) puts the stored one in place.
    assert!(s.refused(false).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-old"));
    assert!(s.server.token_requests().is_empty());
    // That one refused too: refreshed, with the client it was issued to.
    assert!(s.refused(true).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
    assert!(s.user.asked.is_empty());
    assert!(!s.server.requests().contains(&"POST /register".to_string()));
    let [token] = &s.server.token_requests()[..] else { panic!("{:?}", s.server.requests()) };
    assert_eq!(token.form("grant_type").as_deref(), Some("refresh_token"));
    assert_eq!(token.form("refresh_token").as_deref(), Some("rt-old"));
    assert_eq!(token.form("resource"), Some(format!("{base}/mcp")));
    assert_eq!(token.header("authorization"), Some(basic("old-client", "old-secret").as_str()));
    // The rotated refresh token replaces the spent one.
    assert_saved(&s, &base, "at-1", "rt-1", "old-client");
}

#[test]
fn a_refresh_token_the_server_does_not_rotate_is_kept() {
    let mut s = restarted();
    s.server.set(|b| b.rotates = false);
    assert!(s.refused(false).unwrap());
    assert!(s.refused(true).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
    assert_eq!(s.store.login(&s.server.base)["refresh_token"], "rt-old");
}

#[test]
fn a_refresh_refused_as_invalid_grant_falls_back_to_a_new_login() {
    let mut s = restarted();
    s.server.set(|b| b.refuses_refresh = true);
    assert!(s.refused(false).unwrap());
    assert!(s.refused(true).unwrap());
    assert_eq!(s.user.asked.len(), 1);
    let grants: Vec<_> = s.server.token_requests().iter().map(|t| t.form("grant_type").unwrap()).collect();
    assert_eq!(grants, ["refresh_token", "authorization_code"]);
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
    assert_eq!(s.store.login(&s.server.base)["refresh_token"], "rt-1");
}

#[test]
fn a_token_a_login_just_gave_that_is_refused_gets_no_second_login() {
    let mut s = Session::new(AuthServer::start(), machine());
    assert!(s.refused(false).unwrap());
    let before = s.server.requests().len();
    assert!(!s.refused(true).unwrap());
    assert_eq!(s.server.requests().len(), before);
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
}

// Re-registration.

#[test]
fn a_saved_registration_is_used_again_while_its_redirect_uri_is_the_same() {
    let mut s = Session::new(AuthServer::start(), at_app(settings(Grant::AuthorizationCode)));
    let base = s.server.base.clone();
    s.store.keep_login(&base, saved_registration(&base, "https://app.example/callback"));
    assert!(s.refused(false).unwrap());
    assert!(!s.server.requests().contains(&"POST /register".to_string()));
    let [token] = &s.server.token_requests()[..] else { panic!("{:?}", s.server.requests()) };
    assert_eq!(token.header("authorization"), Some(basic("old-client", "old-secret").as_str()));
    assert_eq!(query(&Url::parse(&s.user.asked[0]).unwrap(), "client_id").as_deref(), Some("old-client"));
}

#[test]
fn a_saved_registration_for_another_redirect_uri_is_made_again() {
    let mut s = Session::new(AuthServer::start(), at_app(settings(Grant::AuthorizationCode)));
    let base = s.server.base.clone();
    s.store.keep_login(&base, saved_registration(&base, "https://old.example/callback"));
    assert!(s.refused(false).unwrap());
    let registration = s.server.seen().into_iter().find(|r| r.path() == "/register").unwrap();
    let asked: Value = serde_json::from_str(&registration.body).unwrap();
    assert_eq!(asked["redirect_uris"], json!(["https://app.example/callback"]));
    assert_eq!(asked["application_type"], "web");
    let [token] = &s.server.token_requests()[..] else { panic!("{:?}", s.server.requests()) };
    assert_eq!(token.header("authorization"), Some(basic("client-1", "secret-1").as_str()));
    let saved = s.store.login(&base);
    assert_eq!(saved["client"]["client_id"], "client-1");
    assert_eq!(saved["client"]["redirect_uri"], "https://app.example/callback");
}

#[test]
fn a_saved_registration_whose_loopback_port_is_taken_is_made_again_for_the_port_listened_on() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let old_uri = format!("http://127.0.0.1:{}/callback", taken.local_addr().unwrap().port());
    let mut s = Session::new(AuthServer::start(), settings(Grant::AuthorizationCode));
    let base = s.server.base.clone();
    s.store.keep_login(&base, saved_registration(&base, &old_uri));
    assert!(s.refused(false).unwrap());
    let redirect_uri = query(&Url::parse(&s.user.asked[0]).unwrap(), "redirect_uri").unwrap();
    assert_ne!(redirect_uri, old_uri);
    let registration = s.server.seen().into_iter().find(|r| r.path() == "/register").unwrap();
    let asked: Value = serde_json::from_str(&registration.body).unwrap();
    assert_eq!(asked["redirect_uris"], json!([redirect_uri]));
    assert_eq!(s.store.login(&base)["client"]["redirect_uri"], json!(redirect_uri));
    drop(taken);
}

#[test]
fn an_authorization_server_named_mid_session_gets_a_registration_of_its_own_and_none_of_the_old_tokens() {
    let mut s = Session::new(AuthServer::start(), settings(Grant::AuthorizationCode));
    assert!(s.refused(false).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
    // The resource now names another authorization server.
    let other = AuthServer::start();
    s.server.set(|b| b.names_issuer = Some(other.base.clone()));
    s.user.iss = Some(other.base.clone());
    let first_seen = s.server.requests().len();
    assert!(s.refused(false).unwrap());
    assert_eq!(other.requests(), ["GET /.well-known/oauth-authorization-server", "POST /register", "POST /token"]);
    let [token] = &other.token_requests()[..] else { panic!("{:?}", other.requests()) };
    assert_eq!(token.form("grant_type").as_deref(), Some("authorization_code"));
    assert_eq!(token.header("authorization"), Some(basic("client-1", "secret-1").as_str()));
    // The first one was asked only for the resource's metadata.
    assert_eq!(s.server.requests()[first_seen..], ["GET /.well-known/oauth-protected-resource/mcp"]);
    assert_eq!(query(&Url::parse(&s.user.asked[1]).unwrap(), "client_id").as_deref(), Some("client-1"));
    let key = store::key(&other.base, &format!("{}/mcp", s.server.base));
    assert_eq!(s.store.record(&key)["access_token"], "at-1");
}

// Plain HTTP.

#[test]
fn plain_http_to_another_host_gets_no_login_and_to_this_machine_does() {
    let server = AuthServer::start();
    // Reaches 127.0.0.1, but as written it is another host.
    let port = Url::parse(&server.base).unwrap().port().unwrap();
    let remote = format!("http://[::ffff:7f00:1]:{port}/mcp");
    let mut s = Session::at(server, &remote, machine());
    let e = s.refused(false).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "MCP authorization for {remote} failed: it is plain HTTP on another host, and a login would send \
             its tokens in clear; HTTPS is required (plain HTTP is allowed only to this machine: localhost, \
             127.0.0.0/8 or [::1])"
        )
    );
    assert!(s.server.requests().is_empty());

    let mut s = Session::new(s.server, machine());
    assert!(s.refused(false).unwrap());
    assert_eq!(s.bearer().as_deref(), Some("at-1"));
}

#[test]
fn an_endpoint_over_plain_http_on_another_host_is_sent_nothing() {
    let server = AuthServer::start();
    server.set(|b| b.token_endpoint = Some("http://192.0.2.1/token".into()));
    let mut s = Session::new(server, machine());
    let e = s.refused(false).unwrap_err().to_string();
    assert_eq!(
        e,
        s.server.failed(
            "the authorization server's endpoint http://192.0.2.1/token is not HTTPS; \
             codes and secrets are not sent over it"
        )
    );
}

#[test]
fn a_refused_registration_names_the_servers_error() {
    let server = AuthServer::start();
    server.set(|b| b.refuses_registration = true);
    let mut s = Session::new(server, settings(Grant::AuthorizationCode));
    let e = s.refused(false).unwrap_err().to_string();
    let base = &s.server.base;
    assert_eq!(
        e,
        s.server.failed(&format!(
            "the client registration at {base}/register was refused (HTTP 400: invalid_redirect_uri (not on the list))"
        ))
    );
    assert!(s.user.asked.is_empty());
}

// DPoP.

fn with_dpop(settings: Settings) -> Settings {
    Settings { dpop: Some(Arc::new(Proofs::new().unwrap())), ..settings }
}

/// The claims of a JWT, unchecked.
fn claims(jwt: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(jwt.split('.').nth(1).unwrap()).unwrap()).unwrap()
}

#[test]
fn a_dpop_bound_token_is_saved_with_its_key_and_comes_back_only_where_dpop_is_on() {
    let server = AuthServer::start();
    server.set(|b| b.binds_dpop = true);
    let base = server.base.clone();
    let mut s = Session::new(server.clone(), with_dpop(machine()));
    assert!(s.refused(false).unwrap());
    let proof = claims(s.server.token_requests()[0].header("dpop").expect("a proof at the token endpoint"));
    assert_eq!((proof["htm"].as_str(), proof["htu"].as_str()), (Some("POST"), Some(format!("{base}/token").as_str())));
    assert!(proof.get("ath").is_none(), "no token to hash yet");
    let proofs = s.authorizer.dpop().unwrap();
    assert!(proofs.is_bound());
    let saved = s.store.login(&base);
    assert_eq!(
        (saved["token_type"].as_str(), saved["dpop_key"].as_str()),
        (Some("DPoP"), Some(proofs.key_text().as_str()))
    );

    // A later run with DPoP on takes the token and its key back: no token request.
    let mut later = Session::new(server.clone(), with_dpop(machine()));
    later.store.keep_login(&base, saved.clone());
    assert!(later.refused(false).unwrap());
    assert_eq!(later.bearer().as_deref(), Some("at-1"));
    assert_eq!(later.authorizer.dpop().unwrap().key_text(), proofs.key_text());
    assert_eq!(server.token_requests().len(), 1);

    // Without DPoP the bound token is useless: a new login, a bearer token.
    let mut plain = Session::new(server.clone(), machine());
    plain.store.keep_login(&base, saved);
    assert!(plain.refused(false).unwrap());
    assert_eq!(plain.bearer().as_deref(), Some("at-2"));
    assert!(server.token_requests()[1].header("dpop").is_none());
}

#[test]
fn a_bearer_token_from_a_server_without_dpop_is_used_as_a_bearer_one() {
    let mut s = Session::new(AuthServer::start(), with_dpop(machine()));
    assert!(s.refused(false).unwrap());
    assert!(s.server.token_requests()[0].header("dpop").is_some(), "the proof is offered");
    assert!(!s.authorizer.dpop().unwrap().is_bound());
    assert!(s.store.login(&s.server.base).get("dpop_key").is_none(), "no key kept for a bearer token");
}
