use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::{receive, Fed};
use crate::wire::gzip;
use crate::wire::resource::Encoding;

const LIST: &str = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[{"metadata":{"name":"a","namespace":"n","resourceVersion":"40"}},{"metadata":{"name":"b","namespace":"n","resourceVersion":"41"}}]}"#;

fn fed(body: Vec<Bytes>, gzipped: bool) -> Fed {
    Fed { requested: Instant::now(), consistent: true, body, gzipped }
}

/// `body` split in two chunks where it came in one piece, as a streamed answer comes.
fn chunks(body: &[u8]) -> Vec<Bytes> {
    let (a, b) = body.split_at(body.len() / 2);
    vec![Bytes::copy_from_slice(a), Bytes::copy_from_slice(b)]
}

async fn received(sent: Option<Fed>) -> Option<(u64, usize, bool)> {
    let (feeder, fed_by) = oneshot::channel();
    if let Some(fed) = sent {
        feeder.send(fed).expect("sent");
    } else {
        drop(feeder);
    }
    let (page, fed) = receive(fed_by, Encoding::Json, 1 << 20).await?;
    Some((page.resource_version, page.items.len(), fed.consistent))
}

#[tokio::test]
async fn a_whole_list_in_chunks_is_the_first_load_gzipped_or_not() {
    let plain = received(Some(fed(chunks(LIST.as_bytes()), false))).await;
    assert_eq!(plain, Some((42, 2, true)));
    let gzipped = received(Some(fed(chunks(&gzip::gzip(LIST.as_bytes())), true))).await;
    assert_eq!(gzipped, Some((42, 2, true)));
}

#[tokio::test]
async fn a_page_an_unreadable_answer_or_none_is_no_first_load() {
    let page =
        LIST.replace(r#""resourceVersion":"42""#, r#""resourceVersion":"42","continue":"more""#);
    assert_eq!(received(Some(fed(vec![Bytes::from(page)], false))).await, None, "a page");
    assert_eq!(received(Some(fed(vec![Bytes::from_static(b"{\"kind\":")], false))).await, None);
    // Said to be gzip and not: unreadable.
    assert_eq!(received(Some(fed(chunks(LIST.as_bytes()), true))).await, None);
    // The reader's answer never came whole (the tee dropped its sender).
    assert_eq!(received(None).await, None);
}

#[tokio::test]
async fn an_answer_past_the_limit_is_no_first_load() {
    let (feeder, fed_by) = oneshot::channel();
    feeder.send(fed(chunks(&gzip::gzip(LIST.as_bytes())), true)).expect("sent");
    assert!(receive(fed_by, Encoding::Json, 16).await.is_none(), "over 16 bytes decompressed");
}
