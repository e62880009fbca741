//! The parts of `mcp.mount` that are plain rules: how a description is
//! folded and cut, how a JSON Schema becomes the registry's argument list,
//! how a colliding name is quoted, and which tool names a mount's pattern
//! takes (`*` matched in linear time: a server names its tools). The
//! binding applies them to the registry, which is the user's Lua object.

use crate::protocol::is_lua_space;

/// Longest description the registry gets, in bytes, "..." included.
const DESCRIPTION_LIMIT: usize = 120;

/// Runs of whitespace become one space; past 120 bytes the text is cut to
/// 117 and "..." added. The cut backs off to a UTF-8 character boundary:
/// the reference cuts at byte 117 exactly, which can split a character and
/// hand the model invalid UTF-8.
pub fn fold_description(text: &[u8]) -> Vec<u8> {
    let mut folded = Vec::with_capacity(text.len());
    let mut in_space = false;
    for &b in text {
        if is_lua_space(b) {
            if !in_space {
                folded.push(b' ');
            }
            in_space = true;
        } else {
            folded.push(b);
            in_space = false;
        }
    }
    if folded.len() > DESCRIPTION_LIMIT {
        let mut cut = DESCRIPTION_LIMIT - 3;
        // A continuation byte (10xxxxxx) cannot start a character.
        while cut > 0 && folded[cut] & 0xC0 == 0x80 {
            cut -= 1;
        }
        folded.truncate(cut);
        folded.extend_from_slice(b"...");
    }
    folded
}

/// One entry of a registry tool's `args`.
#[derive(Debug, PartialEq)]
pub struct Arg {
    pub name: Vec<u8>,
    /// "number" or "string": all the registry's grammar can express.
    pub kind: &'static str,
    pub required: bool,
}

/// Maps schema properties (name, declared `type` if it is a string) and the
/// `required` list to registry args, sorted by name so the catalogue the
/// model sees is stable from run to run.
pub fn args_from_schema(mut properties: Vec<(Vec<u8>, Option<Vec<u8>>)>, required: &[Vec<u8>]) -> Vec<Arg> {
    crate::sorting::sort_by(&mut properties, |a, b| a.0.cmp(&b.0));
    properties
        .into_iter()
        .map(|(name, ty)| {
            let kind = match ty.as_deref() {
                Some(b"number" | b"integer") => "number",
                _ => "string",
            };
            let required = required.contains(&name);
            Arg { name, kind, required }
        })
        .collect()
}

