//! DPoP (RFC 9449; SEP-1932 for MCP): a token bound to a key this client
//! holds, so that a token that leaks is worth nothing without the key.
//! Each request to the token endpoint and to the MCP server carries a
//! proof, a JWT signed by that key naming the request's method and URL
//! (and, to the MCP server, the token's digest); the token goes as
//! `Authorization: DPoP ...`.
//!
//! Opt-in (`opts.auth.dpop = true`): an authorization server that does
//! not do DPoP ignores the proof and answers `token_type: Bearer`, and the
//! token is then sent as a bearer one, as RFC 9449 section 5 allows.
//!
//! One key per client, made when the client is, from the operating
//! system's random bytes; kept in the token store beside a token bound to
//! it (the store is the one place a token lives, so the key lives there
//! too), and never in an error or a log.
//!
//! Servers may ask for a nonce (`DPoP-Nonce`, on a `use_dpop_nonce`
//! refusal or on any reply): the last one each origin gave goes in every
//! later proof to it. The authorization server's and the MCP server's are
//! kept apart, since their origins differ.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use sha2::{Digest, Sha256};

use crate::auth::pkce::random_text;
use crate::codec::{self, Json};
use crate::error::{Error, Result};

/// The header a proof goes in, and the one a server's nonce comes in.
pub const DPOP: &str = "DPoP";
pub const DPOP_NONCE: &str = "DPoP-Nonce";

/// The error both kinds of server give when a proof lacks their nonce.
pub const USE_NONCE: &str = "use_dpop_nonce";

/// Origins whose nonces are kept: a client talks to two, three with a
/// redirect; the bound keeps a server that names endless origins from
/// growing the list.
const ORIGINS_KEPT: usize = 8;

/// A nonce longer than this is not used (it goes in every proof).
const MAX_NONCE: usize = 1024;

/// The key, the nonces, and whether the token in use is bound.
pub struct Proofs {
    key: Mutex<SigningKey>,
    nonces: Mutex<Vec<(String, String)>>,
    bound: AtomicBool,
}

/// Never the key: options are printed in debugging.
impl std::fmt::Debug for Proofs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Proofs { key: [private] }")
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Proofs {
    /// A fresh key.
    pub fn new() -> Result<Proofs> {
        Ok(Proofs { key: Mutex::new(fresh_key()?), nonces: Mutex::default(), bound: AtomicBool::new(false) })
    }

    /// The token in the transport's cell is DPoP-bound to this key (the
    /// token endpoint said `token_type: DPoP`).
    pub fn is_bound(&self) -> bool {
        self.bound.load(Ordering::Relaxed)
    }

    pub fn set_bound(&self, bound: bool) {
        self.bound.store(bound, Ordering::Relaxed);
    }

    /// The private key as the store keeps it: its scalar, base64url.
    pub fn key_text(&self) -> String {
        URL_SAFE_NO_PAD.encode(lock(&self.key).to_bytes())
    }

    /// Takes back a stored key (the one a stored token is bound to).
    /// False when the text is not one.
    pub fn restore_key(&self, text: &str) -> bool {
        let key = URL_SAFE_NO_PAD.decode(text).ok().and_then(|bytes| SigningKey::from_slice(&bytes).ok());
        match key {
            Some(key) => {
                *lock(&self.key) = key;
                true
            }
            None => false,
        }
    }

    /// Keeps the nonce a reply from `url` carried. True when it is new
    /// (a refusal for want of it is then worth one more try).
    pub fn remember_nonce(&self, url: &str, nonce: Option<&str>) -> bool {
        let Some(nonce) = nonce.filter(|n| !n.is_empty() && n.len() <= MAX_NONCE && n.bytes().all(is_nonce_byte))
        else {
            return false;
        };
        let origin = origin(url);
        let mut nonces = lock(&self.nonces);
        if let Some(kept) = nonces.iter_mut().find(|(o, _)| *o == origin) {
            let new = kept.1 != nonce;
            kept.1 = nonce.to_string();
            return new;
        }
        if nonces.len() == ORIGINS_KEPT {
            nonces.remove(0);
        }
        nonces.push((origin, nonce.to_string()));
        true
    }

    /// A proof for one request: `method` to `url`, presenting
    /// `access_token` when there is one.
    pub fn proof(&self, method: &str, url: &str, access_token: Option<&str>) -> Result<String> {
        let key = lock(&self.key).clone();
        let point = key.verifying_key().to_encoded_point(false);
        let (Some(x), Some(y)) = (point.x(), point.y()) else {
            return Err(Error::Internal("a P-256 public key without coordinates".into()));
        };
        let jwk = Json::object([
            ("crv", Json::str("P-256")),
            ("kty", Json::str("EC")),
            ("x", Json::str(URL_SAFE_NO_PAD.encode(x))),
            ("y", Json::str(URL_SAFE_NO_PAD.encode(y))),
        ]);
        let header = Json::object([("alg", Json::str("ES256")), ("jwk", jwk), ("typ", Json::str("dpop+jwt"))]);
        let mut claims = vec![
            ("htm", Json::str(method)),
            ("htu", Json::str(target(url))),
            ("iat", Json::Int(now())),
            ("jti", Json::str(random_text(16)?)),
        ];
        if let Some(token) = access_token {
            claims.push(("ath", Json::str(URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes())))));
        }
        if let Some((_, nonce)) = lock(&self.nonces).iter().find(|(o, _)| *o == origin(url)) {
            claims.push(("nonce", Json::str(nonce)));
        }
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(codec::encode(&header)),
            URL_SAFE_NO_PAD.encode(codec::encode(&Json::object(claims)))
        );
        let signature: Signature = key.sign(signed.as_bytes());
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes())))
    }
}

