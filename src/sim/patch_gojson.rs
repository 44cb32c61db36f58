//! What Go's `encoding/json` (and its `sigs.k8s.io/json` fork, used for strategic merge
//! patches) does with a patch body, where it shows in the apiserver's answers:
//!
//! - syntax errors carry the Go scanner's exact message ("invalid character 'x' looking for
//!   beginning of value", "unexpected end of JSON input"), which the apiserver returns as the
//!   400 message;
//! - strings decode the Go way: each invalid UTF-8 byte and each unpaired `\u` surrogate becomes
//!   U+FFFD (serde_json would reject both);
//! - numbers decode as `UnmarshalCaseSensitivePreserveInts` does: integers that fit int64 stay
//!   integers, anything else is a float64;
//! - `%v` / `%s` formatting and type names of decoded values, for the error messages the
//!   strategic merge patch code builds with `fmt`.
//!
//! Nesting is limited to [`MAX_DEPTH`] levels (Go allows 10000): past it the body is refused
//! with Go's "exceeded max depth" message, which keeps every later recursion shallow.

use serde_json::Value;

#[path = "patch_gojson_scan.rs"]
mod scan;

/// Deepest nesting accepted in a patch body.
pub(super) const MAX_DEPTH: usize = 256;

/// Parses a patch body as Go's `json.Unmarshal` into `interface{}` would, or returns the
/// `Error()` text of what it fails with.
pub(super) fn parse(data: &[u8]) -> Result<Value, String> {
    scan::validate(data)?;
    scan::build(data)
}

/// `json: cannot unmarshal <kind> into Go value of type <go_type>`: the error for a value of
/// the wrong JSON kind at the top of a typed target. (Go decodes null into anything; callers
/// never ask for it.)
pub(super) fn type_error(value: &Value, go_type: &str) -> String {
    let kind = match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    };
    format!("json: cannot unmarshal {kind} into Go value of type {go_type}")
}

/// The dynamic Go type a decoded value has, as `reflect.TypeOf` compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GoType {
    Nil,
    Bool,
    Int64,
    Float64,
    String,
    Slice,
    Map,
}

pub(super) fn go_type(value: &Value) -> GoType {
    match value {
        Value::Null => GoType::Nil,
        Value::Bool(_) => GoType::Bool,
        Value::Number(n) if n.is_i64() => GoType::Int64,
        Value::Number(_) => GoType::Float64,
        Value::String(_) => GoType::String,
        Value::Array(_) => GoType::Slice,
        Value::Object(_) => GoType::Map,
    }
}

/// `reflect.TypeOf(v)` printed with `%s` (a nil interface has no type).
pub(super) fn type_name(value: &Value) -> &'static str {
    match go_type(value) {
        GoType::Nil => "%!s(<nil>)",
        GoType::Bool => "bool",
        GoType::Int64 => "int64",
        GoType::Float64 => "float64",
        GoType::String => "string",
        GoType::Slice => "[]interface {}",
        GoType::Map => "map[string]interface {}",
    }
}

/// Go's `==` on two `interface{}` values: false for different dynamic types, a runtime panic
/// (`Err`) for two maps or two slices, value equality otherwise.
pub(super) fn go_eq(a: &Value, b: &Value) -> Result<bool, &'static str> {
    match (go_type(a), go_type(b)) {
        (x, y) if x != y => Ok(false),
        (GoType::Map, _) => {
            Err("runtime error: comparing uncomparable type map[string]interface {}")
        }
        (GoType::Slice, _) => Err("runtime error: comparing uncomparable type []interface {}"),
        _ => Ok(a == b),
    }
}

/// `fmt.Sprintf("%v", v)`: maps as `map[k:v ...]` with sorted keys, slices as `[a b]`,
/// strings bare, nil as `<nil>`.
pub(super) fn fmt_v(value: &Value) -> String {
    format_value(value, false)
}

/// `fmt.Sprintf("%s", v)`: like `%v` for strings, maps and slices, `%!s(T=v)` for the rest.
pub(super) fn fmt_s(value: &Value) -> String {
    format_value(value, true)
}

fn format_value(value: &Value, verb_s: bool) -> String {
    let scalar = |text: String, ty: &str| if verb_s { format!("%!s({ty}={text})") } else { text };
    match value {
        Value::Null if verb_s => "%!s(<nil>)".to_owned(),
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => scalar(b.to_string(), "bool"),
        Value::Number(n) => match n.as_i64() {
            Some(i) => scalar(i.to_string(), "int64"),
            None => scalar(format_float(n.as_f64().unwrap_or(0.0)), "float64"),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|v| format_value(v, verb_s)).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{k}:{}",
                        map.get(k).map(|v| format_value(v, verb_s)).unwrap_or_default()
                    )
                })
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// A float64 as `%v` prints it: strconv's shortest digits in `%g` form, switching to an
/// exponent (at least two digits) below 1e-4 or from 1e6 on (`1e+06`, `1.5e-05`).
fn format_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".to_owned() } else { "0".to_owned() };
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: "-1.2345e6".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let dot = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}e{esign}{:02}", exp.unsigned_abs());
    }
    // Decimal point after `exp + 1` digits.
    let point = exp + 1;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else {
        let point = point as usize;
        if point >= digits.len() {
            format!("{digits}{}", "0".repeat(point - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point);
            format!("{int}.{frac}")
        }
    };
    format!("{sign}{body}")
}

/// Go's `strconv.Atoi` as the json-patch code uses it for array indices, with its messages.
pub(super) fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(s)));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", go_quote(s)))
}

/// `strconv.Quote`: double quotes, Go escapes for control and non-printable characters.
pub(super) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c, '"');
    }
    out.push('"');
    out
}

fn push_escaped(out: &mut String, c: char, quote: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        c if c == quote => {
            out.push('\\');
            out.push(c);
        }
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
        // unicode.IsPrint for the Latin-1 range a scanner error can show: C1 controls,
        // no-break space and soft hyphen are escaped.
        c if ('\u{80}'..='\u{a0}').contains(&c) || c == '\u{ad}' => {
            out.push_str(&format!("\\u{:04x}", c as u32));
        }
        c => out.push(c),
    }
}

/// The scanner's `quoteChar`: the offending byte, read as a Latin-1 code point, in single
/// quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        _ => {
            let mut out = String::from("'");
            push_escaped(&mut out, char::from(c), '"');
            out.push('\'');
            out
        }
    }
}

#[cfg(test)]
#[path = "patch_gojson_tests.rs"]
mod tests;
