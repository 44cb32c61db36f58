//! The review APIs the fake apiserver serves: TokenReview and SubjectAccessReview creates.

use std::sync::Arc;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::{request_log, request_verb, SimState};
use crate::auth::{self, Auth};
use crate::metrics::RequestLabels;
use crate::repr::error_is_protobuf;
use crate::respond::{self, Body, JSON};
use crate::wire::request::ResourcePath;
use crate::wire::status::Status;

#[derive(Clone, Copy)]
pub(super) enum Review {
    Token,
    SubjectAccess,
}

/// The review APIs the sim serves (cluster-scoped collections, create only).
pub(super) fn review_kind(rp: &ResourcePath) -> Option<Review> {
    if rp.version != "v1" || rp.namespace.is_some() || rp.name.is_some() {
        return None;
    }
    match (rp.group.as_str(), rp.resource.as_str()) {
        ("authentication.k8s.io", "tokenreviews") => Some(Review::Token),
        ("authorization.k8s.io", "subjectaccessreviews") => Some(Review::SubjectAccess),
        _ => None,
    }
}

/// `POST` of a TokenReview or SubjectAccessReview: 201 with the review's status (see
/// `auth::reviews`); other methods are 405, as for any create-only resource.
pub(super) async fn review_request(
    state: &Arc<SimState>,
    rp: &ResourcePath,
    review: Review,
    req: Request<Incoming>,
    policy: Option<Arc<Auth>>,
) -> Response<Body> {
    let labels = RequestLabels {
        verb: request_verb(req.method(), rp, req.uri().query()),
        group: rp.group.clone(),
        version: rp.version.clone(),
        resource: rp.resource.clone(),
        subresource: String::new(),
        scope: "cluster",
    };
    let protobuf_errors = error_is_protobuf(req.headers());
    let result = async {
        if req.method() != Method::POST {
            return Err(Status::method_not_supported(
                &rp.group,
                &rp.resource,
                &req.method().as_str().to_ascii_lowercase(),
            ));
        }
        let ct = respond::request_content_type(req.headers());
        if !matches!(ct.as_str(), "" | "application/json") {
            return Err(Status::unsupported_media_type(&ct));
        }
        let caller = request_log::caller_if_logging(req.headers());
        let manager = auth::reviews::manager_of(
            req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or(""),
        );
        let body = http_body_util::Limited::new(req.into_body(), 3 * 1024 * 1024)
            .collect()
            .await
            .map_err(|_| {
                Status::new(
                    413,
                    "RequestEntityTooLarge",
                    "Request entity too large: limit is 3145728",
                )
            })?
            .to_bytes();
        match review {
            Review::Token => {
                auth::reviews::token_review(policy.as_deref(), &body, &manager, state.as_ref())
            }
            Review::SubjectAccess => {
                request_log::review(caller.as_deref(), &body);
                auth::reviews::subject_access_review(
                    policy.as_deref(),
                    &body,
                    &manager,
                    state.as_ref(),
                )
            }
        }
    }
    .await;
    let resp = match result {
        Ok(outcome) => {
            state.metrics.review(outcome.kind, outcome.result);
            respond::body(201, JSON, outcome.body, &http::HeaderMap::new())
        }
        Err(s) => respond::error(&s, protobuf_errors),
    };
    state.metrics.observe(&labels, resp.status().as_u16());
    resp
}
