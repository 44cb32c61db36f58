use super::*;

async fn bytes_of(resp: Response<Body>) -> Vec<u8> {
    resp.into_body().collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default()
}

fn in_chunks(status: u16, bytes: &[u8], chunk: usize) -> Response<Body> {
    let frames: Vec<Result<http_body::Frame<bytes::Bytes>, body::BoxError>> = bytes
        .chunks(chunk)
        .map(|c| Ok(http_body::Frame::data(bytes::Bytes::copy_from_slice(c))))
        .collect();
    let body = BodyExt::boxed(http_body_util::StreamBody::new(futures_util::stream::iter(frames)));
    let mut resp = Response::new(body);
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
    resp
}

#[tokio::test]
async fn a_refusal_is_read_to_tell_whose_it_is_and_passed_on_with_its_bytes() {
    let graph = br#"{"kind":"Status","message":"pods \"p\" is forbidden: User \"system:node:n1\" cannot get resource \"pods\" in API group \"\" in the namespace \"ns\": no relationship found between node 'n1' and this object","code":403}"#;
    let (resp, refused) = graph_refusal(in_chunks(403, graph, 7)).await;
    assert!(refused);
    assert_eq!(resp.status(), 403);
    assert_eq!(bytes_of(resp).await, graph);
    // The same reason in an answer that is no refusal is not one.
    let (resp, refused) = graph_refusal(in_chunks(200, graph, 7)).await;
    assert!(!refused);
    assert_eq!(bytes_of(resp).await, graph);
    // A 403 longer than the apiserver's Status ever is: not read to its end, passed on whole.
    let mut long = vec![b'x'; MAX_REFUSAL * 2];
    long.extend_from_slice(graph);
    let (resp, refused) = graph_refusal(in_chunks(403, &long, 4096)).await;
    assert!(!refused);
    assert_eq!(bytes_of(resp).await, long);
}
