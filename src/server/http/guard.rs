//! Who may talk to a listening server. A page in a browser can make the
//! browser send requests to any address, loopback included, and with DNS
//! rebinding make them look same-origin: so the Host a request names and
//! the Origin a browser adds are checked against what this server is
//! (403 otherwise, as the specification asks), and a bearer token, when
//! the server has one, is required of every request (401, with the
//! challenge that says so).

use sha2::{Digest, Sha256};

use super::request::Request;

pub struct Guard {
    /// Host names (lower case, no port) requests may name; empty: any.
    hosts: Vec<String>,
    /// Origins allowed besides those of the hosts above, exactly as a
    /// browser sends them (`https://app.example`).
    origins: Vec<String>,
    token: Option<Vec<u8>>,
}

/// Why a request is turned away: its status, words for the client, and
/// for a 401 the WWW-Authenticate challenge.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub why: String,
    pub challenge: Option<String>,
}

/// The names a loopback address answers to.
pub const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

impl Guard {
    pub fn new(hosts: Vec<String>, origins: Vec<String>, token: Option<Vec<u8>>) -> Guard {
        Guard { hosts: hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect(), origins, token }
    }

    pub fn check(&self, request: &Request) -> Result<(), Refusal> {
        self.check_host(request)?;
        self.check_origin(request)?;
        self.check_token(request)
    }

    fn check_host(&self, request: &Request) -> Result<(), Refusal> {
        if self.hosts.is_empty() {
            return Ok(());
        }
        let host = request.header_text("host").map(host_name);
        match host {
            Some(name) if self.hosts.contains(&name) => Ok(()),
            Some(name) => Err(forbidden(format!("the Host header names {name:?}, which is not this server"))),
            None => Err(Refusal { status: 400, why: "the request has no Host header".into(), challenge: None }),
        }
    }

    fn check_origin(&self, request: &Request) -> Result<(), Refusal> {
        let Some(origin) = request.header_text("origin") else { return Ok(()) };
        if self.origins.iter().any(|o| o == origin) {
            return Ok(());
        }
        let host = origin.split_once("://").map(|(_, rest)| host_name(rest));
        match host {
            Some(name) if !self.hosts.is_empty() && self.hosts.contains(&name) => Ok(()),
            _ => Err(forbidden(format!("requests from the origin {origin:?} are not allowed"))),
        }
    }

    fn check_token(&self, request: &Request) -> Result<(), Refusal> {
        let Some(token) = &self.token else { return Ok(()) };
        let given = request.header("authorization").and_then(|v| v.strip_prefix(b"Bearer "));
        match given {
            Some(given) if same_secret(given, token) => Ok(()),
            Some(_) => Err(Refusal {
                status: 401,
                why: "the bearer token is not this server's".into(),
                challenge: Some(r#"Bearer error="invalid_token""#.into()),
            }),
            None => Err(Refusal {
                status: 401,
                why: "this server needs a bearer token (Authorization: Bearer ...)".into(),
                challenge: Some("Bearer".into()),
            }),
        }
    }
}

fn forbidden(why: String) -> Refusal {
    Refusal { status: 403, why, challenge: None }
}

/// The host of `host[:port]` (or `[v6]:port`), in lower case.
fn host_name(authority: &str) -> String {
    let authority = authority.split('/').next().unwrap_or("");
    let name = match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map(|(v6, _)| format!("[{v6}]")).unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(name, _)| name).to_string(),
    };
    name.to_ascii_lowercase()
}

/// Compared by their digests, so that the time taken says nothing of how
/// much of the token a guess got right, nor of its length.
fn same_secret(given: &[u8], token: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(given), Sha256::digest(token));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "POST".into(),
            path: "/mcp".into(),
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect(),
            body: vec![],
        }
    }

    fn loopback(token: Option<&str>) -> Guard {
        let hosts = LOOPBACK_NAMES.iter().map(|h| h.to_string()).collect();
        Guard::new(hosts, vec![], token.map(|t| t.as_bytes().to_vec()))
    }

    #[test]
    fn a_rebound_host_or_a_foreign_origin_is_forbidden_and_loopback_names_pass() {
        let guard = loopback(None);
        assert!(guard.check(&request(&[("host", "localhost:3000")])).is_ok());
        assert!(guard.check(&request(&[("host", "[::1]:3000"), ("origin", "http://127.0.0.1:3000")])).is_ok());
        assert_eq!(guard.check(&request(&[("host", "evil.example:3000")])).unwrap_err().status, 403);
        let foreign = guard.check(&request(&[("host", "localhost:1"), ("origin", "http://evil.example")]));
        assert_eq!(foreign.unwrap_err().why, r#"requests from the origin "http://evil.example" are not allowed"#);
        assert_eq!(guard.check(&request(&[("host", "localhost"), ("origin", "null")])).unwrap_err().status, 403);
    }

    #[test]
    fn a_token_is_required_when_set_and_a_wrong_one_says_so() {
        let guard = loopback(Some("s3cret"));
        let none = guard.check(&request(&[("host", "localhost")])).unwrap_err();
        assert_eq!((none.status, none.challenge.as_deref()), (401, Some("Bearer")));
        let wrong = guard.check(&request(&[("host", "localhost"), ("authorization", "Bearer guess")])).unwrap_err();
        assert_eq!(wrong.challenge.as_deref(), Some(r#"Bearer error="invalid_token""#));
        assert!(guard.check(&request(&[("host", "localhost"), ("authorization", "Bearer s3cret")])).is_ok());
    }
}
