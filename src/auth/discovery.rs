//! Finding who issues tokens for an MCP server, in the order the MCP
//! authorization spec gives:
//!
//! 1. the protected-resource metadata (RFC 9728): the URL a 401's
//!    `WWW-Authenticate` names in `resource_metadata`, else the
//!    well-known URL with the server's path, else the one at its root;
//! 2. the authorization server's metadata: for an issuer with a path,
//!    RFC 8414's URL with the path after the well-known part, then
//!    OpenID Connect's with it inserted the same way, then OpenID's with
//!    it appended; for an issuer without one, the two well-known URLs;
//! 3. a server from before protected-resource metadata (2025-03-26)
//!    is its own authorization server: its origin's metadata, and failing
//!    that the fixed `/authorize`, `/token` and `/register` there.

use ureq::Agent;
use url::Url;

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::wire::headers;
use crate::wire::interrupted;

/// A metadata document is small; one larger than this is not one.
const MAX_METADATA: u64 = 1 << 20;

/// The parameters of a `Bearer` challenge that the login uses.
#[derive(Debug, Default, PartialEq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
}

/// Reads the `Bearer` challenge of a `WWW-Authenticate` value (RFC 9110
/// auth-params: `name=token` or `name="quoted"`, comma-separated; other
/// schemes' challenges may stand beside it), or the `DPoP` one where a
/// server that wants DPoP-bound tokens gives no `Bearer` one: its
/// parameters mean the same (RFC 9449 section 7.1).
pub fn parse_challenge(header: &str) -> Challenge {
    let (mut bearer, mut dpop) = (Challenge::default(), Challenge::default());
    let mut saw_bearer = false;
    let mut rest = header.trim();
    let mut in_challenge: Option<bool> = None;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        let name_end = rest.find(|c: char| c == '=' || c == ',' || c.is_whitespace()).unwrap_or(rest.len());
        let name = &rest[..name_end];
        let after = rest[name_end..].trim_start_matches([' ', '\t']);
        if !after.starts_with('=') || after.starts_with("==") {
            // A scheme name (or a token68 after one): a new challenge.
            in_challenge = match name {
                n if n.eq_ignore_ascii_case("bearer") => Some(true),
                n if n.eq_ignore_ascii_case("dpop") => Some(false),
                _ => None,
            };
            saw_bearer |= in_challenge == Some(true);
            rest = after;
            if name.is_empty() {
                break;
            }
            continue;
        }
        let after = after[1..].trim_start_matches([' ', '\t']);
        let (value, left) = match after.strip_prefix('"') {
            Some(quoted) => {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, escaped)) = chars.next() {
                                value.push(escaped);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                (value, &quoted[end.min(quoted.len())..])
            }
            None => {
                let end = after.find([',', ' ', '\t']).unwrap_or(after.len());
                (after[..end].to_string(), &after[end..])
            }
        };
        if let Some(is_bearer) = in_challenge {
            let challenge = if is_bearer { &mut bearer } else { &mut dpop };
            match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => challenge.resource_metadata = Some(value),
                "scope" => challenge.scope = Some(value),
                "error" => challenge.error = Some(value),
                _ => {}
            }
        }
        rest = left;
    }
    if saw_bearer {
        bearer
    } else {
        dpop
    }
}

/// The protected-resource metadata URLs to try, in order, for a server
/// whose 401 named none.
pub fn resource_metadata_urls(server: &Url) -> Vec<String> {
    let origin = origin_of(server);
    let path = server.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/oauth-protected-resource{path}"));
    }
    urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    urls
}

/// The authorization-server metadata URLs to try, in order, for `issuer`.
pub fn server_metadata_urls(issuer: &Url) -> Vec<String> {
    let origin = origin_of(issuer);
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        return vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ];
    }
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ]
}

/// `scheme://host[:port]`, the port only when it is not the default.
pub fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// What a metadata URL gave: a document, nothing there (try the next
/// URL), or a failure worth stopping for.
pub enum Fetched {
    Found(Json),
    Absent,
}

