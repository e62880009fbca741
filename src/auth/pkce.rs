//! Secrets made on this machine for one login: the PKCE verifier and its
//! S256 challenge (RFC 7636), and the `state` that ties a redirect to the
//! login that asked for it. The randomness comes from the operating
//! system (getrandom), the digest from `sha2`: nothing here is ours but
//! the lengths.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// `bytes` random bytes as unpadded base64url: 32 bytes give the 43
/// characters RFC 7636 asks of a verifier at least.
pub fn random_text(bytes: usize) -> Result<String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer)
        .map_err(|e| Error::BadInput(format!("mcp: the system gave no random bytes for a login ({e})")))?;
    Ok(URL_SAFE_NO_PAD.encode(buffer))
}

/// A verifier and the challenge sent in its place.
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl Pkce {
    pub fn new() -> Result<Pkce> {
        let verifier = random_text(32)?;
        let challenge = s256(&verifier);
        Ok(Pkce { verifier, challenge })
    }
}

/// The S256 transform: base64url(SHA-256(verifier)).
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_the_rfc_7636_example() {
        // Appendix B of RFC 7636.
        assert_eq!(s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }

    #[test]
    fn verifiers_are_long_enough_and_never_repeat() {
        let a = Pkce::new().unwrap();
        let b = Pkce::new().unwrap();
        assert_eq!(a.verifier.len(), 43);
        assert_ne!(a.verifier, b.verifier);
    }
}
