//! Go's `json.Unmarshal` into the apiserver's `continueToken` struct, reproducing its error
//! messages: first the syntax check of the whole input (`checkValid`, the v1 scanner), then the
//! decode with its type errors. The apiserver is built with encoding/json v1 (fixture
//! err-bad-continue shows v1's `'\u0081'` where v2 would print `'\x81'`).

use crate::gojson::{check_valid, is_space, unquote, MAX_NESTING_DEPTH};

/// The three fields of `storage.continueToken`, zero-valued when absent.
#[derive(Debug, Default)]
pub(super) struct Fields {
    pub version: String,
    pub rv: i64,
    pub start: String,
}

/// `json.Unmarshal(data, &continueToken{})`; the error is Go's message.
pub(super) fn unmarshal(data: &[u8]) -> Result<Fields, String> {
    check_valid(data, MAX_NESTING_DEPTH).map_err(|e| e.to_string())?;
    let mut d = Decoder { data, pos: 0, error: None };
    let mut fields = Fields::default();
    d.top_level(&mut fields);
    match d.error {
        Some(e) => Err(e),
        None => Ok(fields),
    }
}

/// Decodes input that `check_valid` accepted, keeping Go's first type error.
struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    error: Option<String>,
}

#[derive(Clone, Copy)]
enum Target {
    Version,
    Rv,
    Start,
}

impl Decoder<'_> {
    fn peek(&self) -> u8 {
        self.data.get(self.pos).copied().unwrap_or(0)
    }

    fn skip_space(&mut self) {
        while is_space(self.peek()) {
            self.pos += 1;
        }
    }

    fn save(&mut self, message: String) {
        self.error.get_or_insert(message);
    }

    /// The kind word Go's `UnmarshalTypeError` uses for the value at the cursor.
    fn kind(&self) -> &'static str {
        match self.peek() {
            b'{' => "object",
            b'[' => "array",
            b'"' => "string",
            b't' | b'f' => "bool",
            _ => "number",
        }
    }

    fn top_level(&mut self, fields: &mut Fields) {
        self.skip_space();
        match self.peek() {
            b'{' => self.object(fields),
            b'n' => {}
            _ => {
                let kind = self.kind();
                self.save(format!(
                    "json: cannot unmarshal {kind} into Go value of type storage.continueToken"
                ));
            }
        }
    }

    fn object(&mut self, fields: &mut Fields) {
        self.pos += 1;
        loop {
            self.skip_space();
            if self.peek() == b'}' {
                return;
            }
            let key = self.string();
            self.skip_space();
            self.pos += 1; // ':'
            self.skip_space();
            match field_for(&key) {
                Some(target) => self.field(target, fields),
                None => self.skip_value(),
            }
            self.skip_space();
            if self.peek() == b',' {
                self.pos += 1;
            } else {
                self.pos += 1; // '}'
                return;
            }
        }
    }

    fn field(&mut self, target: Target, fields: &mut Fields) {
        let (name, go_type) = match target {
            Target::Version => ("v", "string"),
            Target::Rv => ("rv", "int64"),
            Target::Start => ("start", "string"),
        };
        let c = self.peek();
        let mismatch = match (target, c) {
            // null leaves a string or an int untouched.
            (_, b'n') => None,
            (Target::Version | Target::Start, b'"') => {
                let s = self.string();
                match target {
                    Target::Version => fields.version = s,
                    _ => fields.start = s,
                }
                return;
            }
            (Target::Rv, b'-' | b'0'..=b'9') => {
                let literal = String::from_utf8_lossy(self.scalar()).into_owned();
                match literal.parse::<i64>() {
                    Ok(rv) => fields.rv = rv,
                    Err(_) => self.save(type_error(&format!("number {literal}"), name, go_type)),
                }
                return;
            }
            _ => Some(self.kind()),
        };
        if let Some(kind) = mismatch {
            self.save(type_error(kind, name, go_type));
        }
        self.skip_value();
    }

    /// A number or literal: everything up to the next delimiter.
    fn scalar(&mut self) -> &[u8] {
        let start = self.pos;
        while !matches!(self.peek(), 0 | b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
            self.pos += 1;
        }
        self.data.get(start..self.pos).unwrap_or_default()
    }

    /// Skips one value without recursing, so nesting depth costs no stack.
    fn skip_value(&mut self) {
        if !matches!(self.peek(), b'{' | b'[' | b'"') {
            self.scalar();
            return;
        }
        let mut depth = 0usize;
        loop {
            match self.peek() {
                0 => return,
                b'"' => {
                    self.string();
                    if depth == 0 {
                        return;
                    }
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        self.pos += 1;
                        return;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
    }

    /// A string literal at the cursor, unquoted as Go does.
    fn string(&mut self) -> String {
        let (s, len) = unquote(self.data.get(self.pos..).unwrap_or_default());
        self.pos += len;
        s
    }
}

/// Field names match case-insensitively, by Go's `foldName`: ASCII case and also `ſ` (which
/// folds to `S`).
fn field_for(key: &str) -> Option<Target> {
    let folded: String = key
        .chars()
        .map(|c| match c {
            'ſ' => 'S',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    match folded.as_str() {
        "V" => Some(Target::Version),
        "RV" => Some(Target::Rv),
        "START" => Some(Target::Start),
        _ => None,
    }
}

fn type_error(kind: &str, field: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {kind} into Go struct field continueToken.{field} of type {go_type}")
}
