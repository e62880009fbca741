//! The `format`s drafts 4 to 7 assert, for the ones tool schemas carry
//! (zod writes `email`, `uri`, `uuid`, `date-time`...). Each follows its
//! RFC's grammar closely enough to refuse what is plainly not one; a
//! format this list does not know passes, as the drafts allow.

/// Whether `text` is a `format`.
pub fn asserts_format(format: &[u8], text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else { return true };
    match format {
        b"date-time" => date_time(text),
        b"date" => date(text),
        b"time" => time(text),
        b"email" | b"idn-email" => email(text),
        b"hostname" => hostname(text),
        b"ipv4" => {
            text.parse::<std::net::Ipv4Addr>().is_ok() && !text.split('.').any(|p| p.len() > 1 && p.starts_with('0'))
        }
        b"ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        b"uri" => uri(text, true),
        b"uri-reference" => uri(text, false),
        b"uuid" => uuid(text),
        b"regex" => regex_lite::Regex::new(text).is_ok(),
        b"json-pointer" => json_pointer(text),
        _ => true,
    }
}

fn digits(text: &str, count: usize) -> Option<u32> {
    (text.len() == count && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok())?
}

/// RFC 3339's full-date, with the days each month has.
fn date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(y), Some(m), Some(d), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Some(year), Some(month), Some(day)) = (digits(y, 4), digits(m, 2), digits(d, 2)) else { return false };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339's full-time: `hh:mm:ss`, a fraction, and an offset. A leap
/// second is 23:59:60 in UTC, whatever the offset.
fn time(text: &str) -> bool {
    let upper = text.to_ascii_uppercase();
    let Some(at) = upper.find(['Z', '+', '-']) else { return false };
    let (clock, offset) = upper.split_at(at);
    let offset_minutes = match offset {
        "Z" => Some(0),
        _ if offset.len() == 6 && offset.as_bytes()[3] == b':' => {
            match (digits(&offset[1..3], 2).filter(|h| *h < 24), digits(&offset[4..6], 2).filter(|m| *m < 60)) {
                (Some(h), Some(m)) if offset.starts_with('-') => Some(-((h * 60 + m) as i32)),
                (Some(h), Some(m)) => Some((h * 60 + m) as i32),
                _ => None,
            }
        }
        _ => None,
    };
    let clock = match clock.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit()) => whole,
        Some(_) => return false,
        None => clock,
    };
    let mut parts = clock.split(':');
    let (Some(h), Some(m), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Some(h), Some(m), Some(s), Some(offset)) = (digits(h, 2), digits(m, 2), digits(s, 2), offset_minutes) else {
        return false;
    };
    let utc = ((h * 60 + m) as i32 - offset).rem_euclid(24 * 60);
    h < 24 && m < 60 && (s < 60 || (s == 60 && utc == 23 * 60 + 59))
}

fn date_time(text: &str) -> bool {
    match text.find(['T', 't']) {
        Some(at) => date(&text[..at]) && time(&text[at + 1..]),
        None => false,
    }
}

/// `local@domain`: a dot-atom local part (or a quoted one) and a host
/// name or an address literal.
fn email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else { return false };
    let local_ok = if local.len() >= 2 && local.starts_with('"') && local.ends_with('"') {
        true
    } else {
        let atom = |c: char| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c);
        !local.is_empty() && local.split('.').all(|part| !part.is_empty() && part.chars().all(atom))
    };
    let domain_ok = match domain.strip_prefix('[').and_then(|d| d.strip_suffix(']')) {
        Some(literal) => match literal.strip_prefix("IPv6:") {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => literal.parse::<std::net::Ipv4Addr>().is_ok(),
        },
        None => hostname(domain) || !domain.is_ascii(),
    };
    local_ok && local.len() <= 64 && domain_ok
}

/// RFC 1123's host names: labels of letters, digits and inner hyphens.
fn hostname(text: &str) -> bool {
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    !text.is_empty() && text.len() <= 253 && text.split('.').all(label)
}

/// RFC 3986's characters, with `%` escapes whole; `absolute` also asks
/// for a scheme.
fn uri(text: &str, absolute: bool) -> bool {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=%".contains(&b);
    let bytes = text.as_bytes();
    let escapes_whole = bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'%')
        .all(|(i, _)| bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)));
    if !bytes.iter().all(|&b| allowed(b)) || !escapes_whole {
        return false;
    }
    let scheme = text.split_once(':').map(|(s, _)| s).filter(|s| {
        s.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    });
    !absolute || scheme.is_some()
}

fn uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn json_pointer(text: &str) -> bool {
    let escapes_ok = |s: &str| s.split('~').skip(1).all(|after| after.starts_with(['0', '1']));
    text.is_empty() || (text.starts_with('/') && escapes_ok(text))
}