/// Lua's `%q`, which the collision message uses to quote the tool name,
/// as the runtime the module is built for writes it: Lua 5.1 escapes only
/// `\r` (as `\r`) and NUL (as `\000`) among control bytes; 5.2 and later,
/// LuaJIT included, write every control byte as `\ddd`.
pub fn lua_quote(s: &[u8]) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    #[cfg_attr(feature = "lua51", allow(unused_variables))]
    for (i, &b) in s.iter().enumerate() {
        match b {
            b'"' | b'\\' | b'\n' => {
                out.push(b'\\');
                out.push(b);
            }
            #[cfg(feature = "lua51")]
            b'\r' => out.extend_from_slice(b"\\r"),
            #[cfg(feature = "lua51")]
            0 => out.extend_from_slice(b"\\000"),
            #[cfg(feature = "lua51")]
            0x01..=0x1f | 0x7f => out.push(b),
            #[cfg(not(feature = "lua51"))]
            0x00..=0x1f | 0x7f => {
                let next_is_digit = s.get(i + 1).is_some_and(u8::is_ascii_digit);
                let code = if next_is_digit { format!("\\{b:03}") } else { format!("\\{b}") };
                out.extend_from_slice(code.as_bytes());
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a tool's `name` is one `pattern` names: the name itself, or a
/// pattern in which `*` stands for any run of bytes (`read_*`,
/// `*_file`). No other character is special: tool names carry dots,
/// dashes and slashes that a Lua pattern would read as operators.
///
/// Linear in the two lengths: the classic greedy walk that, on a
/// mismatch, only ever retries from the last star. Trying every split at
/// every star (as this once did) is exponential in the stars: twelve of
/// them against a 60-byte name hung `mcp.mount`.
pub fn name_matches(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // The last star seen, and the byte of the name it is taken to reach.
    let mut retry: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                retry = Some((p, n));
                p += 1;
            }
            Some(&b) if b == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match retry {
                // The star swallows one byte more, and the rest is tried again.
                Some((star, reached)) => {
                    retry = Some((star, reached + 1));
                    p = star + 1;
                    n = reached + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// The largest `at <= want` on a character boundary of `text`.
pub fn char_boundary(text: &str, want: usize) -> usize {
    let mut at = want.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_fold_whitespace_and_cut_at_120() {
        assert_eq!(fold_description(b"  a\t\n b  "), b" a b ".to_vec());
        let long = "x".repeat(130);
        let cut = fold_description(long.as_bytes());
        assert_eq!(cut.len(), 120);
        assert!(cut.ends_with(b"..."));
        assert_eq!(fold_description("y".repeat(120).as_bytes()).len(), 120);
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let text = format!("{}é and more text past the limit", "x".repeat(116));
        let cut = fold_description(text.as_bytes());
        assert!(std::str::from_utf8(&cut).is_ok());
        assert_eq!(cut, format!("{}...", "x".repeat(116)).into_bytes());
    }

    #[test]
    fn schema_types_map_to_number_or_string() {
        let props = vec![
            (b"b".to_vec(), Some(b"integer".to_vec())),
            (b"a".to_vec(), Some(b"boolean".to_vec())),
            (b"c".to_vec(), None),
        ];
        let args = args_from_schema(props, &[b"b".to_vec()]);
        let summary: Vec<_> = args.iter().map(|a| (a.name.clone(), a.kind, a.required)).collect();
        assert_eq!(
            summary,
            vec![(b"a".to_vec(), "string", false), (b"b".to_vec(), "number", true), (b"c".to_vec(), "string", false)]
        );
    }

    #[test]
    fn names_match_themselves_or_a_star_pattern_and_nothing_else_is_special() {
        assert!(name_matches(b"read_file", b"read_file"));
        assert!(!name_matches(b"read_file", b"read_files"));
        assert!(name_matches(b"read_*", b"read_file"));
        assert!(name_matches(b"*_file", b"write_file"));
        assert!(name_matches(b"*", b""));
        assert!(name_matches(b"a*b*c", b"a-x-b-y-c"));
        assert!(!name_matches(b"a*b*c", b"a-x-c"));
        assert!(name_matches(b"fs.read-*", b"fs.read-all"));
        assert!(!name_matches(b"fs.read-*", b"fsXread-all"));
        assert!(name_matches(b"**a**", b"xay"));
        assert!(!name_matches(b"a*", b""));
        assert!(name_matches(b"*a*b", b"aab"));
        assert!(!name_matches(b"*a*b", b"aaba"));
    }

    #[test]
    fn a_pattern_of_many_stars_matches_in_linear_time() {
        // Exponential backtracking took minutes on twelve stars; this
        // walk answers two thousand against a long name at once.
        let pattern = "a*".repeat(2000) + "b";
        let name = "a".repeat(4000);
        assert!(!name_matches(pattern.as_bytes(), name.as_bytes()));
        assert!(name_matches(("*a".repeat(12)).as_bytes(), "a".repeat(60).as_bytes()));
        assert!(!name_matches(("*a".repeat(12) + "*b").as_bytes(), "a".repeat(60).as_bytes()));
    }

    #[test]
    fn quoting_matches_lua_percent_q() {
        assert_eq!(lua_quote(b"a\"b"), r#""a\"b""#);
        assert_eq!(lua_quote(b"a\nb"), "\"a\\\nb\"");
        assert_eq!(lua_quote(b"\r1"), r#""\0131""#);
        assert_eq!(lua_quote(b"\rx"), r#""\13x""#);
    }
}
