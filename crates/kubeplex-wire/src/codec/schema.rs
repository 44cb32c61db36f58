//! The shape of the Go API types, as far as encoding/json and gogo-protobuf care.
//!
//! The tables themselves are generated into `schema_gen.rs` by `tools/gen-schema.py`.

/// A Go struct: its fields in declaration order, which is the order encoding/json writes them.
#[derive(Debug)]
pub struct StructDef {
    /// The Go type name, used in error messages as Go's decoder does.
    pub name: &'static str,
    pub fields: &'static [Field],
    /// Indexes into `fields` of the fields in the protobuf message, by ascending field number:
    /// the order gogo's generated Marshal writes them in.
    pub proto_order: &'static [usize],
}

/// One field of a Go struct.
#[derive(Debug)]
pub struct Field {
    /// The `json:` tag name; empty for an inline embedded struct.
    pub json: &'static str,
    /// The protobuf field number; 0 when the field is not part of the protobuf message
    /// (TypeMeta, which the `Unknown` envelope carries instead).
    pub proto: u32,
    pub ty: Ty,
    pub omit: Omit,
    /// An embedded struct whose fields encoding/json promotes into the parent object, while
    /// protobuf keeps it as a nested message under `proto`.
    pub inline: bool,
}

/// When encoding/json leaves a field out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Omit {
    /// Always written (nil slice, map or pointer as `null`).
    Never,
    /// `omitempty`: left out when false, 0, "", nil, or an empty slice or map; never for a
    /// struct.
    Empty,
    /// `omitzero`: left out when the value is its type's zero (for metav1.Time: `IsZero()`).
    Zero,
}

/// A Go field type.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// string and every named string type (enums, types.UID).
    Str,
    Bool,
    I32,
    I64,
    // float64 and metav1.Duration fields are not reachable from the served kinds today; they
    // stay so that a regenerated table with such a field needs no codec change.
    #[allow(dead_code)]
    F64,
    /// `[]byte`: base64 in JSON.
    Bytes,
    /// metav1.Time: RFC 3339 seconds in JSON, {seconds, nanos} in protobuf.
    Time,
    /// metav1.MicroTime: RFC 3339 with 6 fractional digits.
    MicroTime,
    /// metav1.Duration: Go duration string in JSON, {duration int64 ns} in protobuf.
    #[allow(dead_code)]
    Duration,
    /// resource.Quantity: canonical string in JSON, {string} in protobuf.
    Quantity,
    /// intstr.IntOrString: a JSON number or string, {type, intVal, strVal} in protobuf.
    IntOrString,
    /// metav1.FieldsV1: raw JSON in JSON, {raw bytes} in protobuf.
    FieldsV1,
    /// runtime.RawExtension: raw JSON in JSON, {raw bytes} in protobuf.
    RawExtension,
    Struct(&'static StructDef),
    Ptr(&'static Ty),
    Slice(&'static Ty),
    /// A map with string keys (every map in these APIs).
    Map(&'static Ty),
}

/// A registered (apiVersion, kind) and its Go type.
#[derive(Debug)]
pub struct KindDef {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub def: &'static StructDef,
}

impl StructDef {
    /// Finds the field a JSON key names, looking through inline embedded structs as
    /// encoding/json's field promotion does.
    pub fn json_field(&'static self, key: &str) -> Option<&'static Field> {
        self.fields.iter().find_map(|f| match (f.inline, f.ty) {
            (true, Ty::Struct(inner)) => inner.json_field(key),
            _ if f.json == key => Some(f),
            _ => None,
        })
    }

    /// The field with protobuf number `num`, as gogo's generated Unmarshal matches it.
    pub fn proto_field(&'static self, num: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.proto == num && num != 0)
    }
}
