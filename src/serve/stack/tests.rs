//! The stack's own layers: the panic guard.

use http_body_util::BodyExt;
use tower::ServiceExt;

use super::*;

fn request(method: Method, uri: &str) -> Request<ReqBody> {
    Request::builder().method(method).uri(uri).body(body::full(Vec::new())).unwrap()
}

async fn status_of(resp: Response<Body>) -> (u16, serde_json::Value) {
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn a_panicking_handler_answers_500_with_a_status_and_is_counted() {
    let panics = prometheus::IntCounter::new("p", "p").unwrap();
    let guard = CatchPanicLayer { panics: panics.clone() };
    // Panics while running, and while building its future.
    let while_running = guard.layer(tower::service_fn(|_req: Request<ReqBody>| async {
        if true {
            panic!("boom");
        }
        Ok::<Response<Body>, Infallible>(Response::new(body::full(Vec::new())))
    }));
    #[derive(Clone)]
    struct PanicsOnCall;
    impl Service<Request<ReqBody>> for PanicsOnCall {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = futures_util::future::Ready<Result<Response<Body>, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Request<ReqBody>) -> Self::Future {
            panic!("boom at call")
        }
    }
    let while_calling = guard.layer(PanicsOnCall);

    let first = while_running.oneshot(request(Method::GET, "/api/v1/pods")).await.unwrap();
    let second = while_calling.oneshot(request(Method::GET, "/api/v1/pods")).await.unwrap();
    for resp in [first, second] {
        assert_eq!(resp.headers()["content-type"], "application/json");
        let (code, status) = status_of(resp).await;
        assert_eq!(code, 500);
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 500);
        assert_eq!(status["reason"], "InternalError");
    }
    assert_eq!(panics.get(), 2);
}