/// GETs a metadata document. A 4xx means "not here" (RFC 8414 servers
/// answer 404; some answer 400 or 405 for a path they do not know), as
/// does a body that is not a JSON object; a 5xx or a failure to connect
/// stops discovery with an error, since the next URL would only hide it.
pub fn fetch(agent: &Agent, url: &str, protocol_version: &str) -> Result<Fetched> {
    let response = agent
        .get(url)
        .header(headers::ACCEPT, "application/json")
        .header(headers::MCP_PROTOCOL_VERSION, protocol_version)
        .call();
    let mut response = response.map_err(|e| match interrupted(&e) {
        true => Error::Interrupted { what: "login".into() },
        false => metadata_error(url, &e.to_string()),
    })?;
    let status = response.status().as_u16();
    if (400..500).contains(&status) || (300..400).contains(&status) {
        return Ok(Fetched::Absent);
    }
    if status != 200 {
        return Err(metadata_error(url, &format!("HTTP {status}")));
    }
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_METADATA)
        .read_to_vec()
        .map_err(|e| metadata_error(url, &e.to_string()))?;
    match codec::decode(&body) {
        Ok(doc @ Json::Object(_)) => Ok(Fetched::Found(doc)),
        _ => Ok(Fetched::Absent),
    }
}

fn metadata_error(url: &str, why: &str) -> Error {
    Error::Authorization { url: url.to_string(), detail: format!("fetching its metadata failed ({why})") }
}

/// A string field of a metadata document.
pub fn text(doc: &Json, field: &str) -> Option<String> {
    match doc.get(field) {
        Some(Json::Str(s)) => Some(String::from_utf8_lossy(s).into_owned()),
        _ => None,
    }
}

/// The strings of an array field (absent: empty).
pub fn texts(doc: &Json, field: &str) -> Vec<String> {
    match doc.get(field) {
        Some(Json::Array(items)) => items
            .iter()
            .filter_map(|v| match v {
                Json::Str(s) => Some(String::from_utf8_lossy(s).into_owned()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether protected-resource metadata's `resource` covers the server we
/// talk to: the same origin, and the server's path within the
/// resource's (RFC 8707 resources may name a prefix of paths).
pub fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else { return false };
    if resource.origin() != server.origin() {
        return false;
    }
    let prefix = resource.path().trim_end_matches('/');
    let path = server.path();
    path == prefix || path.starts_with(&format!("{prefix}/")) || prefix.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_gives_its_metadata_url_scope_and_error() {
        let c = parse_challenge(
            r#"Basic realm="x", Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://s.example/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
        assert_eq!(c.resource_metadata.as_deref(), Some("https://s.example/.well-known/oauth-protected-resource/mcp"));
    }

    #[test]
    fn parameters_of_another_scheme_are_not_taken_for_bearer_ones() {
        let c = parse_challenge(r#"Bearer realm=mcp, DPoP scope="other""#);
        assert_eq!(c, Challenge::default());
        let c = parse_challenge(r#"DPoP error="use_dpop_nonce", resource_metadata="https://s.example/prm""#);
        assert_eq!(c.error.as_deref(), Some("use_dpop_nonce"), "a DPoP challenge alone is read");
        assert_eq!(c.resource_metadata.as_deref(), Some("https://s.example/prm"));
        let c = parse_challenge(r#"bearer scope=plain,error="a \"quoted\" word""#);
        assert_eq!(c.scope.as_deref(), Some("plain"));
        assert_eq!(c.error.as_deref(), Some(r#"a "quoted" word"#));
    }

    #[test]
    fn metadata_urls_follow_the_spec_order_with_paths_inserted() {
        let server = Url::parse("https://s.example:8443/public/mcp").unwrap();
        assert_eq!(
            resource_metadata_urls(&server),
            [
                "https://s.example:8443/.well-known/oauth-protected-resource/public/mcp",
                "https://s.example:8443/.well-known/oauth-protected-resource"
            ]
        );
        let issuer = Url::parse("https://auth.example/tenant1").unwrap();
        assert_eq!(
            server_metadata_urls(&issuer),
            [
                "https://auth.example/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example/.well-known/openid-configuration/tenant1",
                "https://auth.example/tenant1/.well-known/openid-configuration"
            ]
        );
        let issuer = Url::parse("https://auth.example/").unwrap();
        assert_eq!(
            server_metadata_urls(&issuer),
            [
                "https://auth.example/.well-known/oauth-authorization-server",
                "https://auth.example/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn a_resource_covers_its_own_paths_on_its_own_origin_only() {
        let server = Url::parse("https://s.example/api/mcp").unwrap();
        assert!(resource_covers("https://s.example/api/mcp", &server));
        assert!(resource_covers("https://s.example/api", &server));
        assert!(resource_covers("https://s.example/", &server));
        assert!(!resource_covers("https://s.example/ap", &server));
        assert!(!resource_covers("https://other.example/api/mcp", &server));
        assert!(!resource_covers("http://s.example/api/mcp", &server));
    }
}
