//! Canonical JSON → protobuf, as gogo's generated `Marshal` writes the Go struct.
//!
//! The input is the output of `json::canonicalize`, so every value already has its field's
//! JSON type; a mismatch is still an error rather than a panic.

use serde_json::{Map, Value};

use super::error::CodecError;
use super::scalar;
use super::schema::{StructDef, Ty};

pub const WIRE_VARINT: u8 = 0;
pub const WIRE_FIXED64: u8 = 1;
pub const WIRE_LEN: u8 = 2;
pub const WIRE_START_GROUP: u8 = 3;
pub const WIRE_END_GROUP: u8 = 4;
pub const WIRE_FIXED32: u8 = 5;

pub fn encode(def: &'static StructDef, v: &Value) -> Result<Vec<u8>, CodecError> {
    let empty = Map::new();
    let mut out = Vec::new();
    encode_struct(def, v.as_object().unwrap_or(&empty), &mut out)?;
    Ok(out)
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_tag(out: &mut Vec<u8>, num: u32, wire: u8) {
    put_varint(out, u64::from(num) << 3 | u64::from(wire));
}

pub fn put_bytes(out: &mut Vec<u8>, num: u32, bytes: &[u8]) {
    put_tag(out, num, WIRE_LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn encode_struct(
    def: &'static StructDef,
    obj: &Map<String, Value>,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    for field in def.proto_order.iter().filter_map(|&i| def.fields.get(i)) {
        match (field.inline, field.ty) {
            // An inline struct is flattened in JSON but a nested message in protobuf.
            (true, Ty::Struct(inner)) => {
                let mut msg = Vec::new();
                encode_struct(inner, obj, &mut msg)?;
                put_bytes(out, field.proto, &msg);
            }
            _ => {
                let v = obj.get(field.json).filter(|v| !v.is_null());
                encode_field(field.proto, field.ty, v, field.json, out)?;
            }
        }
    }
    Ok(())
}

/// Writes field `num`; `v` is `None` for an absent or `null` (Go: zero or nil) value.
fn encode_field(
    num: u32,
    ty: Ty,
    v: Option<&Value>,
    name: &str,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let mismatch = || CodecError::ProtoValue {
        field: name.to_owned(),
        message: format!("{v:?} does not fit the field's type"),
    };
    match ty {
        // gogo writes a pointer (and a []byte) only when it is set...
        Ty::Ptr(inner) => {
            if let Some(v) = v {
                encode_field(num, *inner, Some(v), name, out)?;
            }
        }
        Ty::Bytes => {
            if let Some(v) = v {
                let s = v.as_str().ok_or_else(mismatch)?;
                put_bytes(out, num, &scalar::base64_decode(s).ok_or_else(mismatch)?);
            }
        }
        // ...repeated fields and maps element by element (none when empty)...
        Ty::Slice(inner) => {
            for item in v.and_then(Value::as_array).into_iter().flatten() {
                encode_field(num, *inner, Some(item).filter(|v| !v.is_null()), name, out)?;
            }
        }
        Ty::Map(inner) => {
            let Some(entries) = v.and_then(Value::as_object) else { return Ok(()) };
            let mut keys: Vec<&String> = entries.keys().collect();
            keys.sort();
            for key in keys {
                let value = entries.get(key.as_str()).filter(|v| !v.is_null());
                let mut entry = Vec::new();
                put_bytes(&mut entry, 1, key.as_bytes());
                encode_field(2, *inner, value, name, &mut entry)?;
                put_bytes(out, num, &entry);
            }
        }
        // ...and every other field always, even when it is "", 0 or an empty message.
        Ty::Str => put_bytes(out, num, v.and_then(Value::as_str).unwrap_or("").as_bytes()),
        Ty::Bool => {
            put_tag(out, num, WIRE_VARINT);
            put_varint(out, u64::from(v.and_then(Value::as_bool).unwrap_or(false)));
        }
        Ty::I32 | Ty::I64 => {
            put_tag(out, num, WIRE_VARINT);
            // A negative int32 is sign-extended to ten bytes, as `uint64(int32)` does in Go.
            put_varint(out, v.and_then(Value::as_i64).unwrap_or(0) as u64);
        }
        Ty::F64 => {
            put_tag(out, num, WIRE_FIXED64);
            out.extend_from_slice(
                &v.and_then(Value::as_f64).unwrap_or(0.0).to_bits().to_le_bytes(),
            );
        }
        Ty::Time | Ty::MicroTime => {
            let mut msg = Vec::new();
            if let Some(v) = v {
                let t = v.as_str().and_then(scalar::parse_rfc3339).ok_or_else(mismatch)?;
                // A zero time is an empty message; metav1.Time keeps only whole seconds.
                if !t.is_zero() {
                    let nanos = match ty {
                        Ty::MicroTime => t.nanos - t.nanos % 1000,
                        _ => 0,
                    };
                    put_tag(&mut msg, 1, WIRE_VARINT);
                    put_varint(&mut msg, t.secs as u64);
                    put_tag(&mut msg, 2, WIRE_VARINT);
                    put_varint(&mut msg, u64::from(nanos));
                }
            }
            put_bytes(out, num, &msg);
        }
        Ty::Duration => {
            let d = match v {
                Some(v) => v.as_str().and_then(scalar::parse_duration).ok_or_else(mismatch)?,
                None => 0,
            };
            let mut msg = Vec::new();
            put_tag(&mut msg, 1, WIRE_VARINT);
            put_varint(&mut msg, d as u64);
            put_bytes(out, num, &msg);
        }
        Ty::Quantity => {
            let mut msg = Vec::new();
            put_bytes(&mut msg, 1, v.and_then(Value::as_str).unwrap_or("0").as_bytes());
            put_bytes(out, num, &msg);
        }
        Ty::IntOrString => {
            let (kind, int, text) = match v {
                Some(Value::String(s)) => (1, 0, s.as_str()),
                Some(Value::Number(n)) => (0, n.as_i64().ok_or_else(mismatch)?, ""),
                None => (0, 0, ""),
                Some(_) => return Err(mismatch()),
            };
            let mut msg = Vec::new();
            put_tag(&mut msg, 1, WIRE_VARINT);
            put_varint(&mut msg, kind);
            put_tag(&mut msg, 2, WIRE_VARINT);
            put_varint(&mut msg, int as u64);
            put_bytes(&mut msg, 3, text.as_bytes());
            put_bytes(out, num, &msg);
        }
        Ty::FieldsV1 | Ty::RawExtension => {
            let mut msg = Vec::new();
            if let Some(v) = v {
                let raw = serde_json::to_vec(v).map_err(|_| mismatch())?;
                put_bytes(&mut msg, 1, &raw);
            }
            put_bytes(out, num, &msg);
        }
        Ty::Struct(def) => {
            let empty = Map::new();
            let obj = match v {
                Some(v) => v.as_object().ok_or_else(mismatch)?,
                None => &empty,
            };
            let mut msg = Vec::new();
            encode_struct(def, obj, &mut msg)?;
            put_bytes(out, num, &msg);
        }
    }
    Ok(())
}
