//! JSON → Go struct → JSON, as kube-apiserver's decode and encode do it.
//!
//! The decode side works on the parsed `serde_json::Value` as sigs.k8s.io/json's strict,
//! case-sensitive decoder works on text: fields are taken in input order (so unknown fields
//! are reported in that order), `null` leaves a field at its zero value. The encode side then
//! walks the Go struct in declaration order and applies encoding/json's omit rules.

use serde_json::{Map, Number, Value};

use super::error::CodecError;
use super::schema::{Omit, StructDef, Ty};
use super::{quantity, scalar};

/// An object as the apiserver would write it back, and the fields it dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct Canonical {
    pub value: Value,
    /// Unknown fields in input order, named as strict decoding names them (`spec.foo`,
    /// `spec.containers[0].foo`); the apiserver's message is `unknown field "spec.foo"`.
    pub unknown_fields: Vec<String>,
}

/// sigs.k8s.io/json stops collecting strict errors after this many.
const MAX_STRICT_ERRORS: usize = 100;

pub fn canonicalize(def: &'static StructDef, v: &Value) -> Result<Canonical, CodecError> {
    let Value::Object(obj) = v else {
        return Err(CodecError::JsonTopLevel {
            found: json_kind(v).to_owned(),
            expected: format!("v1.{}", def.name),
        });
    };
    let mut cx = Cx { strict: String::new(), go_path: Vec::new(), unknown: Vec::new() };
    let value = Value::Object(cx.object(def, Some(obj))?);
    Ok(Canonical { value, unknown_fields: cx.unknown })
}

/// A field's encoded value and what encoding/json's omit rules would say about it.
struct Out {
    value: Value,
    /// `omitempty` drops it.
    empty: bool,
    /// `omitzero` drops it.
    zero: bool,
}

impl Out {
    fn new(value: Value, empty: bool) -> Out {
        Out { value, empty, zero: empty }
    }

    /// A struct: never empty for `omitempty`.
    fn solid(value: Value) -> Out {
        Out { value, empty: false, zero: false }
    }
}

struct Cx {
    /// The strict decoder's path: `spec.containers[0]`.
    strict: String,
    /// Go's `errorContext`: (struct name, JSON field name) down to the current field.
    go_path: Vec<(&'static str, &'static str)>,
    unknown: Vec<String>,
}

