//! The protobuf wire primitives Kubernetes messages are made of: varints, field tags and
//! length-delimited fields, read without copying and written the way gogo-protobuf writes them.

use super::error::Error;

/// Wire type of a varint field (int64, bool, enum).
pub(super) const VARINT: u8 = 0;
/// Wire type of a 64-bit fixed field.
const FIXED64: u8 = 1;
/// Wire type of a length-delimited field (string, bytes, embedded message, map entry).
pub(super) const LEN: u8 = 2;
/// Wire type of a 32-bit fixed field.
const FIXED32: u8 = 5;

/// Number of bytes `v` takes as a varint (gogo's `sovGenerated`).
pub fn varint_len(v: u64) -> usize {
    // 7 payload bits per byte; `| 1` makes zero take one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends `v` as a varint.
pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends the tag (field number and wire type) of a field.
pub fn put_tag(buf: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(buf, (u64::from(field) << 3) | u64::from(wire_type));
}

/// Appends a length-delimited field. gogo writes non-pointer strings even when empty, so this
/// always writes the field; callers skip it where the Go field is optional.
pub fn put_bytes_field(buf: &mut Vec<u8>, field: u32, value: &[u8]) {
    put_tag(buf, field, LEN);
    put_varint(buf, value.len() as u64);
    buf.extend_from_slice(value);
}

/// Appends the header (tag and length) of a length-delimited field whose body follows.
pub fn put_len_header(buf: &mut Vec<u8>, field: u32, len: usize) {
    put_tag(buf, field, LEN);
    put_varint(buf, len as u64);
}

/// Appends a varint field (Go `int64`/`bool`; negative values as 10-byte two's complement, as
/// gogo's `encodeVarintGenerated(uint64(v))` does).
pub fn put_varint_field(buf: &mut Vec<u8>, field: u32, value: u64) {
    put_tag(buf, field, VARINT);
    put_varint(buf, value);
}

/// Size of a length-delimited field with a body of `len` bytes, tag included.
pub fn len_field_size(field: u32, len: usize) -> usize {
    varint_len(u64::from(field) << 3) + varint_len(len as u64) + len
}

/// One field's value as it sits on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32(u32),
}

/// Reads one varint at `pos`, returning it and the position after it.
pub fn read_varint(data: &[u8], mut pos: usize) -> Result<(u64, usize), Error> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *data.get(pos).ok_or(Error::Truncated)?;
        pos += 1;
        // The 10th byte may only carry the top bit of a u64.
        if shift == 63 && byte > 1 {
            return Err(Error::VarintOverflow);
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok((value, pos));
        }
    }
    Err(Error::VarintOverflow)
}

/// Iterator over the fields of one message, in wire order, borrowing their bytes.
pub struct Fields<'a> {
    data: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> Fields<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Fields { data, pos: 0, failed: false }
    }

    fn read_field(&mut self) -> Result<(u32, Value<'a>), Error> {
        let (key, pos) = read_varint(self.data, self.pos)?;
        let field = u32::try_from(key >> 3).map_err(|_| Error::InvalidFieldNumber)?;
        if field == 0 {
            return Err(Error::InvalidFieldNumber);
        }
        let (value, end) = match (key & 7) as u8 {
            VARINT => {
                let (v, end) = read_varint(self.data, pos)?;
                (Value::Varint(v), end)
            }
            FIXED64 => {
                let bytes = take(self.data, pos, 8)?;
                let mut raw = [0u8; 8];
                raw.copy_from_slice(bytes);
                (Value::Fixed64(u64::from_le_bytes(raw)), pos + 8)
            }
            LEN => {
                let (len, start) = read_varint(self.data, pos)?;
                let len = usize::try_from(len).map_err(|_| Error::Truncated)?;
                (Value::Len(take(self.data, start, len)?), start + len)
            }
            FIXED32 => {
                let bytes = take(self.data, pos, 4)?;
                let mut raw = [0u8; 4];
                raw.copy_from_slice(bytes);
                (Value::Fixed32(u32::from_le_bytes(raw)), pos + 4)
            }
            // Groups (3, 4) were never used by Kubernetes; 6 and 7 do not exist.
            other => return Err(Error::UnsupportedWireType(other)),
        };
        self.pos = end;
        Ok((field, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.data.len() {
            return None;
        }
        let item = self.read_field();
        self.failed = item.is_err();
        Some(item)
    }
}

/// `len` bytes of `data` from `start`, or `Truncated`.
fn take(data: &[u8], start: usize, len: usize) -> Result<&[u8], Error> {
    let end = start.checked_add(len).ok_or(Error::Truncated)?;
    data.get(start..end).ok_or(Error::Truncated)
}

/// The bytes of a length-delimited field, or `WrongWireType` naming the field.
pub fn expect_len<'a>(value: Value<'a>, name: &'static str) -> Result<&'a [u8], Error> {
    match value {
        Value::Len(bytes) => Ok(bytes),
        _ => Err(Error::WrongWireType(name)),
    }
}

/// A string field as `&str`; protobuf strings must be UTF-8.
pub fn expect_str<'a>(value: Value<'a>, name: &'static str) -> Result<&'a str, Error> {
    std::str::from_utf8(expect_len(value, name)?).map_err(|_| Error::InvalidUtf8(name))
}

/// A varint field's value.
pub fn expect_varint(value: Value<'_>, name: &'static str) -> Result<u64, Error> {
    match value {
        Value::Varint(v) => Ok(v),
        _ => Err(Error::WrongWireType(name)),
    }
}

#[cfg(test)]
mod tests;
