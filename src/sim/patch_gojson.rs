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

use serde_json::{Map, Number, Value};

/// Deepest nesting accepted in a patch body.
pub(super) const MAX_DEPTH: usize = 256;

/// Parses a patch body as Go's `json.Unmarshal` into `interface{}` would, or returns the
/// `Error()` text of what it fails with.
pub(super) fn parse(data: &[u8]) -> Result<Value, String> {
    validate(data)?;
    Builder { data, pos: 0 }.document()
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
        (GoType::Map, _) => Err("runtime error: comparing uncomparable type map[string]interface {}"),
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
                .map(|k| format!("{k}:{}", map.get(k).map(|v| format_value(v, verb_s)).unwrap_or_default()))
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
    s.parse::<i64>().map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", go_quote(s)))
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy)]
enum State {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`/`false`/`null`, expecting `word[next]`.
    Literal(&'static str, usize),
}

/// Go's `encoding/json` scanner, state for state, so the first error is reported with the
/// same words at the same byte.
struct Scanner {
    state: State,
    scopes: Vec<Scope>,
    end_top: bool,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn syntax(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

impl Scanner {
    fn step(&mut self, c: u8) -> Result<(), String> {
        match self.state {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b']' {
                    self.end_value(c)
                } else {
                    self.begin_value(c)
                }
            }
            State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b'}' {
                    if let Some(top) = self.scopes.last_mut() {
                        *top = Scope::ObjectValue;
                    }
                    self.end_value(c)
                } else {
                    self.begin_string(c)
                }
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => self.end_top(c),
            State::InString => match c {
                b'"' => self.go(State::EndValue),
                b'\\' => self.go(State::InStringEsc),
                c if c < 0x20 => Err(syntax(c, "in string literal")),
                _ => Ok(()),
            },
            State::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => self.go(State::InString),
                b'u' => self.go(State::InStringEscU(0)),
                _ => Err(syntax(c, "in string escape code")),
            },
            State::InStringEscU(seen) => {
                if !c.is_ascii_hexdigit() {
                    return Err(syntax(c, "in \\u hexadecimal character escape"));
                }
                self.go(if seen == 3 { State::InString } else { State::InStringEscU(seen + 1) })
            }
            State::Neg => match c {
                b'0' => self.go(State::Zero),
                b'1'..=b'9' => self.go(State::One),
                _ => Err(syntax(c, "in numeric literal")),
            },
            State::One if c.is_ascii_digit() => Ok(()),
            State::One | State::Zero => match c {
                b'.' => self.go(State::Dot),
                b'e' | b'E' => self.go(State::E),
                _ => self.end_value(c),
            },
            State::Dot if c.is_ascii_digit() => self.go(State::Dot0),
            State::Dot => Err(syntax(c, "after decimal point in numeric literal")),
            State::Dot0 => match c {
                c if c.is_ascii_digit() => Ok(()),
                b'e' | b'E' => self.go(State::E),
                _ => self.end_value(c),
            },
            State::E if c == b'+' || c == b'-' => self.go(State::ESign),
            State::E | State::ESign if c.is_ascii_digit() => self.go(State::E0),
            State::E | State::ESign => Err(syntax(c, "in exponent of numeric literal")),
            State::E0 if c.is_ascii_digit() => Ok(()),
            State::E0 => self.end_value(c),
            State::Literal(word, next) => {
                let expected = word.as_bytes().get(next).copied().unwrap_or(b' ');
                if c != expected {
                    let context = format!("in literal {word} (expecting {})", quote_char(expected));
                    return Err(syntax(c, &context));
                }
                self.go(if next + 1 == word.len() {
                    State::EndValue
                } else {
                    State::Literal(word, next + 1)
                })
            }
        }
    }

    fn go(&mut self, state: State) -> Result<(), String> {
        self.state = state;
        Ok(())
    }

    fn push(&mut self, c: u8, scope: Scope, next: State) -> Result<(), String> {
        self.scopes.push(scope);
        if self.scopes.len() > MAX_DEPTH {
            return Err(syntax(c, "exceeded max depth"));
        }
        self.go(next)
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        match c {
            c if is_space(c) => Ok(()),
            b'{' => self.push(c, Scope::ObjectKey, State::BeginStringOrEmpty),
            b'[' => self.push(c, Scope::ArrayValue, State::BeginValueOrEmpty),
            b'"' => self.go(State::InString),
            b'-' => self.go(State::Neg),
            b'0' => self.go(State::Zero),
            b't' => self.go(State::Literal("true", 1)),
            b'f' => self.go(State::Literal("false", 1)),
            b'n' => self.go(State::Literal("null", 1)),
            b'1'..=b'9' => self.go(State::One),
            _ => Err(syntax(c, "looking for beginning of value")),
        }
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        match c {
            c if is_space(c) => Ok(()),
            b'"' => self.go(State::InString),
            _ => Err(syntax(c, "looking for beginning of object key string")),
        }
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(top) = self.scopes.last_mut() else {
            self.state = State::EndTop;
            self.end_top = true;
            return self.end_top(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Ok(());
        }
        match (*top, c) {
            (Scope::ObjectKey, b':') => {
                *top = Scope::ObjectValue;
                self.go(State::BeginValue)
            }
            (Scope::ObjectKey, _) => Err(syntax(c, "after object key")),
            (Scope::ObjectValue, b',') => {
                *top = Scope::ObjectKey;
                self.go(State::BeginString)
            }
            (Scope::ObjectValue, b'}') | (Scope::ArrayValue, b']') => {
                self.scopes.pop();
                if self.scopes.is_empty() {
                    self.end_top = true;
                    self.go(State::EndTop)
                } else {
                    self.go(State::EndValue)
                }
            }
            (Scope::ObjectValue, _) => Err(syntax(c, "after object key:value pair")),
            (Scope::ArrayValue, b',') => self.go(State::BeginValue),
            (Scope::ArrayValue, _) => Err(syntax(c, "after array element")),
        }
    }

    fn end_top(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            Ok(())
        } else {
            Err(syntax(c, "after top-level value"))
        }
    }
}

/// `checkValid`: every byte, then the end of input, which Go probes by stepping a space.
fn validate(data: &[u8]) -> Result<(), String> {
    let mut scanner = Scanner { state: State::BeginValue, scopes: Vec::new(), end_top: false };
    for &c in data {
        scanner.step(c)?;
    }
    if scanner.end_top {
        return Ok(());
    }
    scanner.step(b' ')?;
    if scanner.end_top {
        Ok(())
    } else {
        Err("unexpected end of JSON input".to_owned())
    }
}

/// Builds the value of a document [`validate`] accepted, so it only meets well-formed input;
/// it still never indexes out of bounds on its own.
struct Builder<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Builder<'_> {
    fn peek(&self) -> u8 {
        self.data.get(self.pos).copied().unwrap_or(b' ')
    }

    fn skip_space(&mut self) {
        while self.pos < self.data.len() && is_space(self.peek()) {
            self.pos += 1;
        }
    }

    fn document(mut self) -> Result<Value, String> {
        self.value(0)
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
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
                            let value = self.value(depth + 1)?;
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
                        _ if self.pos < self.data.len() => items.push(self.value(depth + 1)?),
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
        text.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("json: cannot unmarshal number {text} into Go value of type float64"))
    }

    /// A string at `pos` (on its opening quote), unquoted the way Go's `unquoteBytes` does.
    fn string(&mut self) -> String {
        self.pos += 1;
        let mut out = String::new();
        let mut raw: Vec<u8> = Vec::new();
        loop {
            let c = self.peek();
            if self.pos >= self.data.len() || c == b'"' {
                self.pos += 1;
                push_lossy(&mut out, &raw);
                return out;
            }
            if c != b'\\' {
                raw.push(c);
                self.pos += 1;
                continue;
            }
            push_lossy(&mut out, &raw);
            raw.clear();
            let escape = self.data.get(self.pos + 1).copied().unwrap_or(b'"');
            self.pos += 2;
            match escape {
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let first = self.hex4();
                    out.push(self.surrogate_pair(first));
                }
                other => out.push(char::from(other)),
            }
        }
    }

    /// The four hex digits after `\u` (validated by the scanner).
    fn hex4(&mut self) -> u32 {
        let digits = self.data.get(self.pos..self.pos + 4).unwrap_or_default();
        self.pos += 4;
        std::str::from_utf8(digits).ok().and_then(|d| u32::from_str_radix(d, 16).ok()).unwrap_or(0)
    }

    /// A surrogate only counts when a `\u` low surrogate follows it; anything else becomes
    /// U+FFFD and the next escape is read on its own.
    fn surrogate_pair(&mut self, first: u32) -> char {
        if !(0xD800..0xE000).contains(&first) {
            return char::from_u32(first).unwrap_or('\u{fffd}');
        }
        let next_is_escape = self.data.get(self.pos..self.pos + 2) == Some(b"\\u".as_slice());
        if (0xD800..0xDC00).contains(&first) && next_is_escape {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4();
            if (0xDC00..0xE000).contains(&second) {
                let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return char::from_u32(code).unwrap_or('\u{fffd}');
            }
            self.pos = save;
        }
        '\u{fffd}'
    }
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
#[path = "patch_gojson_tests.rs"]
mod tests;
