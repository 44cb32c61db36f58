//! JSON output byte-identical to Go's `encoding/json` encoder, which kube-apiserver uses for
//! every JSON response (`json.NewEncoder(w).Encode(obj)` in apimachinery's JSON serializer).
//!
//! Two things differ from serde_json's output: Go escapes HTML-sensitive characters and the
//! JavaScript line separators (`SetEscapeHTML` defaults to true), and Go prints floats with
//! `strconv.FormatFloat(f, 'f', -1, 64)`, switching to exponent form outside [1e-6, 1e21).
//! The encoder's trailing `\n` after a whole response body is the caller's to add.

use serde_json::{Map, Number, Value};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `v` as compact Go JSON, object keys in their stored order.
pub fn to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(v, &mut out);
    out
}

/// Appends any JSON value, keeping object keys in their stored order.
pub fn write_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => push_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(map.iter(), out),
    }
}

/// Appends `{"k":v,...}` from key/value pairs in the given order.
pub fn write_object<'a>(
    entries: impl IntoIterator<Item = (&'a String, &'a Value)>,
    out: &mut Vec<u8>,
) {
    out.push(b'{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_string(out, k);
        out.push(b':');
        write_value(v, out);
    }
    out.push(b'}');
}

/// Appends a map the way Go writes a `map[string]T`: keys sorted bytewise.
pub fn write_sorted_map(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    write_object(entries, out);
}

/// Appends a JSON number as Go prints the same value after decoding it (int64 stays an
/// integer; a float uses Go's shortest formatting, see [`format_float`]).
fn write_number(n: &Number, out: &mut Vec<u8>) {
    if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if let Some(u) = n.as_u64() {
        out.extend_from_slice(u.to_string().as_bytes());
    } else if let Some(f) = n.as_f64() {
        out.extend_from_slice(format_float(f).as_bytes());
    }
}

/// A float64 as encoding/json's `floatEncoder` writes it: `strconv.FormatFloat(f, 'f', -1, 64)`
/// at or above 1e-6 and below 1e21, else the `'e'` format with the exponent trimmed
/// ("1e-07" → "1e-7", "1e+21").
pub fn format_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust's `{:e}` gives the same shortest digits; Go writes the exponent with a sign
        // and (after encoding/json trims "e-07" to "e-7") no padding.
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) if exp.starts_with('-') => format!("{mantissa}e{exp}"),
            Some((mantissa, exp)) => format!("{mantissa}e+{exp}"),
            None => s,
        }
    } else {
        // Rust's Display never uses an exponent and prints integral floats without ".0",
        // like Go's 'f' format with precision -1.
        format!("{f}")
    }
}

/// Appends `s` as a JSON string literal the way Go's encoder writes it, HTML escaping on.
pub fn push_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        let escape: Option<&[u8]> = match ch {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            // Go 1.22 and later write \b and \f in their short form.
            '\u{8}' => Some(b"\\b"),
            '\u{c}' => Some(b"\\f"),
            _ => None,
        };
        let long_form = match ch {
            // HTML escaping: the apiserver never disables it, so `<none>` goes out as
            // `\u003cnone\u003e` (see fixture pod-list-table).
            '<' | '>' | '&' => true,
            // U+2028 and U+2029 are valid JSON but break JavaScript string literals.
            '\u{2028}' | '\u{2029}' => true,
            c => (c as u32) < 0x20,
        };
        if escape.is_none() && !long_form {
            continue;
        }
        out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
        start = i + ch.len_utf8();
        match escape {
            Some(short) => out.extend_from_slice(short),
            None => {
                let code = ch as u32;
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((code >> shift) & 0xf) as usize]);
                }
            }
        }
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
    out.push(b'"');
}

#[cfg(test)]
mod tests;
