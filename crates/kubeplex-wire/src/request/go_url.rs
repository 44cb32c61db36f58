//! Go's `net/url` and `net/http` as kube-apiserver's HTTP server reads a request target,
//! before any of the apiserver's own code runs: the path is percent-decoded (and refused if
//! an escape is malformed), the query is split into `url.Values` (malformed pairs dropped).

/// What Go's `net/http` server writes, before any handler runs, for a request whose target
/// `url.ParseRequestURI` refuses — a path with a malformed `%` escape, for one (server.go,
/// `conn.serve`: `"HTTP/1.1 400 Bad Request" + errorHeaders + "400 Bad Request"`, then the
/// connection is closed). The apiserver never sees such a request.
pub mod bad_request {
    pub const STATUS: u16 = 400;
    /// net/http's `errorHeaders`: these two headers and nothing else (no Date, no length: the
    /// body ends with the connection).
    pub const CONTENT_TYPE: &str = "text/plain; charset=utf-8";
    pub const CONNECTION: &str = "close";
    pub const BODY: &[u8] = b"400 Bad Request";
}

/// The request path as Go's `url.ParseRequestURI` decodes it into `URL.Path` (net/url's
/// `unescape(s, encodePath)`), which is what the apiserver routes on; `None` when a `%` is
/// not followed by two hex digits (Go's `EscapeError`, which net/http answers with
/// [`bad_request`]). A `+` stays a `+` in a path. Go's strings are bytes: a decoded byte
/// sequence that is not UTF-8 is kept here with U+FFFD in its place, which is what Go's JSON
/// encoder writes when such a name is echoed in a Status message.
pub fn unescape_path(raw: &str) -> Option<String> {
    if !raw.contains('%') {
        return Some(raw.to_owned());
    }
    unescape(raw.as_bytes(), false).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Go's `url.Values` of a raw query (`URL.Query()`, which ignores `ParseQuery`'s error): the
/// pairs in the order they came. As net/url's `parseQuery`:
/// - a query of more than 10,000 parameters (`&`s + 1) reads as no parameters at all (Go
///   1.24+'s `urlmaxqueryparams` default, which kube-apiserver 1.36's toolchain has);
/// - a pair containing `;` is dropped (Go 1.17+), as is an empty one;
/// - a pair whose key or value has a malformed `%` escape is dropped (not kept literally);
/// - `+` is a space, `%XX` a byte (non-UTF-8 results are kept lossily, see [`unescape_path`]).
pub fn parse_query(raw: &str) -> Vec<(String, String)> {
    const MAX_PARAMS: usize = 10_000;
    if raw.is_empty() || raw.bytes().filter(|&b| b == b'&').count() + 1 > MAX_PARAMS {
        return Vec::new();
    }
    let mut out = Vec::new();
    for pair in raw.split('&') {
        if pair.is_empty() || pair.contains(';') {
            continue;
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(k), Some(v)) = (unescape(k.as_bytes(), true), unescape(v.as_bytes(), true))
        else {
            continue;
        };
        out.push((
            String::from_utf8_lossy(&k).into_owned(),
            String::from_utf8_lossy(&v).into_owned(),
        ));
    }
    out
}

/// The first value of `key` (what `url.Values.Get` and the apiserver's query conversions,
/// `Convert_Slice_string_To_*`, read: `(*in)[0]`).
pub fn first<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// net/url's `unescape` for paths (`query = false`) and query components (`+` is a space).
fn unescape(s: &[u8], query: bool) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let hi = s.get(i + 1).copied().and_then(hex)?;
                let lo = s.get(i + 2).copied().and_then(hex)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if query => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(out)
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
