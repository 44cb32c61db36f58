//! Go's `strconv.Quote`, which encoding/json's syntax errors (through `quoteChar`) and the
//! apiserver's own messages (`%q`) use to quote input.

/// Go's `strconv.Quote` (what `%q` prints).
///
/// Go decides what to escape with `unicode.IsPrint`; this follows it for ASCII, Latin-1,
/// control, separator, format and private-use characters. Unassigned code points (which Go
/// escapes as `\uXXXX`) are printed as they are, since Rust has no table of them.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    out.push('"');
    out
}

/// The scanner's `quoteChar`: the offending byte, read as a Latin-1 rune (so 0x81 is U+0081,
/// printed `'\u0081'` as encoding/json v1 does), in single quotes.
pub fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        _ => {
            let mut out = String::from("'");
            push_escaped(&mut out, char::from(c));
            out.push('\'');
            out
        }
    }
}

/// One rune of a double-quoted `strconv.Quote` result.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        c if is_print(c) => out.push(c),
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if u32::from(c) < 0x20 || c == '\u{7f}' => {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        }
        c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
        c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
    }
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
fn is_print(c: char) -> bool {
    let u = u32::from(c);
    if u < 0x80 {
        return (0x20..0x7f).contains(&u);
    }
    // Latin-1: C1 controls, no-break space and soft hyphen are not printable.
    if u <= 0xff {
        return u >= 0xa1 && u != 0xad;
    }
    if c.is_whitespace() || c.is_control() {
        return false;
    }
    let format = matches!(
        u,
        0x0600..=0x0605
            | 0x061c
            | 0x06dd
            | 0x070f
            | 0x0890..=0x0891
            | 0x08e2
            | 0x180e
            | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0x110bd
            | 0x110cd
            | 0x13430..=0x1343f
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0001
            | 0xe0020..=0xe007f
    );
    let private_or_nonchar =
        matches!(u, 0xe000..=0xf8ff | 0xf0000.. | 0xfdd0..=0xfdef) || (u & 0xfffe) == 0xfffe;
    !format && !private_or_nonchar
}

#[cfg(test)]
mod tests;
