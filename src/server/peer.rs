//! What a server knows of one client: the version their handshake settled
//! on, what the client said it can answer, the log level it set, the
//! resources it follows, and the notices it is owed. Over stdio there is
//! one; over Streamable HTTP, one per session, beside the one catalog
//! every session shares.

use std::collections::HashSet;

use super::catalog::Kind;
use super::{INVALID_PARAMS, LOG_LEVELS};
use crate::codec::Json;
use crate::protocol;

/// Which client: the transport's number for it.
pub type PeerKey = u64;

/// The most resources one client may follow: a subscription is a few
/// bytes the client asks the server to keep, so a client that subscribes
/// in a loop is told no past this.
const MAX_SUBSCRIPTIONS: usize = 4096;

/// The most notices kept for a client that is not reading them (an HTTP
/// session with no stream open): the oldest go first.
const MAX_NOTICES: usize = 1024;

#[derive(Default)]
pub(super) struct Peer {
    pub version: Option<String>,
    pub capabilities: Json,
    pub initialized: bool,
    /// The lowest level sent (`logging/setLevel`); all until one is set.
    log_level: usize,
    subscriptions: HashSet<Vec<u8>>,
    /// Lists changed while serving, whose notices are owed.
    changed: Vec<Kind>,
    notices: Vec<Json>,
    /// A 2026-07-28 client's `subscriptions/listen`: what it asked to
    /// hear, and the id its notices carry.
    listening: Option<Listen>,
}

/// What a `subscriptions/listen` request asked for.
struct Listen {
    id: Json,
    tools: bool,
    prompts: bool,
    resources: bool,
}

/// The `_meta` key a subscription's notices carry its id under.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// What a handler's `ctx` asks of its client's state.
#[derive(Clone, Default)]
pub struct Facts {
    pub log_level: usize,
    pub capabilities: Json,
    pub version: Option<String>,
}

impl Facts {
    /// Whether a log message at `level` goes to the client.
    pub fn logs(&self, level: &str) -> bool {
        LOG_LEVELS.iter().position(|l| *l == level).is_some_and(|at| at >= self.log_level)
    }

    /// Whether the client said it can answer `capability` (elicitation,
    /// sampling, roots).
    pub fn can(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some()
    }
}

impl Peer {
    pub fn facts(&self) -> Facts {
        Facts { log_level: self.log_level, capabilities: self.capabilities.clone(), version: self.version.clone() }
    }

    pub fn list_changed(&mut self, kind: Kind) {
        if self.initialized && !self.changed.contains(&kind) {
            self.changed.push(kind);
        }
    }

    pub fn resource_updated(&mut self, uri: &[u8]) {
        if self.subscriptions.contains(uri) {
            if self.notices.len() >= MAX_NOTICES {
                self.notices.remove(0);
            }
            let params = Json::object([("uri", Json::Str(uri.to_vec()))]);
            self.notices.push(protocol::notification("notifications/resources/updated", Some(params)));
        }
    }

    pub fn owes(&self) -> bool {
        !self.notices.is_empty() || !self.changed.is_empty()
    }

    pub fn take_notices(&mut self) -> Vec<Json> {
        let mut notices = std::mem::take(&mut self.notices);
        for kind in std::mem::take(&mut self.changed) {
            let wanted = match (&self.listening, kind) {
                (None, _) => true,
                (Some(l), Kind::Tool) => l.tools,
                (Some(l), Kind::Prompt) => l.prompts,
                (Some(l), _) => l.resources,
            };
            if wanted {
                notices.push(protocol::notification(kind.changed_notification(), self.tag(None)));
            }
        }
        if self.listening.is_some() {
            // The acknowledgement was tagged when made; the rest now.
            for notice in notices.iter_mut() {
                if let Some(params) = notice.get_mut("params") {
                    if params.get("_meta").is_none() {
                        *params = self.tag(Some(params.clone())).unwrap_or_default();
                    }
                } else if let Json::Object(pairs) = notice {
                    pairs.push((b"params".to_vec(), self.tag(None).unwrap_or_default()));
                }
            }
        }
        notices
    }

    /// `params` with the subscription's id in `_meta`, for a listening
    /// client (unchanged for others).
    fn tag(&self, params: Option<Json>) -> Option<Json> {
        let Some(listen) = &self.listening else { return params };
        let mut pairs = match params.map(Json::into_tree) {
            Some(Json::Object(pairs)) => pairs,
            _ => Vec::new(),
        };
        pairs.retain(|(k, _)| k != b"_meta");
        pairs.push((b"_meta".to_vec(), Json::object([(SUBSCRIPTION_ID, listen.id.clone())])));
        Some(Json::Object(pairs))
    }

    /// `subscriptions/listen`: from now on this client hears what
    /// `filter` asks for (of what this server can tell), starting with
    /// the acknowledgement that says which.
    pub fn listen(&mut self, id: Json, filter: Option<&Json>) {
        let asked = |key: &str| filter.and_then(|f| f.get(key)).is_some_and(Json::is_truthy);
        let (tools, prompts, resources) =
            (asked("toolsListChanged"), asked("promptsListChanged"), asked("resourcesListChanged"));
        let mut honored = Vec::new();
        for (key, on) in
            [("promptsListChanged", prompts), ("resourcesListChanged", resources), ("toolsListChanged", tools)]
        {
            if on {
                honored.push((key, Json::Bool(true)));
            }
        }
        if let Some(uris) = filter.and_then(|f| f.get("resourceSubscriptions")) {
            let uris: Vec<Json> =
                uris.elements().filter(|u| matches!(u, Json::Str(_))).take(MAX_SUBSCRIPTIONS).cloned().collect();
            for uri in &uris {
                if let Json::Str(uri) = uri {
                    self.subscriptions.insert(uri.clone());
                }
            }
            honored.push(("resourceSubscriptions", Json::Array(uris)));
        }
        self.initialized = true;
        self.listening = Some(Listen { id: id.clone(), tools, prompts, resources });
        let params =
            Json::object([("_meta", Json::object([(SUBSCRIPTION_ID, id)])), ("notifications", Json::object(honored))]);
        self.notices.push(protocol::notification("notifications/subscriptions/acknowledged", Some(params)));
    }

    pub fn subscribe(&mut self, method: &str, params: &Json) -> Result<Json, (i64, String)> {
        let Some(Json::Str(uri)) = params.get("uri") else {
            return Err((INVALID_PARAMS, format!("{method} needs the resource's uri")));
        };
        if method == "resources/unsubscribe" {
            self.subscriptions.remove(uri);
        } else if self.subscriptions.len() >= MAX_SUBSCRIPTIONS && !self.subscriptions.contains(uri) {
            return Err((INVALID_PARAMS, format!("resources/subscribe: this client follows {MAX_SUBSCRIPTIONS} resources already; unsubscribe from some first")));
        } else {
            self.subscriptions.insert(uri.clone());
        }
        Ok(Json::Object(vec![]))
    }

    pub fn set_level(&mut self, params: &Json) -> Result<Json, (i64, String)> {
        let level = match params.get("level") {
            Some(Json::Str(level)) => LOG_LEVELS.iter().position(|l| l.as_bytes() == level.as_slice()),
            _ => None,
        };
        let level =
            level.ok_or_else(|| (INVALID_PARAMS, format!("the level must be one of {}", LOG_LEVELS.join(", "))))?;
        self.log_level = level;
        Ok(Json::Object(vec![]))
    }
}
