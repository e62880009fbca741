//! The discovery file of `listen{ discovery = PATH }`: how a client on
//! the same machine finds a server that took whatever port was free (so
//! two editors started at once never fight over one). Written only once
//! the bind succeeded, readable by this user alone (it holds the token),
//! replaced whole by a rename so a reader never sees half of it, and
//! removed when the server closes.

use std::io;
use std::path::Path;

use crate::codec::{encode, Json};

pub fn write(path: &Path, url: &str, token: Option<&str>) -> io::Result<()> {
    let mut fields = vec![("pid", Json::Int(std::process::id() as i64))];
    if let Some(token) = token {
        fields.push(("token", Json::str(token)));
    }
    fields.push(("url", Json::str(url)));
    let mut text = encode(&Json::object(fields));
    text.push(b'\n');
    crate::private_file::replace(path, &text, false)
}

pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}
