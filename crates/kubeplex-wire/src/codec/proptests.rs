//! Properties of the codec on generated input: no panics on arbitrary JSON or bytes, and
//! the JSON ↔ protobuf invariants on objects shaped by the schema.

use serde_json::{json, Map, Value};

use super::*;

fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    // Real field names, so that generated objects reach deep into the schema.
    let keys = prop::sample::select(vec![
        "metadata",
        "name",
        "labels",
        "spec",
        "containers",
        "ports",
        "port",
        "targetPort",
        "resources",
        "limits",
        "cpu",
        "data",
        "binaryData",
        "status",
        "items",
        "volumes",
        "creationTimestamp",
        "managedFields",
        "fieldsV1",
        "eventTime",
        "endpoints",
        "conditions",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-zA-Z0-9.+=:-]{0,12}".prop_map(Value::String),
        Just(Value::String("2026-11-22T10:18:33Z".into())),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<_, _>>()
            )),
        ]
    })
}

proptest::proptest! {
    #[test]
    fn nothing_panics_on_arbitrary_json(v in arb_json()) {
        for kind in ["Pod", "ConfigMap", "Service", "PodList", "Event"] {
            let t = type_for("v1", kind).unwrap();
            if let Ok(canonical) = canonicalize(t, &v) {
                // Canonical output is a fixed point and encodes to protobuf that decodes back.
                let again = canonicalize(t, &canonical.value).unwrap();
                let bytes = to_protobuf(t, &canonical.value).unwrap();
                let back = from_protobuf(t, &bytes).unwrap();
                proptest::prop_assert_eq!(to_protobuf(t, &back).unwrap(), bytes);
                proptest::prop_assert!(again.unknown_fields.is_empty());
            }
        }
    }

    #[test]
    fn nothing_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
        for kind in ["Pod", "ConfigMap", "PodList", "Secret", "Node"] {
            let t = type_for("v1", kind).unwrap();
            if let Ok(v) = from_protobuf(t, &bytes) {
                // Whatever decodes re-encodes to bytes that decode to the same object.
                let again = to_protobuf(t, &v).unwrap();
                proptest::prop_assert_eq!(from_protobuf(t, &again).unwrap(), v);
            }
        }
    }
}

/// A small deterministic generator of objects shaped by the schema, so that properties reach
/// every field type (random JSON rarely gets past the first level).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn object(&mut self, def: &'static schema::StructDef, depth: u32) -> Value {
        let mut obj = Map::new();
        self.fill(def, depth, &mut obj);
        if self.chance(5) {
            obj.insert("zzUnknown".to_owned(), json!(1));
        }
        Value::Object(obj)
    }

    fn fill(&mut self, def: &'static schema::StructDef, depth: u32, obj: &mut Map<String, Value>) {
        for field in def.fields {
            match (field.inline, field.ty) {
                (true, schema::Ty::Struct(inner)) => self.fill(inner, depth, obj),
                _ if self.chance(if depth == 0 { 60 } else { 35 }) => {
                    let v = self.value(field.ty, depth + 1, false);
                    obj.insert(field.json.to_owned(), v);
                }
                _ => {}
            }
        }
    }

    fn value(&mut self, ty: schema::Ty, depth: u32, in_pointer: bool) -> Value {
        use schema::Ty;
        if self.chance(3) {
            return json!(null);
        }
        match ty {
            Ty::Str => json!(self.pick(&["", "a", "web", "<&>", "ü\u{2028}", "k8s\0"])),
            Ty::Bool => json!(self.chance(50)),
            Ty::I32 => json!(self.pick(&[0, 1, -1, i32::MAX, i32::MIN])),
            Ty::I64 => json!(self.pick(&[0, 1, -1, i64::MAX, i64::MIN])),
            Ty::F64 => json!(self.pick(&[0.0, 1.5, -2.25])),
            Ty::Bytes => json!(self.pick(&["", "aGk=", "AAEC/w=="])),
            Ty::Time | Ty::MicroTime => {
                let zero = if in_pointer { "1999-12-31T23:59:59Z" } else { "0001-01-01T00:00:00Z" };
                json!(self.pick(&[
                    "2026-11-22T10:18:33Z",
                    "2026-11-22T12:18:33.123456789+02:00",
                    zero
                ]))
            }
            Ty::Duration => json!(self.pick(&["0s", "1h2m3s", "-1.5ms"])),
            Ty::Quantity => json!(self.pick(&["0", "100m", "1Gi", "1.5", "+1k", "1e3", "1024Mi"])),
            Ty::IntOrString => match self.chance(50) {
                true => json!(self.pick(&[0, 8080, -3])),
                false => json!(self.pick(&["", "http", "50%"])),
            },
            Ty::FieldsV1 | Ty::RawExtension => json!({"f:b": {}, "f:a": {".": {}}}),
            Ty::Struct(def) if depth < 6 => self.object(def, depth),
            Ty::Struct(_) => json!({}),
            Ty::Ptr(inner) => self.value(*inner, depth, true),
            Ty::Slice(inner) => {
                let n = self.next() % 3;
                Value::Array((0..n).map(|_| self.value(*inner, depth + 1, false)).collect())
            }
            Ty::Map(inner) => {
                let n = self.next() % 3;
                let entries = (0..n).map(|_| {
                    let key = self.pick(&["b", "a", "z.io/k", ""]).to_owned();
                    (key, self.value(*inner, depth + 1, false))
                });
                Value::Object(entries.collect())
            }
        }
    }
}

proptest::proptest! {
    #[test]
    fn schema_shaped_objects_keep_their_invariants(seed in proptest::num::u64::ANY) {
        for kt in schema_gen::KINDS {
            let t = TypeRef(kt);
            let mut gen = Gen(seed | 1);
            let v = gen.object(kt.def, 0);
            let canonical = canonicalize(t, &v).unwrap();
            let unknown = canonical.unknown_fields.iter().filter(|f| f.ends_with("zzUnknown")).count();
            proptest::prop_assert_eq!(unknown, canonical.unknown_fields.len());
            // The canonical form is a fixed point...
            proptest::prop_assert_eq!(&canonicalize(t, &canonical.value).unwrap().value, &canonical.value);
            // ...and its protobuf decodes to JSON that encodes to the same bytes.
            let bytes = to_protobuf(t, &canonical.value).unwrap();
            let decoded = from_protobuf(t, &bytes).unwrap();
            proptest::prop_assert_eq!(&to_protobuf(t, &decoded).unwrap(), &bytes);
            proptest::prop_assert_eq!(&canonicalize(t, &decoded).unwrap().value, &decoded);
        }
    }
}
