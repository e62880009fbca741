//! The `requestState` a 2026-07-28 server hands its client between rounds
//! of input (`input_required`): what the client answered so far, and what
//! it was asked, bound to the request it belongs to. The client sends it
//! back with the next round; since it comes from the client, it is signed
//! with a key this process made at random (HMAC-SHA256) and refused,
//! whole, when the signature or the request it names does not match. The
//! server keeps nothing between rounds.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::codec::{decode, encode, Json};

pub struct Signer {
    key: [u8; 32],
}

/// What a state carries: the answers given so far, the keys asked (only
/// answers to those are taken), and what request it is of.
pub struct State {
    pub answers: Vec<(Vec<u8>, Json)>,
    pub asked: Vec<Vec<u8>>,
}

impl Signer {
    pub fn new() -> Signer {
        let mut key = [0u8; 32];
        // Without the system's randomness, a key of zeros would be a key
        // anyone knows: a state signed with it is refused by a restart.
        if getrandom::fill(&mut key).is_err() {
            key = [0u8; 32];
        }
        Signer { key }
    }

    fn mac(&self, request: &[u8], body: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(&(request.len() as u64).to_be_bytes());
        mac.update(request);
        mac.update(body);
        mac
    }

    /// The state of `request` (its method and name), signed.
    pub fn sign(&self, request: &[u8], state: &State) -> String {
        let answers = Json::Object(state.answers.clone());
        let asked = Json::Array(state.asked.iter().map(|k| Json::Str(k.clone())).collect());
        let body = encode(&Json::object([("answers", answers), ("asked", asked)]));
        let tag = self.mac(request, &body).finalize().into_bytes();
        format!("{}.{}", URL_SAFE_NO_PAD.encode(&body), URL_SAFE_NO_PAD.encode(tag))
    }

    /// The state the client sent back, if this process signed it for
    /// `request` and nothing in it changed.
    pub fn verify(&self, request: &[u8], text: &[u8]) -> Option<State> {
        let text = std::str::from_utf8(text).ok()?;
        let (body, tag) = text.split_once('.')?;
        let body = URL_SAFE_NO_PAD.decode(body).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.mac(request, &body).verify_slice(&tag).ok()?;
        let state = decode(&body).ok()?;
        let answers = match state.get("answers") {
            Some(Json::Object(pairs)) => pairs.clone(),
            _ => Vec::new(),
        };
        let asked = state
            .get("asked")
            .map(|a| a.elements().filter_map(|k| if let Json::Str(k) = k { Some(k.clone()) } else { None }).collect())
            .unwrap_or_default();
        Some(State { answers, asked })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_comes_back_only_whole_and_for_its_own_request() {
        let signer = Signer::new();
        let state = State { answers: vec![(b"step1".to_vec(), Json::str("Alice"))], asked: vec![b"step2".to_vec()] };
        let text = signer.sign(b"tools/call a", &state);
        let back = signer.verify(b"tools/call a", text.as_bytes()).unwrap();
        assert_eq!((back.answers.len(), back.asked), (1, vec![b"step2".to_vec()]));
        assert!(signer.verify(b"tools/call b", text.as_bytes()).is_none(), "another request's state");
        assert!(signer.verify(b"tools/call a", format!("{text}-TAMPERED").as_bytes()).is_none());
        assert!(Signer::new().verify(b"tools/call a", text.as_bytes()).is_none(), "another process's state");
    }
}
