//! W3C trace context (`traceparent`), which MCP carries in a request's
//! `_meta` (SEP-414) so that a server's spans join the host's trace:
//! `00-TRACE_ID-SPAN_ID-FLAGS`, lowercase hex, 16 and 8 bytes, neither
//! all zero. A request made on behalf of a host span is that span's child:
//! the same trace and flags, a span id of its own.

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    sampled: bool,
}

impl TraceContext {
    /// A new trace, its first span.
    pub fn new_trace(sampled: bool) -> Result<TraceContext> {
        Ok(TraceContext { trace_id: random()?, span_id: random()?, sampled })
    }

    /// A trace the host names, and the host's span in it when it says
    /// which (else a new one).
    pub fn within(trace_id: &str, span_id: Option<&str>, sampled: bool) -> Result<TraceContext> {
        let trace_id = hex_id(trace_id, "trace_id")?;
        let span_id = match span_id {
            Some(text) => hex_id(text, "span_id")?,
            None => random()?,
        };
        Ok(TraceContext { trace_id, span_id, sampled })
    }

    /// A `traceparent` header's value. Version 00 is read as the
    /// recommendation says of any: its first four fields, refusing a
    /// value too short, an unknown version `ff`, or ids all zero.
    pub fn parse(header: &str) -> Result<TraceContext> {
        let refuse = || {
            Error::BadInput(format!(
                "mcp.traceparent: {header:?} is not a traceparent (00-32 hex digits-16 hex digits-2 hex digits)"
            ))
        };
        let mut fields = header.trim().split('-');
        let (Some(version), Some(trace), Some(span), Some(flags)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(refuse());
        };
        if version.len() != 2
            || !is_lower_hex(version)
            || version == "ff"
            || (version == "00" && fields.next().is_some())
        {
            return Err(refuse());
        }
        if flags.len() != 2 || !is_lower_hex(flags) {
            return Err(refuse());
        }
        let sampled = u8::from_str_radix(flags, 16).map_err(|_| refuse())? & 1 == 1;
        let trace_id = hex_id(trace, "trace_id").map_err(|_| refuse())?;
        let span_id = hex_id(span, "span_id").map_err(|_| refuse())?;
        Ok(TraceContext { trace_id, span_id, sampled })
    }

    /// A span of its own under this one: the same trace and flags.
    pub fn child(&self) -> Result<TraceContext> {
        Ok(TraceContext { span_id: random()?, ..self.clone() })
    }

    /// The `traceparent` value.
    pub fn header(&self) -> String {
        format!("00-{}-{}-{}", hex(&self.trace_id), hex(&self.span_id), if self.sampled { "01" } else { "00" })
    }
}

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut id = [0u8; N];
    // An id of all zeros is invalid; getrandom gives one once in 2^64 draws.
    while id.iter().all(|&b| b == 0) {
        getrandom::fill(&mut id)
            .map_err(|e| Error::BadInput(format!("mcp.traceparent: the system gave no random bytes ({e})")))?;
    }
    Ok(id)
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn hex_id<const N: usize>(text: &str, name: &str) -> Result<[u8; N]> {
    let refuse =
        || Error::BadInput(format!("mcp.traceparent: {name} must be {} lowercase hex digits, not all zero", N * 2));
    if text.len() != N * 2 || !is_lower_hex(text) {
        return Err(refuse());
    }
    let mut id = [0u8; N];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).map_err(|_| refuse())?;
    }
    if id.iter().all(|&b| b == 0) {
        return Err(refuse());
    }
    Ok(id)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_keeps_the_trace_and_flags_and_takes_a_span_of_its_own() {
        let parent = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let child = parent.child().unwrap();
        let header = child.header();
        assert!(header.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"), "{header}");
        assert!(header.ends_with("-01"));
        assert_ne!(header, parent.header());
        assert_eq!(TraceContext::parse(&header).unwrap(), child);
    }

    #[test]
    fn a_new_trace_is_well_formed_and_says_whether_it_is_sampled() {
        let header = TraceContext::new_trace(false).unwrap().header();
        assert_eq!(header.len(), 55);
        assert!(header.ends_with("-00"));
        assert!(TraceContext::parse(&header).is_ok());
    }

    #[test]
    fn ids_all_zero_uppercase_or_short_are_refused() {
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(TraceContext::parse(bad).is_err(), "{bad}");
        }
        // a later version may add fields after the four it shares with 00
        assert!(TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later").is_ok());
    }

    #[test]
    fn a_host_trace_keeps_its_ids() {
        let context = TraceContext::within("4bf92f3577b34da6a3ce929d0e0e4736", Some("00f067aa0ba902b7"), true).unwrap();
        assert_eq!(context.header(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let err = TraceContext::within("xyz", None, true).unwrap_err();
        assert_eq!(err.to_string(), "mcp.traceparent: trace_id must be 32 lowercase hex digits, not all zero");
    }
}
