//! What Go's `encoding/json` (and its `sigs.k8s.io/json` fork, used for strategic merge
//! patches) does with a patch body, where it shows in the apiserver's answers:
//!
//! - syntax errors carry the Go scanner's exact message ("invalid character 'x' looking for
//!   beginning of value", "unexpected end of JSON input", from [`gojson::check_valid`]), which
//!   the apiserver returns as the 400 message;
//! - strings decode the Go way: each invalid UTF-8 byte and each unpaired `\u` surrogate becomes
//!   U+FFFD (serde_json would reject both);
//! - numbers decode as `UnmarshalCaseSensitivePreserveInts` does: integers that fit int64 stay
//!   integers, anything else is a float64;
//! - `%v` / `%s` formatting and type names of decoded values, for the error messages the
//!   strategic merge patch code builds with `fmt`.
//!
//! Nesting is limited to [`MAX_DEPTH`] levels (Go allows 10000): past it the body is refused
//! with Go's "exceeded max depth" message, which keeps every later recursion shallow.

use serde_json::{Map, Number, Value};

use crate::wire::gojson;

/// Deepest nesting accepted in a patch body.
pub(super) const MAX_DEPTH: usize = 256;

/// Parses a patch body as Go's `json.Unmarshal` into `interface{}` would, or returns the
/// `Error()` text of what it fails with.
pub(super) fn parse(data: &[u8]) -> Result<Value, String> {
    gojson::check_valid(data, MAX_DEPTH).map_err(|e| e.to_string())?;
    Builder { data, pos: 0 }.document()
}

/// Decodes a body `check_valid` accepted, so it only meets well-formed input; it still never
/// indexes out of bounds on its own.
struct Builder<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Builder<'_> {
    fn peek(&self) -> u8 {
        self.data.get(self.pos).copied().unwrap_or(b' ')
    }

    fn skip_space(&mut self) {
        while self.pos < self.data.len() && gojson::is_space(self.peek()) {
            self.pos += 1;
        }
    }

    fn document(mut self) -> Result<Value, String> {
        self.value()
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_space();
        // Depth is bounded by the scanner's MAX_DEPTH, so this recursion stays shallow.
        match self.peek() {
            b'{' => {
                self.pos += 1;
                let mut map = Map::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        b'}' => {
                            self.pos += 1;
                            return Ok(Value::Object(map));
                        }
                        b',' => self.pos += 1,
                        b'"' => {
                            let key = self.string();
                            self.skip_space();
                            self.pos += 1; // ':'
                            let value = self.value()?;
                            map.insert(key, value);
                        }
                        _ => return Err("unexpected end of JSON input".to_owned()),
                    }
                }
            }
            b'[' => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        b']' => {
                            self.pos += 1;
                            return Ok(Value::Array(items));
                        }
                        b',' => self.pos += 1,
                        _ if self.pos < self.data.len() => items.push(self.value()?),
                        _ => return Err("unexpected end of JSON input".to_owned()),
                    }
                }
            }
            b'"' => Ok(Value::String(self.string())),
            b't' => self.literal(4, Value::Bool(true)),
            b'f' => self.literal(5, Value::Bool(false)),
            b'n' => self.literal(4, Value::Null),
            _ => self.number(),
        }
    }

    fn literal(&mut self, len: usize, value: Value) -> Result<Value, String> {
        self.pos += len;
        Ok(value)
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while self.pos < self.data.len()
            && matches!(self.peek(), b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(self.data.get(start..self.pos).unwrap_or_default())
            .unwrap_or_default();
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        text.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number).ok_or_else(|| {
            format!("json: cannot unmarshal number {text} into Go value of type float64")
        })
    }

    /// A string at `pos` (on its opening quote), unquoted the way Go's `unquoteBytes` does.
    fn string(&mut self) -> String {
        let (s, len) = gojson::unquote(self.data.get(self.pos..).unwrap_or_default());
        self.pos += len;
        s
    }
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
        return Err(format!("strconv.Atoi: parsing {}: invalid syntax", gojson::quote(s)));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", gojson::quote(s)))
}

#[cfg(test)]
mod tests;
