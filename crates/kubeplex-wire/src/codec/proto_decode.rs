//! protobuf → the JSON a Go decoder would see, as gogo's generated `Unmarshal` fills the Go
//! struct: an absent field stays at its zero value (a repeated field or map stays nil), a
//! present pointer is set even to a zero value, repeated fields append, nested messages merge,
//! unknown fields are skipped. `json::canonicalize` then writes it as encoding/json would.

use serde_json::{Map, Number, Value};

use super::error::CodecError;
use super::proto::{
    WIRE_END_GROUP, WIRE_FIXED32, WIRE_FIXED64, WIRE_LEN, WIRE_START_GROUP, WIRE_VARINT,
};
use super::scalar;
use super::schema::{StructDef, Ty};

/// Decodes a message of type `def` into `obj`, merging with what is there.
pub fn decode_into(
    def: &'static StructDef,
    bytes: &[u8],
    obj: &mut Map<String, Value>,
) -> Result<(), CodecError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    while !r.done() {
        let (num, wire) = r.key()?;
        let Some(field) = def.proto_field(num) else {
            r.skip(wire)?;
            continue;
        };
        match (field.inline, field.ty) {
            // The inline struct's fields live in the same JSON object.
            (true, Ty::Struct(inner)) => {
                let payload = r.expect_len(wire, inner.name)?;
                decode_into(inner, payload, obj)?;
            }
            (_, Ty::Slice(inner)) => {
                let items = slot(obj, field.json, Value::is_array, || Value::Array(Vec::new()));
                if let Some(items) = items.as_array_mut() {
                    decode_repeated(*inner, wire, &mut r, field.json, items)?;
                }
            }
            (_, Ty::Map(inner)) => {
                let payload = r.expect_len(wire, field.json)?;
                let (key, value) = decode_entry(*inner, payload, field.json)?;
                let entries = slot(obj, field.json, Value::is_object, || Value::Object(Map::new()));
                if let Some(entries) = entries.as_object_mut() {
                    entries.insert(key, value);
                }
            }
            (_, Ty::Struct(inner) | Ty::Ptr(&Ty::Struct(inner))) => {
                let payload = r.expect_len(wire, field.json)?;
                let target = slot(obj, field.json, Value::is_object, || Value::Object(Map::new()));
                if let Some(target) = target.as_object_mut() {
                    decode_into(inner, payload, target)?;
                }
            }
            (_, Ty::Ptr(inner)) => {
                let v = decode_value(*inner, wire, &mut r, field.json)?;
                obj.insert(field.json.to_owned(), v);
            }
            (_, ty) => {
                let v = decode_value(ty, wire, &mut r, field.json)?;
                obj.insert(field.json.to_owned(), v);
            }
        }
    }
    Ok(())
}

/// `obj[key]`, (re)made with `make` unless it already is what `fits` wants: repeated fields
/// append and messages merge across occurrences of the same field.
fn slot<'m>(
    obj: &'m mut Map<String, Value>,
    key: &str,
    fits: fn(&Value) -> bool,
    make: fn() -> Value,
) -> &'m mut Value {
    let slot = obj.entry(key).or_insert_with(make);
    if !fits(slot) {
        *slot = make();
    }
    slot
}

/// One occurrence of a repeated field; scalars may also come packed.
fn decode_repeated(
    inner: Ty,
    wire: u8,
    r: &mut Reader<'_>,
    name: &str,
    items: &mut Vec<Value>,
) -> Result<(), CodecError> {
    let scalar_wire = match inner {
        Ty::Bool | Ty::I32 | Ty::I64 => Some(WIRE_VARINT),
        Ty::F64 => Some(WIRE_FIXED64),
        _ => None,
    };
    match scalar_wire {
        Some(element_wire) if wire == WIRE_LEN => {
            let mut packed = Reader { buf: r.len_delimited()?, pos: 0 };
            while !packed.done() {
                items.push(decode_value(inner, element_wire, &mut packed, name)?);
            }
        }
        _ => items.push(decode_value(inner, wire, r, name)?),
    }
    Ok(())
}

