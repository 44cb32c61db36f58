use super::*;
use proptest::prelude::*;

#[test]
fn frame_layout() {
    let frame = encode_watch_frame("ADDED", b"k8s\0");
    assert_eq!(frame, b"\x00\x00\x00\x0f\x0a\x05ADDED\x12\x06\x0a\x04k8s\0");
    let event = decode_watch_event(&frame[4..]).unwrap();
    assert_eq!(event, WatchEventRef { event_type: "ADDED", object: b"k8s\0" });
}

#[test]
fn oversized_frame_is_refused_before_buffering() {
    let mut decoder = WatchFrameDecoder::new(10);
    decoder.push(&[0, 0, 0, 11]);
    assert_eq!(decoder.next_frame(), Err(Error::FrameTooLarge { len: 11, max: 10 }));
}

#[test]
fn incomplete_event_is_an_error() {
    assert_eq!(decode_watch_event(b"\x0a\x05ADDED"), Err(Error::MissingField("object")));
    assert_eq!(decode_watch_event(b"\x12\x00"), Err(Error::MissingField("type")));
}

proptest! {
    #[test]
    fn decoder_reassembles_any_chunking(
        objects in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
        cuts in proptest::collection::vec(1usize..64, 1..40),
    ) {
        let stream: Vec<u8> = objects.iter().flat_map(|o| encode_watch_frame("MODIFIED", o)).collect();
        let mut decoder = WatchFrameDecoder::default();
        let mut got = Vec::new();
        let mut rest = stream.as_slice();
        let mut cut = cuts.iter().cycle();
        while !rest.is_empty() {
            let n = (*cut.next().unwrap()).min(rest.len());
            decoder.push(&rest[..n]);
            rest = &rest[n..];
            while let Some(frame) = decoder.next_frame().unwrap() {
                got.push(decode_watch_event(&frame).unwrap().object.to_vec());
            }
        }
        prop_assert_eq!(got, objects);
        prop_assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut decoder = WatchFrameDecoder::new(256);
        decoder.push(&data);
        while let Ok(Some(frame)) = decoder.next_frame() {
            let _ = decode_watch_event(&frame);
        }
    }
}