impl Cx {
    fn object(
        &mut self,
        def: &'static StructDef,
        obj: Option<&Map<String, Value>>,
    ) -> Result<Map<String, Value>, CodecError> {
        let mut decoded: Vec<(&'static str, Out)> = Vec::new();
        for (key, v) in obj.into_iter().flatten() {
            let Some(field) = def.json_field(key) else {
                self.unknown_field(key);
                continue;
            };
            let mark = self.push_key(key);
            self.go_path.push((def.name, field.json));
            let out = self.value(field.ty, present(v));
            self.go_path.pop();
            self.strict.truncate(mark);
            decoded.retain(|(name, _)| *name != field.json);
            decoded.push((field.json, out?));
        }
        let mut result = Map::new();
        self.assemble(def, &mut decoded, &mut result)?;
        Ok(result)
    }

    /// Writes `def`'s fields in Go order, promoting inline structs' fields.
    fn assemble(
        &mut self,
        def: &'static StructDef,
        decoded: &mut Vec<(&'static str, Out)>,
        result: &mut Map<String, Value>,
    ) -> Result<(), CodecError> {
        for field in def.fields {
            if let (true, Ty::Struct(inner)) = (field.inline, field.ty) {
                self.assemble(inner, decoded, result)?;
                continue;
            }
            let out = match decoded.iter().position(|(name, _)| *name == field.json) {
                Some(i) => decoded.swap_remove(i).1,
                None => self.value(field.ty, None)?,
            };
            let omit = match field.omit {
                Omit::Never => false,
                Omit::Empty => out.empty,
                Omit::Zero => out.zero,
            };
            if !omit {
                result.insert(field.json.to_owned(), out.value);
            }
        }
        Ok(())
    }

    /// Decodes one Go value (`None`: absent or `null`, i.e. the zero value) and encodes it.
    fn value(&mut self, ty: Ty, v: Option<&Value>) -> Result<Out, CodecError> {
        Ok(match (ty, v) {
            (Ty::Str, None) => Out::new(Value::String(String::new()), true),
            (Ty::Str, Some(Value::String(s))) => Out::new(Value::String(s.clone()), s.is_empty()),
            (Ty::Bool, None) => Out::new(Value::Bool(false), true),
            (Ty::Bool, Some(Value::Bool(b))) => Out::new(Value::Bool(*b), !b),
            (Ty::I32 | Ty::I64, None) => Out::new(Value::from(0), true),
            (Ty::I32, Some(Value::Number(n))) => {
                let i = self.int(n, i32::MIN.into(), i32::MAX.into(), ty)?;
                Out::new(Value::from(i), i == 0)
            }
            (Ty::I64, Some(Value::Number(n))) => {
                let i = self.int(n, i64::MIN, i64::MAX, ty)?;
                Out::new(Value::from(i), i == 0)
            }
            (Ty::F64, None) => Out::new(Value::from(0.0), true),
            (Ty::F64, Some(Value::Number(n))) => {
                let f = n.as_f64().unwrap_or(0.0);
                Out::new(Value::Number(n.clone()), f == 0.0)
            }
            (Ty::Bytes, None) => Out::new(Value::Null, true),
            (Ty::Bytes, Some(Value::String(s))) => {
                let bytes = scalar::base64_decode(s)
                    .ok_or_else(|| self.invalid(format!("illegal base64 data: {s:?}")))?;
                Out::new(Value::String(scalar::base64_encode(&bytes)), bytes.is_empty())
            }
            (Ty::Time | Ty::MicroTime, None) => {
                Out { value: Value::Null, empty: false, zero: true }
            }
            (Ty::Time | Ty::MicroTime, Some(Value::String(s))) => self.time(ty, s)?,
            (Ty::Duration, None) => Out::solid(Value::String("0s".to_owned())),
            (Ty::Duration, Some(Value::String(s))) => {
                let d = scalar::parse_duration(s)
                    .ok_or_else(|| self.invalid(format!("time: invalid duration {s:?}")))?;
                Out::solid(Value::String(scalar::format_duration(d)))
            }
            (Ty::Quantity, None) => Out::solid(Value::String("0".to_owned())),
            (Ty::Quantity, Some(Value::String(s))) => self.quantity(s)?,
            (Ty::Quantity, Some(Value::Number(n))) => self.quantity(&n.to_string())?,
            (Ty::IntOrString, None) => Out::solid(Value::from(0)),
            (Ty::IntOrString, Some(Value::String(s))) => Out::solid(Value::String(s.clone())),
            (Ty::IntOrString, Some(Value::Number(n))) => {
                Out::solid(Value::from(self.int(n, i32::MIN.into(), i32::MAX.into(), Ty::I32)?))
            }
            // Both keep the raw JSON they were given; a nil Raw is written as null.
            (Ty::FieldsV1 | Ty::RawExtension, v) => Out::solid(v.cloned().unwrap_or(Value::Null)),
            (Ty::Struct(def), None) => Out::solid(Value::Object(self.object(def, None)?)),
            (Ty::Struct(def), Some(Value::Object(obj))) => {
                Out::solid(Value::Object(self.object(def, Some(obj))?))
            }
            (Ty::Ptr(_), None) => Out::new(Value::Null, true),
            (Ty::Ptr(inner), Some(v)) => Out::solid(self.value(*inner, Some(v))?.value),
            (Ty::Slice(_) | Ty::Map(_), None) => Out::new(Value::Null, true),
            (Ty::Slice(inner), Some(Value::Array(items))) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let mark = self.strict.len();
                    self.strict.push_str(&format!("[{i}]"));
                    let encoded = self.value(*inner, present(item));
                    self.strict.truncate(mark);
                    out.push(encoded?.value);
                }
                Out::new(Value::Array(out), items.is_empty())
            }
            (Ty::Map(inner), Some(Value::Object(entries))) => {
                // encoding/json writes map keys sorted.
                let mut keys: Vec<&String> = entries.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for key in keys {
                    let mark = self.push_key(key);
                    let encoded = self.value(*inner, entries.get(key.as_str()).and_then(present));
                    self.strict.truncate(mark);
                    out.insert(key.clone(), encoded?.value);
                }
                Out::new(Value::Object(out), entries.is_empty())
            }
            (_, Some(v)) => return Err(self.type_error(json_kind(v).to_owned(), ty)),
        })
    }

