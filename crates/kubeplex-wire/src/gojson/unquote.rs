//! Go's `unquote` of a JSON string literal: what encoding/json's decoder stores for a string the
//! scanner accepted. Unlike serde_json it takes invalid UTF-8 and unpaired surrogate escapes,
//! replacing each with U+FFFD.

/// Decodes the string literal at the start of `data` (on its opening quote). Returns the string
/// and the number of bytes it took, closing quote included.
///
/// Meant for input [`super::check_valid`] accepted; on anything else it stops at the end of
/// `data` and still never panics.
pub fn unquote(data: &[u8]) -> (String, usize) {
    let mut out = String::new();
    let mut pos = 1;
    let mut run = 1;
    loop {
        match data.get(pos) {
            None | Some(b'"') => {
                push_lossy(&mut out, data.get(run..pos).unwrap_or_default());
                return (out, pos + 1);
            }
            Some(b'\\') => {
                push_lossy(&mut out, data.get(run..pos).unwrap_or_default());
                let escape = data.get(pos + 1).copied().unwrap_or(b'"');
                pos += 2;
                match escape {
                    b'b' => out.push('\u{8}'),
                    b'f' => out.push('\u{c}'),
                    b'n' => out.push('\n'),
                    b'r' => out.push('\r'),
                    b't' => out.push('\t'),
                    b'u' => out.push(unicode_escape(data, &mut pos)),
                    other => out.push(char::from(other)),
                }
                run = pos;
            }
            Some(_) => pos += 1,
        }
    }
}

/// The rune of a `\uXXXX` escape whose digits start at `pos`. A surrogate only counts when a
/// `\u` low surrogate follows it; anything else becomes U+FFFD and the next escape is read on
/// its own.
fn unicode_escape(data: &[u8], pos: &mut usize) -> char {
    let Some(first) = hex4(data, pos) else { return '\u{fffd}' };
    if !(0xd800..0xe000).contains(&first) {
        return char::from_u32(first).unwrap_or('\u{fffd}');
    }
    if (0xd800..0xdc00).contains(&first) && data.get(*pos..*pos + 2) == Some(b"\\u".as_slice()) {
        let save = *pos;
        *pos += 2;
        if let Some(second) = hex4(data, pos).filter(|s| (0xdc00..0xe000).contains(s)) {
            let c = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
            return char::from_u32(c).unwrap_or('\u{fffd}');
        }
        *pos = save;
    }
    '\u{fffd}'
}

fn hex4(data: &[u8], pos: &mut usize) -> Option<u32> {
    let digits = data.get(*pos..*pos + 4)?;
    let value = u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
    *pos += 4;
    Some(value)
}

/// Appends bytes as UTF-8, each invalid byte becoming U+FFFD (Go's `utf8.DecodeRune` width 1).
fn push_lossy(out: &mut String, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return;
            }
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push('\u{fffd}');
                bytes = rest.get(1..).unwrap_or_default();
            }
        }
    }
}

#[cfg(test)]
mod tests;
