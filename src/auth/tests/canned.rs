//! The canned authorization server the login's tests talk to: a small
//! HTTP/1.1 server on 127.0.0.1 answering metadata, registration and
//! token requests with fixed JSON as its [`Behaviour`] says, noting every
//! request it got.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::{json, Value};
use url::form_urlencoded;

/// A request as the canned server received it.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub(super) method: String,
    /// Path and query.
    pub(super) target: String,
    /// Names in lower case.
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: String,
}

impl Seen {
    pub(super) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// A field of a form body.
    pub(super) fn form(&self, name: &str) -> Option<String> {
        form_urlencoded::parse(self.body.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
    }
}

/// What the canned server answers; a test changes it between steps.
pub(super) struct Behaviour {
    /// `token_endpoint_auth_methods_supported`.
    pub(super) auth_methods: Vec<&'static str>,
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    pub(super) promises_iss: bool,
    /// The issuer its metadata claims, where not its own address.
    pub(super) claimed_issuer: Option<String>,
    /// The token endpoint its metadata names, where not its own.
    pub(super) token_endpoint: Option<String>,
    /// The authorization server its resource metadata names, where not
    /// itself: the resource moved to another one.
    pub(super) names_issuer: Option<String>,
    /// A refresh gives a new refresh token.
    pub(super) rotates: bool,
    /// A refresh is refused (400 invalid_grant).
    pub(super) refuses_refresh: bool,
    /// Registration is refused (400 invalid_redirect_uri).
    pub(super) refuses_registration: bool,
    /// A token request with a DPoP proof gets a DPoP-bound token.
    pub(super) binds_dpop: bool,
    /// Clients registered so far: the next is `client-N+1`.
    pub(super) clients: usize,
    /// Tokens issued so far: the next are `at-N+1` and `rt-N+1`.
    pub(super) tokens: usize,
}

impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour {
            auth_methods: vec!["client_secret_basic"],
            promises_iss: true,
            claimed_issuer: None,
            token_endpoint: None,
            names_issuer: None,
            rotates: true,
            refuses_refresh: false,
            refuses_registration: false,
            binds_dpop: false,
            clients: 0,
            tokens: 0,
        }
    }
}

/// The MCP server's metadata and its authorization server, in one, at
/// `base`: the resource is `base/mcp`, the issuer `base`. A clone is
/// the same server.
#[derive(Clone)]
pub(super) struct AuthServer {
    pub(super) base: String,
    pub(super) seen: Arc<Mutex<Vec<Seen>>>,
    pub(super) behaviour: Arc<Mutex<Behaviour>>,
}

impl AuthServer {
    /// Serves on a port of its own until the test process ends (the
    /// thread stays parked in `accept`, which costs nothing).
    pub(super) fn start() -> AuthServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = AuthServer { base, seen: Arc::default(), behaviour: Arc::new(Mutex::new(Behaviour::default())) };
        let (base, seen, behaviour) = (server.base.clone(), server.seen.clone(), server.behaviour.clone());
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let Some((mut stream, request)) = read_request(stream) else { continue };
                let (status, reply) = answer(&base, &mut behaviour.lock().unwrap(), &request);
                seen.lock().unwrap().push(request);
                let body = reply.to_string();
                // One request a connection: the login's agent keeps none idle.
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} Canned\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        server
    }

    pub(super) fn set(&self, change: impl FnOnce(&mut Behaviour)) {
        change(&mut self.behaviour.lock().unwrap());
    }

    pub(super) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// "METHOD /path" of each request, in order.
    pub(super) fn requests(&self) -> Vec<String> {
        self.seen().iter().map(|r| format!("{} {}", r.method, r.path())).collect()
    }

    /// The requests to the token endpoint.
    pub(super) fn token_requests(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|r| r.path() == "/token").collect()
    }

    /// The 401 of the MCP server at `base/mcp`, naming its metadata.
    pub(super) fn challenge(&self) -> String {
        format!(
            r#"Bearer error="invalid_token", resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
            self.base
        )
    }

    /// What a failed login raises, for a server at `base/mcp`.
    pub(super) fn failed(&self, detail: &str) -> String {
        format!("MCP authorization for {}/mcp failed: {detail}", self.base)
    }
}

/// Reads one request: head, then as much body as Content-Length says.
pub(super) fn read_request(stream: TcpStream) -> Option<(TcpStream, Seen)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut words = line.split_whitespace();
    let (method, target) = (words.next()?.to_string(), words.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let Some((name, value)) = header.trim_end().split_once(':') else { break };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok());
    let mut body = vec![0; length.unwrap_or(0)];
    reader.read_exact(&mut body).ok()?;
    let body = String::from_utf8(body).ok()?;
    Some((reader.into_inner(), Seen { method, target, headers, body }))
}

/// The canned answers, by path. `/authorize` is not among them: the
/// browser's part is played by [`Browser`], which never asks it.
pub(super) fn answer(base: &str, behaviour: &mut Behaviour, request: &Seen) -> (u16, Value) {
    let issuer = base.to_string();
    match (request.method.as_str(), request.path()) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") => (
            200,
            json!({
                "resource": format!("{base}/mcp"),
                "authorization_servers": [behaviour.names_issuer.clone().unwrap_or(issuer)],
                "scopes_supported": ["mcp"],
            }),
        ),
        ("GET", "/.well-known/oauth-authorization-server") => (
            200,
            json!({
                "issuer": behaviour.claimed_issuer.clone().unwrap_or(issuer),
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": behaviour.token_endpoint.clone().unwrap_or(format!("{base}/token")),
                "registration_endpoint": format!("{base}/register"),
                "token_endpoint_auth_methods_supported": behaviour.auth_methods,
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": behaviour.promises_iss,
            }),
        ),
        ("POST", "/register") if behaviour.refuses_registration => {
            (400, json!({"error": "invalid_redirect_uri", "error_description": "not on the list"}))
        }
        ("POST", "/register") => {
            behaviour.clients += 1;
            let n = behaviour.clients;
            let asked: Value = serde_json::from_str(&request.body).unwrap_or_default();
            let reply = json!({
                "client_id": format!("client-{n}"),
                "client_secret": format!("secret-{n}"),
                "token_endpoint_auth_method": "client_secret_basic",
                "redirect_uris": asked["redirect_uris"],
            });
            (201, reply)
        }
        ("POST", "/token") => {
            let grant = request.form("grant_type").unwrap_or_default();
            if grant == "refresh_token" && behaviour.refuses_refresh {
                return (400, json!({"error": "invalid_grant", "error_description": "refresh token not accepted"}));
            }
            behaviour.tokens += 1;
            let n = behaviour.tokens;
            let bound = behaviour.binds_dpop && request.header("dpop").is_some();
            let token_type = if bound { "DPoP" } else { "Bearer" };
            let mut reply = json!({"access_token": format!("at-{n}"), "token_type": token_type, "expires_in": 3600});
            let refreshable = grant == "authorization_code" || (grant == "refresh_token" && behaviour.rotates);
            if refreshable {
                reply["refresh_token"] = json!(format!("rt-{n}"));
            }
            (200, reply)
        }
        // The enterprise identity provider of cross-app access.
        ("POST", "/idp/token") => (
            200,
            json!({
                "access_token": "id-jag-of-alice",
                "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                "token_type": "N_A",
            }),
        ),
        _ => (404, json!({"error": "not_found"})),
    }
}
