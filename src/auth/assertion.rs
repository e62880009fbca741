//! `private_key_jwt` (RFC 7523): a machine proves who it is by signing a
//! short-lived JWT with its EC P-256 key (ES256) instead of sending a
//! secret. Signing is the `p256` crate's (deterministic nonces, RFC 6979,
//! so no random source is involved); this file only lays out the token.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::DecodePrivateKey;

use crate::auth::pkce::random_text;
use crate::codec::{self, Json};
use crate::error::{Error, Result};

/// What the token endpoint is told the assertion is.
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long an assertion is good for: it is used at once.
const LIFETIME_SECONDS: i64 = 300;

/// The key from `opts.auth.private_key_pem`: PKCS #8 (`BEGIN PRIVATE
/// KEY`, what openssl writes today) or SEC1 (`BEGIN EC PRIVATE KEY`).
/// The refusal never quotes the key.
pub fn signing_key(pem: &str) -> Result<SigningKey> {
    if let Ok(key) = SigningKey::from_pkcs8_pem(pem) {
        return Ok(key);
    }
    p256::SecretKey::from_sec1_pem(pem).map(SigningKey::from).map_err(|_| {
        Error::BadInput(
            "mcp.new: opts.auth.private_key_pem is not an EC P-256 private key in PEM (PKCS #8 or SEC1)".into(),
        )
    })
}

/// A signed assertion that `client_id` is calling `audience`.
pub fn client_assertion(key: &SigningKey, client_id: &str, audience: &str) -> Result<String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let header = Json::object([("alg", Json::str("ES256")), ("typ", Json::str("JWT"))]);
    let claims = Json::object([
        ("aud", Json::str(audience)),
        ("exp", Json::Int(now + LIFETIME_SECONDS)),
        ("iat", Json::Int(now)),
        ("iss", Json::str(client_id)),
        ("jti", Json::str(random_text(16)?)),
        ("sub", Json::str(client_id)),
    ]);
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(codec::encode(&header)),
        URL_SAFE_NO_PAD.encode(codec::encode(&claims))
    );
    let signature: Signature = key.sign(signed.as_bytes());
    Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::signature::Verifier;
    use p256::ecdsa::VerifyingKey;

    // A throwaway key made for this test (openssl ecparam -genkey -name
    // prime256v1 | openssl pkcs8 -topk8 -nocrypt).
    const PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgdmY/N4MtTwo1Llco
CkVtHn+OPxtonWw2J9lIx9ugErihRANCAAR6IL7r091feOltoPqgyzRyPU13s3JN
YEVJFdwyFjVscqyxyZIuVKYMdVF4XYRzp2vj2K5pZ0cB7KvFVWmth0be
-----END PRIVATE KEY-----";

    #[test]
    fn an_assertion_verifies_with_the_public_key_and_names_the_client() {
        let key = signing_key(PEM).unwrap();
        let jwt = client_assertion(&key, "machine", "https://as.example/token").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims = codec::decode(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims.get("iss"), Some(&Json::str("machine")));
        assert_eq!(claims.get("sub"), Some(&Json::str("machine")));
        assert_eq!(claims.get("aud"), Some(&Json::str("https://as.example/token")));
        let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap()).unwrap();
        let public = VerifyingKey::from(&key);
        assert!(public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature).is_ok());
    }

    #[test]
    fn a_key_that_is_not_p256_pem_is_refused_without_quoting_it() {
        let e = signing_key("-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----").err().unwrap();
        assert_eq!(
            e.to_string(),
            "mcp.new: opts.auth.private_key_pem is not an EC P-256 private key in PEM (PKCS #8 or SEC1)"
        );
    }
}