    fn int(&self, n: &Number, min: i64, max: i64, ty: Ty) -> Result<i64, CodecError> {
        n.as_i64()
            .filter(|i| (min..=max).contains(i))
            .ok_or_else(|| self.type_error(format!("number {n}"), ty))
    }

    fn time(&self, ty: Ty, s: &str) -> Result<Out, CodecError> {
        let t = scalar::parse_rfc3339(s).ok_or_else(|| {
            self.invalid(format!("parsing time {s:?} as \"2006-01-02T15:04:05Z07:00\""))
        })?;
        if t.is_zero() {
            return Ok(Out { value: Value::Null, empty: false, zero: true });
        }
        let text = match ty {
            Ty::MicroTime => scalar::format_micro_time(t),
            _ => scalar::format_time(t),
        };
        let text = text.ok_or_else(|| self.invalid(format!("time {s:?} is out of range")))?;
        Ok(Out::solid(Value::String(text)))
    }

    fn quantity(&self, s: &str) -> Result<Out, CodecError> {
        let canonical = quantity::canonical(s).map_err(|e| self.invalid(e.to_string()))?;
        Ok(Out::solid(Value::String(canonical)))
    }

    /// Appends a key to the strict path; returns the length to truncate back to.
    fn push_key(&mut self, key: &str) -> usize {
        let mark = self.strict.len();
        if !self.strict.is_empty() {
            self.strict.push('.');
        }
        self.strict.push_str(key);
        mark
    }

    fn unknown_field(&mut self, key: &str) {
        let path = match self.strict.is_empty() {
            true => key.to_owned(),
            false => format!("{}.{key}", self.strict),
        };
        if self.unknown.len() < MAX_STRICT_ERRORS && !self.unknown.contains(&path) {
            self.unknown.push(path);
        }
    }

    /// Go's `Struct.field.path` for error messages.
    fn go_field(&self) -> String {
        let names: Vec<&str> = self.go_path.iter().map(|(_, name)| *name).collect();
        match self.go_path.last() {
            Some((def, _)) => format!("{def}.{}", names.join(".")),
            None => String::new(),
        }
    }

    fn type_error(&self, found: String, ty: Ty) -> CodecError {
        CodecError::JsonType { found, field: self.go_field(), expected: go_type(ty) }
    }

    fn invalid(&self, message: String) -> CodecError {
        CodecError::JsonValue { field: self.strict.clone(), message }
    }
}

/// Go decodes `null` into any field as "leave it at its zero value".
fn present(v: &Value) -> Option<&Value> {
    (!v.is_null()).then_some(v)
}

/// How Go's `UnmarshalTypeError` names a JSON value.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The Go type's name as reflect prints it (named scalar types as their underlying type).
fn go_type(ty: Ty) -> String {
    match ty {
        Ty::Str => "string".to_owned(),
        Ty::Bool => "bool".to_owned(),
        Ty::I32 => "int32".to_owned(),
        Ty::I64 => "int64".to_owned(),
        Ty::F64 => "float64".to_owned(),
        Ty::Bytes => "[]uint8".to_owned(),
        Ty::Time => "v1.Time".to_owned(),
        Ty::MicroTime => "v1.MicroTime".to_owned(),
        Ty::Duration => "v1.Duration".to_owned(),
        Ty::Quantity => "resource.Quantity".to_owned(),
        Ty::IntOrString => "intstr.IntOrString".to_owned(),
        Ty::FieldsV1 => "v1.FieldsV1".to_owned(),
        Ty::RawExtension => "runtime.RawExtension".to_owned(),
        Ty::Struct(def) => format!("v1.{}", def.name),
        Ty::Ptr(inner) => format!("*{}", go_type(*inner)),
        Ty::Slice(inner) => format!("[]{}", go_type(*inner)),
        Ty::Map(inner) => format!("map[string]{}", go_type(*inner)),
    }
}