/// A map entry message {key = 1, value = 2}; an absent value is the zero value (`null`).
fn decode_entry(inner: Ty, bytes: &[u8], name: &str) -> Result<(String, Value), CodecError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let (mut key, mut value) = (String::new(), Value::Null);
    while !r.done() {
        match r.key()? {
            (1, wire) => key = lossy(r.expect_len(wire, name)?),
            (2, wire) => value = decode_value(inner, wire, &mut r, name)?,
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok((key, value))
}

/// A single value of type `ty` as the JSON the Go field would decode from.
fn decode_value(ty: Ty, wire: u8, r: &mut Reader<'_>, name: &str) -> Result<Value, CodecError> {
    let bad = |message: String| CodecError::ProtoValue { field: name.to_owned(), message };
    Ok(match ty {
        Ty::Bool | Ty::I32 | Ty::I64 => {
            if wire != WIRE_VARINT {
                return Err(CodecError::ProtoWireType { field: name.to_owned(), wire });
            }
            let v = r.varint()?;
            match ty {
                Ty::Bool => Value::Bool(v != 0),
                // gogo keeps the low 32 bits of an int32 varint.
                Ty::I32 => Value::from(v as i32),
                _ => Value::from(v as i64),
            }
        }
        Ty::F64 => {
            if wire != WIRE_FIXED64 {
                return Err(CodecError::ProtoWireType { field: name.to_owned(), wire });
            }
            let f = f64::from_bits(r.fixed64()?);
            Value::Number(Number::from_f64(f).ok_or_else(|| bad(format!("unsupported {f}")))?)
        }
        Ty::Str => Value::String(lossy(r.expect_len(wire, name)?)),
        Ty::Bytes => Value::String(scalar::base64_encode(r.expect_len(wire, name)?)),
        Ty::Time | Ty::MicroTime => {
            let t = timestamp(r.expect_len(wire, name)?, ty, name)?;
            let text = match ty {
                Ty::MicroTime => scalar::format_micro_time(t),
                _ => scalar::format_time(t),
            };
            Value::String(text.ok_or_else(|| bad(format!("time {t:?} is out of range")))?)
        }
        Ty::Duration => {
            let fields = message_fields(r.expect_len(wire, name)?, name)?;
            Value::String(scalar::format_duration(fields.varint(1) as i64))
        }
        Ty::Quantity => {
            // An empty message leaves the zero Quantity, "0".
            let fields = message_fields(r.expect_len(wire, name)?, name)?;
            Value::String(fields.bytes(1).map_or_else(|| "0".to_owned(), lossy))
        }
        Ty::IntOrString => {
            let fields = message_fields(r.expect_len(wire, name)?, name)?;
            match fields.varint(1) {
                0 => Value::from(fields.varint(2) as i32),
                1 => Value::String(lossy(fields.bytes(3).unwrap_or_default())),
                other => return Err(bad(format!("impossible IntOrString.Type {other}"))),
            }
        }
        Ty::FieldsV1 | Ty::RawExtension => {
            let fields = message_fields(r.expect_len(wire, name)?, name)?;
            match fields.bytes(1) {
                Some(raw) => serde_json::from_slice(raw)
                    .map_err(|e| bad(format!("raw content is not JSON: {e}")))?,
                None => Value::Null,
            }
        }
        Ty::Struct(def) => {
            let mut obj = Map::new();
            decode_into(def, r.expect_len(wire, name)?, &mut obj)?;
            Value::Object(obj)
        }
        Ty::Ptr(inner) => decode_value(*inner, wire, r, name)?,
        // Nested collections do not occur in these APIs (the generator refuses none, but
        // none are reachable); refuse rather than guess their wire shape.
        Ty::Slice(_) | Ty::Map(_) => return Err(bad("nested collection".to_owned())),
    })
}

/// metav1.Time drops the nanoseconds (`time.Unix(seconds, 0)`); MicroTime truncates them to
/// microseconds. An empty message is the zero time.
fn timestamp(bytes: &[u8], ty: Ty, name: &str) -> Result<scalar::Instant, CodecError> {
    if bytes.is_empty() {
        return Ok(scalar::Instant::ZERO);
    }
    let fields = message_fields(bytes, name)?;
    let secs = fields.varint(1) as i64;
    let nanos = match ty {
        Ty::MicroTime => {
            let n = i64::from(fields.varint(2) as i32);
            n - n % 1000
        }
        _ => 0,
    };
    // time.Unix normalises nanoseconds outside [0, 1e9) into the seconds.
    let secs = secs.checked_add(nanos.div_euclid(1_000_000_000)).ok_or_else(|| {
        CodecError::ProtoValue { field: name.to_owned(), message: "time overflow".to_owned() }
    })?;
    Ok(scalar::Instant { secs, nanos: nanos.rem_euclid(1_000_000_000) as u32 })
}

/// The last varint and length-delimited value of each field number of a small message.
struct Fields<'a> {
    varints: Vec<(u32, u64)>,
    bytes: Vec<(u32, &'a [u8])>,
}

impl<'a> Fields<'a> {
    fn varint(&self, num: u32) -> u64 {
        self.varints.iter().rev().find(|(n, _)| *n == num).map_or(0, |(_, v)| *v)
    }

    fn bytes(&self, num: u32) -> Option<&'a [u8]> {
        self.bytes.iter().rev().find(|(n, _)| *n == num).map(|(_, b)| *b)
    }
}

