use super::*;
use proptest::prelude::*;

#[test]
fn varint_known_encodings() {
    let cases: &[(u64, &[u8])] = &[
        (0, &[0x00]),
        (1, &[0x01]),
        (127, &[0x7f]),
        (128, &[0x80, 0x01]),
        (300, &[0xac, 0x02]),
        (268, &[0x8c, 0x02]),
        (u64::MAX, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
    ];
    for (v, bytes) in cases {
        let mut buf = Vec::new();
        put_varint(&mut buf, *v);
        assert_eq!(buf, *bytes, "encoding {v}");
        assert_eq!(varint_len(*v), bytes.len(), "length of {v}");
        assert_eq!(read_varint(bytes, 0).unwrap(), (*v, bytes.len()));
    }
}

#[test]
fn negative_int64_is_ten_bytes() {
    let mut buf = Vec::new();
    put_varint_field(&mut buf, 4, -1i64 as u64);
    assert_eq!(buf.len(), 11);
    assert_eq!(buf[0], 0x20);
}

#[test]
fn malformed_input_is_an_error() {
    assert_eq!(read_varint(&[0x80], 0), Err(Error::Truncated));
    assert_eq!(read_varint(&[0xff; 11], 0), Err(Error::VarintOverflow));
    assert_eq!(
        read_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02], 0),
        Err(Error::VarintOverflow)
    );
    // Length beyond the buffer.
    let mut fields = Fields::new(&[0x0a, 0x05, b'a']);
    assert_eq!(fields.next(), Some(Err(Error::Truncated)));
    assert_eq!(fields.next(), None);
    // Field number 0 and group wire types.
    assert_eq!(Fields::new(&[0x02, 0x00]).next(), Some(Err(Error::InvalidFieldNumber)));
    assert_eq!(Fields::new(&[0x0b]).next(), Some(Err(Error::UnsupportedWireType(3))));
}

#[test]
fn reads_every_wire_type() {
    let data =
        [0x08, 0x96, 0x01, 0x11, 1, 0, 0, 0, 0, 0, 0, 0, 0x1a, 0x02, b'h', b'i', 0x25, 2, 0, 0, 0];
    let got: Vec<_> = Fields::new(&data).collect::<Result<_, _>>().unwrap();
    assert_eq!(
        got,
        vec![
            (1, Value::Varint(150)),
            (2, Value::Fixed64(1)),
            (3, Value::Len(b"hi")),
            (4, Value::Fixed32(2)),
        ]
    );
}

proptest! {
    #[test]
    fn varint_round_trips(v in any::<u64>()) {
        let mut buf = Vec::new();
        put_varint(&mut buf, v);
        prop_assert_eq!(buf.len(), varint_len(v));
        prop_assert_eq!(read_varint(&buf, 0).unwrap(), (v, buf.len()));
    }

    #[test]
    fn fields_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        for field in Fields::new(&data) {
            let _ = field;
        }
    }
}
