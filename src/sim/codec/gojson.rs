//! JSON text as Go's encoding/json writes it (what kube-apiserver's serializer sends), which
//! differs from `serde_json::to_vec` in string escaping and float formatting.

use serde_json::{Number, Value};

/// Writes `v` compactly, keeping object key order. The apiserver's `json.Encoder` adds a
/// trailing `\n` after a whole response object; that is the caller's.
pub fn write_json(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(v, &mut out);
    out
}

fn write_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
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
        Value::Object(entries) => {
            out.push(b'{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_value(value, out);
            }
            out.push(b'}');
        }
    }
}

/// Go formats a float64 with the shortest digits, as `%f` below 1e21 and at or above 1e-6,
/// else as `%e` with at least one exponent digit and a sign ("1e-07" → "1e-7", "1e+21").
fn write_number(n: &Number, out: &mut Vec<u8>) {
    let Some(f) = n.as_f64().filter(|_| n.is_f64()) else {
        out.extend_from_slice(n.to_string().as_bytes());
        return;
    };
    let abs = f.abs();
    let text = if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let e = format!("{f:e}");
        match e.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => e,
        }
    } else {
        format!("{f}")
    };
    out.extend_from_slice(text.as_bytes());
}

/// encoding/json's string escaping with HTML escaping on (its default).
fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut buf = [0u8; 4];
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{0}'..='\u{1f}' | '<' | '>' | '&' => {
                let b = c as u8;
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            '\u{2028}' => out.extend_from_slice(b"\\u2028"),
            '\u{2029}' => out.extend_from_slice(b"\\u2029"),
            c => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_as_go_does() {
        let v = json!({"b": "<a href=\"x\">&amp;</a>\u{2028}\u{1}\u{8}\n", "a": [1, -2, 1.5, true, null]});
        assert_eq!(
            String::from_utf8(write_json(&v)).unwrap(),
            r#"{"b":"\u003ca href=\"x\"\u003e\u0026amp;\u003c/a\u003e\u2028\u0001\b\n","a":[1,-2,1.5,true,null]}"#
        );
    }

    #[test]
    fn floats_as_go_formats_them() {
        let cases = [
            (100.0, "100"),
            (0.5, "0.5"),
            (1e-7, "1e-7"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
        ];
        for (f, want) in cases {
            assert_eq!(String::from_utf8(write_json(&json!(f))).unwrap(), want);
        }
    }

    proptest::proptest! {
        #[test]
        fn strings_read_back_unchanged(s in "\\PC*|[\\x00-\\x20<>&\u{2028}]*") {
            let bytes = write_json(&Value::String(s.clone()));
            let back: Value = serde_json::from_slice(&bytes).unwrap();
            proptest::prop_assert_eq!(back, Value::String(s));
        }
    }
}