fn message_fields<'a>(bytes: &'a [u8], name: &str) -> Result<Fields<'a>, CodecError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let mut fields = Fields { varints: Vec::new(), bytes: Vec::new() };
    while !r.done() {
        match r.key()? {
            (num, WIRE_VARINT) => fields.varints.push((num, r.varint()?)),
            (num, WIRE_LEN) => fields.bytes.push((num, r.len_delimited()?)),
            (num, wire) if num <= 3 => {
                return Err(CodecError::ProtoWireType { field: name.to_owned(), wire })
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(fields)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub struct Reader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn varint(&mut self) -> Result<u64, CodecError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or(CodecError::ProtoTruncated)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(CodecError::ProtoValue { field: String::new(), message: "varint overflow".into() })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self.pos.checked_add(n).ok_or(CodecError::ProtoTruncated)?;
        let bytes = self.buf.get(self.pos..end).ok_or(CodecError::ProtoTruncated)?;
        self.pos = end;
        Ok(bytes)
    }

    fn fixed64(&mut self) -> Result<u64, CodecError> {
        let bytes: [u8; 8] = self.take(8)?.try_into().map_err(|_| CodecError::ProtoTruncated)?;
        Ok(u64::from_le_bytes(bytes))
    }

    pub fn len_delimited(&mut self) -> Result<&'a [u8], CodecError> {
        let n = usize::try_from(self.varint()?).map_err(|_| CodecError::ProtoTruncated)?;
        self.take(n)
    }

    pub fn expect_len(&mut self, wire: u8, name: &str) -> Result<&'a [u8], CodecError> {
        if wire != WIRE_LEN {
            return Err(CodecError::ProtoWireType { field: name.to_owned(), wire });
        }
        self.len_delimited()
    }

    /// A field key; field number 0 is illegal, as in gogo's Unmarshal.
    pub fn key(&mut self) -> Result<(u32, u8), CodecError> {
        let key = self.varint()?;
        let num = u32::try_from(key >> 3).map_err(|_| CodecError::ProtoTag(key))?;
        if num == 0 {
            return Err(CodecError::ProtoTag(key));
        }
        Ok((num, (key & 7) as u8))
    }

    /// Skips an unknown field, groups included (counted, not recursed, so no input nests
    /// deeply on the stack).
    pub fn skip(&mut self, wire: u8) -> Result<(), CodecError> {
        let mut depth = 0usize;
        let mut wire = wire;
        loop {
            match wire {
                WIRE_VARINT => {
                    self.varint()?;
                }
                WIRE_FIXED64 => {
                    self.take(8)?;
                }
                WIRE_LEN => {
                    self.len_delimited()?;
                }
                WIRE_FIXED32 => {
                    self.take(4)?;
                }
                WIRE_START_GROUP => depth += 1,
                WIRE_END_GROUP if depth > 0 => depth -= 1,
                _ => return Err(CodecError::ProtoWireType { field: "unknown".to_owned(), wire }),
            }
            if depth == 0 {
                return Ok(());
            }
            wire = self.key()?.1;
        }
    }
}
