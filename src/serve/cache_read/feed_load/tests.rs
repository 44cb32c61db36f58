use std::time::Instant;

use http_body_util::BodyExt;

use super::*;

fn answer(status: u16, content_type: &str, chunks: &[&'static [u8]]) -> Response<Body> {
    let frames: Vec<Result<Frame<Bytes>, BoxError>> =
        chunks.iter().map(|c| Ok(Frame::data(Bytes::from_static(c)))).collect();
    let body = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(
        futures_util::stream::iter(frames),
    ));
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(status).unwrap();
    resp.headers_mut().insert(header::CONTENT_TYPE, content_type.parse().unwrap());
    resp
}

fn feeding(media_type: &'static str) -> (Feeding, tokio::sync::oneshot::Receiver<Fed>) {
    let (feeder, fed_by) = tokio::sync::oneshot::channel();
    (Feeding { feeder, consistent: true, media_type, requested: Instant::now() }, fed_by)
}

#[tokio::test]
async fn a_whole_answer_reaches_the_reader_unchanged_and_then_feeds_the_cache() {
    let chunks: [&'static [u8]; 3] = [b"{\"kind\":\"ConfigMapList\",", b"\"items\":[]", b"}\n"];
    let (f, fed_by) = feeding("application/json");
    let resp = tee(answer(200, "application/json", &chunks), f);
    let read = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(read, chunks.concat());
    let fed = fed_by.await.expect("fed once the answer ended");
    assert_eq!(fed.body.concat(), chunks.concat());
    assert!(fed.consistent && !fed.gzipped);
}

#[tokio::test]
async fn another_answer_feeds_nothing_and_reaches_the_reader_unchanged() {
    for (status, content_type) in [(403, "application/json"), (200, "application/yaml")] {
        let (f, fed_by) = feeding("application/json");
        let resp = tee(answer(status, content_type, &[b"x"]), f);
        assert_eq!(resp.into_body().collect().await.unwrap().to_bytes(), Bytes::from_static(b"x"));
        assert!(fed_by.await.is_err(), "{status} {content_type}: the cache loads by itself");
    }
    // A reader that goes away before the end: nothing half-read is fed.
    let (f, fed_by) = feeding("application/json");
    let resp = tee(answer(200, "application/json", &[b"{", b"}"]), f);
    let mut body = resp.into_body();
    let _ = body.frame().await;
    drop(body);
    assert!(fed_by.await.is_err());
}
