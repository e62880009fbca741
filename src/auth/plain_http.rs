//! Where a login may go over plain HTTP. Everything a login sends or
//! believes (metadata, codes, verifiers, secrets, tokens) is worth
//! stealing or forging on the way, so it travels over HTTPS, with one
//! exception for development: a server on this very machine.
//!
//! "This machine" is read from the URL's host as written, never from
//! what a name resolves to: a name is whatever DNS (or a network
//! attacker) says it is. So only `localhost`, a literal address in
//! 127.0.0.0/8 and `[::1]` count; `[::ffff:127.0.0.1]` (the IPv4-mapped
//! form) and a name that happens to resolve to 127.0.0.1 are other hosts.

use url::{Host, Url};

/// Whether `url` names this machine by its host as written.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(address)) => address.is_loopback(),
        Some(Host::Ipv6(address)) => address == std::net::Ipv6Addr::LOCALHOST,
        None => false,
    }
}

/// Whether a login may send to, or believe, `url`: HTTPS anywhere, plain
/// HTTP only on this machine.
pub fn may_carry_login(url: &Url) -> bool {
    url.scheme() == "https" || (url.scheme() == "http" && is_loopback(url))
}

/// The end of a refusal's message: what to do instead.
pub const HTTPS_REQUIRED: &str =
    "HTTPS is required (plain HTTP is allowed only to this machine: localhost, 127.0.0.0/8 or [::1])";

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback(url: &str) -> bool {
        is_loopback(&Url::parse(url).unwrap())
    }

    #[test]
    fn only_loopback_names_and_literals_as_written_are_this_machine() {
        assert!(loopback("http://localhost:3000/mcp"));
        assert!(loopback("http://LOCALHOST/"));
        assert!(loopback("http://127.0.0.1/"));
        assert!(loopback("http://127.45.0.9:80/"));
        assert!(loopback("http://[::1]:8080/"));
        assert!(!loopback("http://[::ffff:127.0.0.1]/"));
        assert!(!loopback("http://localhost.example.com/"));
        assert!(!loopback("http://127.0.0.1.nip.io/"));
        assert!(!loopback("http://128.0.0.1/"));
        assert!(!loopback("http://192.0.2.1/"));
    }

    #[test]
    fn https_goes_anywhere_and_plain_http_only_to_this_machine() {
        let ok = |u: &str| may_carry_login(&Url::parse(u).unwrap());
        assert!(ok("https://as.example/token"));
        assert!(ok("http://127.0.0.1:9/token"));
        assert!(!ok("http://as.example/token"));
        assert!(!ok("http://[::ffff:127.0.0.1]:9/token"));
        assert!(!ok("ftp://127.0.0.1/token"));
    }
}