/// A key from the operating system's random bytes (a scalar of zero or
/// past the curve's order, one chance in 2^128, is drawn again).
fn fresh_key() -> Result<SigningKey> {
    loop {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| Error::Internal(format!("no random bytes for a DPoP key: {e}")))?;
        if let Ok(key) = SigningKey::from_slice(&bytes) {
            return Ok(key);
        }
    }
}

/// A nonce is NQCHAR (RFC 9449 section 8.1): printable ASCII but `"` and `\`.
fn is_nonce_byte(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e)
}

/// `htu`: the URL without its query and fragment (RFC 9449 section 4.2).
fn target(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or(url).to_string(),
    }
}

fn origin(url: &str) -> String {
    url::Url::parse(url).map(|u| u.origin().ascii_serialization()).unwrap_or_default()
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Whether a refusal asks for a nonce: the `error` of a challenge
/// (`WWW-Authenticate: DPoP error="use_dpop_nonce"`) or of a token
/// endpoint's JSON reply.
pub fn asks_for_nonce(error: Option<&str>) -> bool {
    error == Some(USE_NONCE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::signature::Verifier;
    use p256::ecdsa::VerifyingKey;

    fn part(jwt: &str, i: usize) -> Json {
        codec::decode(&URL_SAFE_NO_PAD.decode(jwt.split('.').nth(i).unwrap()).unwrap()).unwrap()
    }

    #[test]
    fn a_proof_names_the_request_and_the_token_and_verifies_with_its_own_key() {
        let proofs = Proofs::new().unwrap();
        let jwt = proofs.proof("POST", "https://mcp.example/mcp?x=1#f", Some("tok")).unwrap();
        let (header, claims) = (part(&jwt, 0), part(&jwt, 1));
        assert_eq!(header.get("typ"), Some(&Json::str("dpop+jwt")));
        assert_eq!(header.get("alg"), Some(&Json::str("ES256")));
        assert!(header.get("jwk").unwrap().get("d").is_none(), "never the private key");
        assert_eq!(claims.get("htm"), Some(&Json::str("POST")));
        assert_eq!(claims.get("htu"), Some(&Json::str("https://mcp.example/mcp")));
        let ath = URL_SAFE_NO_PAD.encode(Sha256::digest(b"tok"));
        assert_eq!(claims.get("ath"), Some(&Json::str(ath)));
        assert!(claims.get("nonce").is_none());
        let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(jwt.split('.').nth(2).unwrap()).unwrap());
        let signed = jwt.rsplit_once('.').unwrap().0;
        let public = VerifyingKey::from(&*lock(&proofs.key));
        assert!(public.verify(signed.as_bytes(), &signature.unwrap()).is_ok());
        let again = proofs.proof("POST", "https://mcp.example/mcp", Some("tok")).unwrap();
        assert_ne!(part(&again, 1).get("jti"), claims.get("jti"), "a fresh jti per proof");
    }

    #[test]
    fn a_nonce_goes_to_the_origin_that_gave_it_only() {
        let proofs = Proofs::new().unwrap();
        assert!(proofs.remember_nonce("https://as.example/token", Some("n-1")));
        assert!(!proofs.remember_nonce("https://as.example/other", Some("n-1")), "the same nonce is not new");
        assert!(!proofs.remember_nonce("https://as.example/token", Some("bad\"nonce")));
        let to_as = proofs.proof("POST", "https://as.example/token", None).unwrap();
        let to_rs = proofs.proof("POST", "https://mcp.example/mcp", None).unwrap();
        assert_eq!(part(&to_as, 1).get("nonce"), Some(&Json::str("n-1")));
        assert!(part(&to_rs, 1).get("nonce").is_none());
    }

    #[test]
    fn a_stored_key_comes_back_and_a_damaged_one_is_refused() {
        let (a, b) = (Proofs::new().unwrap(), Proofs::new().unwrap());
        assert!(b.restore_key(&a.key_text()));
        assert_eq!(a.key_text(), b.key_text());
        assert!(!b.restore_key("not a key"));
        assert_eq!(a.key_text(), b.key_text());
    }
}
