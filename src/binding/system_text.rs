//! Strings that name things to the system (a command, its arguments, a
//! working directory, environment variables, file paths), from the bytes
//! Lua holds.
//!
//! Lua strings are bytes, and on Windows a Lua built on the C runtime
//! gets its text from the system in the active code page, not UTF-8:
//! `os.getenv('USERPROFILE')` for a user named "José" is `Jos\xe9` on a
//! Western European machine, and `mcp.new` refused it with mlua's "error
//! converting Lua string to &str (incomplete utf-8 byte sequence from
//! index 28)", naming neither the option nor the encoding. So on Windows
//! bytes that are not UTF-8 are read as the code page's text (what the
//! same Lua's `io.open` would do with them); elsewhere the system takes
//! UTF-8 only, and the refusal names the option and the first bad byte.

use mlua::LuaString;

use super::lua::Outcome;
use crate::error::Error;

/// `text` as a Rust string for `option` (its name as the user wrote it,
/// `opts.cwd`, `opts.command[2]`), converted from the code page where the
/// system speaks one.
pub(super) fn system_text(text: &LuaString, option: &str) -> Outcome<String> {
    let bytes = text.as_bytes();
    match std::str::from_utf8(&bytes) {
        Ok(text) => Ok(text.to_string()),
        Err(e) => from_code_page(&bytes).ok_or_else(|| refusal(option, e.valid_up_to()).into()),
    }
}

fn refusal(option: &str, at: usize) -> Error {
    let how = if cfg!(windows) {
        "is neither UTF-8 nor text in this system's code page"
    } else {
        "is not UTF-8, which is what this system takes"
    };
    Error::BadInput(format!("mcp.new: {option} {how} (a bad byte at offset {at}); pass it as UTF-8"))
}

#[cfg(windows)]
fn from_code_page(bytes: &[u8]) -> Option<String> {
    use windows_sys::Win32::Globalization::{MultiByteToWideChar, CP_ACP, MB_ERR_INVALID_CHARS};
    let len = i32::try_from(bytes.len()).ok()?;
    // SAFETY: the input pointer and length describe `bytes`; the first
    // call only measures, the second writes at most `wide.len()` units.
    unsafe {
        let units = MultiByteToWideChar(CP_ACP, MB_ERR_INVALID_CHARS, bytes.as_ptr(), len, std::ptr::null_mut(), 0);
        if units <= 0 {
            return None;
        }
        let mut wide = vec![0u16; units as usize];
        let written = MultiByteToWideChar(CP_ACP, MB_ERR_INVALID_CHARS, bytes.as_ptr(), len, wide.as_mut_ptr(), units);
        if written <= 0 {
            return None;
        }
        wide.truncate(written as usize);
        String::from_utf16(&wide).ok()
    }
}

#[cfg(not(windows))]
fn from_code_page(_: &[u8]) -> Option<String> {
    None
}
