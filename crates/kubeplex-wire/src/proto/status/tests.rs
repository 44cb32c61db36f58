use super::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn not_found_matches_go() {
    // protobuf.NewSerializer(..).Encode(errors.NewNotFound({Resource: "configmaps"}, "nope")
    // .Status()) with apimachinery v0.36.4.
    let status = StatusRef {
        status: "Failure",
        message: "configmaps \"nope\" not found",
        reason: "NotFound",
        code: 404,
        details: Some(StatusDetails { name: "nope", kind: "configmaps", ..Default::default() }),
        ..Default::default()
    };
    let expected = "6b3873000a0c0a027631120653746174757312550a060a0012001a0012074661696c7572651a1b636f6e6669676d61707320226e6f706522206e6f7420666f756e6422084e6f74466f756e642a180a046e6f706512001a0a636f6e6669676d617073280032003094031a002200";
    assert_eq!(encode_status(&status), hex(expected));
}

#[test]
fn too_large_resource_version_matches_go() {
    // Fixture err-too-large-rv's Status (cause, retryAfterSeconds) re-encoded by Go in protobuf.
    let causes = [StatusCause {
        reason: "ResourceVersionTooLarge",
        message: "Too large resource version",
        field: "",
    }];
    let status = StatusRef {
        status: "Failure",
        message: "Timeout: Too large resource version: 999999999, current: 266",
        reason: "Timeout",
        code: 504,
        details: Some(StatusDetails {
            causes: &causes,
            retry_after_seconds: 1,
            ..Default::default()
        }),
        continue_token: "",
    };
    let expected = "6b3873000a0c0a027631120653746174757312a0010a060a0012001a0012074661696c7572651a3c54696d656f75743a20546f6f206c61726765207265736f757263652076657273696f6e3a203939393939393939392c2063757272656e743a20323636220754696d656f75742a430a0012001a0022370a175265736f7572636556657273696f6e546f6f4c61726765121a546f6f206c61726765207265736f757263652076657273696f6e1a002801320030f8031a002200";
    assert_eq!(encode_status(&status), hex(expected));
}

#[test]
fn expired_continue_and_negative_code() {
    let status =
        StatusRef { status: "Failure", code: -1, continue_token: "c", ..Default::default() };
    let body = encode_status(&status);
    let raw = super::super::decode_unknown(&body).unwrap().raw;
    assert_eq!(raw.get(..9), Some(b"\x0a\x07\x0a\x00\x12\x00\x1a\x01c".as_slice()));
    // code -1 as int32: a ten-byte varint.
    assert_eq!(
        raw.get(raw.len() - 11..),
        Some(b"\x30\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01".as_slice())
    );
}
