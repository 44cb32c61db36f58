//! The request side: who a request is (authentication, impersonation), what it asks
//! (`RequestInfo` → authorizer attributes), and the apiserver's 401/403/500 answers.

use http::{HeaderMap, Method, Response};

use super::authorize::{Attributes, Objects};
use super::{quote, Auth, UserInfo, ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED};
use crate::repr::error_is_protobuf;
use crate::respond::{self, Body};
use crate::wire::request::{go_url, ListOptions, ResourcePath};
use crate::wire::selector::field::FieldSelector;
use crate::wire::status::Status;

/// What the apiserver's filters answer instead of the handler (boxed: the refusal is the rare
/// path).
pub(crate) type Refusal = Box<Response<Body>>;

/// The `Unauthorized` Status (`apierrors.NewUnauthorized("Unauthorized")`).
pub(crate) fn unauthorized_status() -> Status {
    Status::unauthorized()
}

/// The authentication filter: a bearer token must be known (else 401, fixture
/// `err-unauthorized`); without one the request is `system:anonymous` (fixture
/// `err-anonymous`), or 401 when anonymous authentication is off.
pub(crate) fn authenticate(auth: &Auth, headers: &HeaderMap) -> Result<UserInfo, Refusal> {
    let refuse =
        || Box::new(respond::unauthorized(&unauthorized_status(), error_is_protobuf(headers)));
    if let Some(value) = headers.get(http::header::AUTHORIZATION) {
        // `bearertoken.AuthenticateRequest`: "Bearer TOKEN" (scheme case-insensitive); any
        // other scheme, or an empty token, is no credential at all.
        let Ok(text) = value.to_str() else { return Err(refuse()) };
        let mut parts = text.trim().splitn(3, ' ');
        let scheme = parts.next().unwrap_or("");
        let token = parts.next().unwrap_or("");
        if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() {
            return auth.authenticate_token(token).ok_or_else(refuse);
        }
    }
    if auth.anonymous {
        Ok(UserInfo::anonymous())
    } else {
        Err(refuse())
    }
}

/// One thing a request asks to impersonate (the filter's `ObjectReference`s).
struct Impersonation {
    kind: &'static str,
    namespace: String,
    name: String,
    api_version: &'static str,
    field_path: String,
}

impl Impersonation {
    /// Go's `%v` of an `ObjectReference`, as the filter's error message prints it.
    fn go_value(&self) -> String {
        format!(
            "{{{} {} {}  {}  {}}}",
            self.kind, self.namespace, self.name, self.api_version, self.field_path
        )
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect()
}

/// `url.PathUnescape`, or the key unchanged when it is not valid escaping
/// (`unescapeExtraKey`).
fn unescape_extra_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => return key.to_string(),
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

/// `serviceaccount.SplitUsername`.
fn split_service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The `WithImpersonation` filter: every `Impersonate-*` header is authorized for the
/// requester (verb `impersonate` on `users`, `serviceaccounts`, `groups`,
/// `userextras/KEY`, `uids`); the request then runs as the user it names.
pub(crate) fn impersonate(
    auth: &Auth,
    requester: UserInfo,
    headers: &HeaderMap,
    request_uri: &str,
    objects: &dyn Objects,
) -> Result<UserInfo, Refusal> {
    let mut wanted = Vec::new();
    let user = header_values(headers, "impersonate-user").first().copied().unwrap_or("");
    if !user.is_empty() {
        wanted.push(match split_service_account(user) {
            Some((ns, name)) => Impersonation {
                kind: "ServiceAccount",
                namespace: ns.into(),
                name: name.into(),
                api_version: "",
                field_path: String::new(),
            },
            None => Impersonation {
                kind: "User",
                namespace: String::new(),
                name: user.into(),
                api_version: "",
                field_path: String::new(),
            },
        });
    }
    let groups = header_values(headers, "impersonate-group");
    for g in &groups {
        wanted.push(Impersonation {
            kind: "Group",
            namespace: String::new(),
            name: g.to_string(),
            api_version: "",
            field_path: String::new(),
        });
    }
    let mut extra_keys: Vec<&str> = headers
        .keys()
        .map(|k| k.as_str())
        .filter(|k| k.starts_with("impersonate-extra-"))
        .collect();
    extra_keys.sort_unstable();
    extra_keys.dedup();
    for header in &extra_keys {
        let key = unescape_extra_key(&header["impersonate-extra-".len()..]);
        for value in header_values(headers, header) {
            wanted.push(Impersonation {
                kind: "UserExtra",
                namespace: String::new(),
                name: value.to_string(),
                api_version: "authentication.k8s.io/v1",
                field_path: key.clone(),
            });
        }
    }
    let uid = header_values(headers, "impersonate-uid").first().copied().unwrap_or("");
    if !uid.is_empty() {
        wanted.push(Impersonation {
            kind: "UID",
            namespace: String::new(),
            name: uid.into(),
            api_version: "authentication.k8s.io/v1",
            field_path: String::new(),
        });
    }
    if wanted.is_empty() {
        return Ok(requester);
    }
    if user.is_empty() {
        // `buildImpersonationRequests` fails and the filter answers with InternalError.
        let list: Vec<String> = wanted.iter().map(Impersonation::go_value).collect();
        let message = format!(
            "Internal Server Error: {}: requested [{}] without impersonating a user",
            quote(request_uri),
            list.join(" ")
        );
        return Err(Box::new(respond::internal_text(&sanitize(&message))));
    }

    let groups_specified = !groups.is_empty();
    let mut username = String::new();
    let mut new_groups: Vec<String> = Vec::new();
    let mut new_uid = String::new();
    let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
    for w in &wanted {
        let mut attrs = Attributes {
            user: requester.clone(),
            verb: "impersonate".into(),
            resource_request: true,
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            ..Default::default()
        };
        match w.kind {
            "ServiceAccount" => {
                attrs.version = "v1".into();
                attrs.resource = "serviceaccounts".into();
                username = format!("system:serviceaccount:{}:{}", w.namespace, w.name);
                if !groups_specified {
                    new_groups = vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{}", w.namespace),
                    ];
                }
            }
            "User" => {
                attrs.version = "v1".into();
                attrs.resource = "users".into();
                username = w.name.clone();
            }
            "Group" => {
                attrs.version = "v1".into();
                attrs.resource = "groups".into();
                new_groups.push(w.name.clone());
            }
            "UserExtra" => {
                attrs.group = "authentication.k8s.io".into();
                attrs.version = "v1".into();
                attrs.resource = "userextras".into();
                attrs.subresource = w.field_path.clone();
                extra.entry(w.field_path.clone()).or_default().push(w.name.clone());
            }
            _ => {
                attrs.group = "authentication.k8s.io".into();
                attrs.version = "v1".into();
                attrs.resource = "uids".into();
                new_uid = w.name.clone();
            }
        }
        let decision = auth.authorize(&attrs, objects);
        if !decision.allowed {
            return Err(Box::new(respond::forbidden(
                &forbidden(&attrs, &decision.reason),
                error_is_protobuf(headers),
            )));
        }
    }
    // The impersonated user is in system:authenticated (or system:unauthenticated when it is
    // system:anonymous) unless the groups asked for name one of the two.
    let (add, unless) = if username == ANONYMOUS {
        (UNAUTHENTICATED, [UNAUTHENTICATED, UNAUTHENTICATED])
    } else {
        (AUTHENTICATED, [AUTHENTICATED, UNAUTHENTICATED])
    };
    if !new_groups.iter().any(|g| unless.contains(&g.as_str())) {
        new_groups.push(add.into());
    }
    Ok(UserInfo { username, uid: new_uid, groups: new_groups, extra })
}

/// Authentication and impersonation together: the user the request runs as.
pub(crate) fn identify(
    auth: &Auth,
    headers: &HeaderMap,
    request_uri: &str,
    objects: &dyn Objects,
) -> Result<UserInfo, Refusal> {
    let requester = authenticate(auth, headers)?;
    impersonate(auth, requester, headers, request_uri, objects)
}

/// `path.IsValidPathSegmentName`.
fn valid_path_segment(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// `RequestInfoFactory.NewRequestInfo` for a resource path, as authorizer attributes.
pub(crate) fn resource_attributes(
    user: UserInfo,
    method: &Method,
    rp: &ResourcePath,
    query: Option<&str>,
) -> Attributes {
    let mut a = Attributes {
        user,
        resource_request: true,
        namespace: rp.namespace.clone().unwrap_or_default(),
        group: rp.group.clone(),
        version: rp.version.clone(),
        resource: rp.resource.clone(),
        subresource: rp.subresource.clone().unwrap_or_default(),
        name: rp.name.clone().unwrap_or_default(),
        ..Default::default()
    };
    // `/api/v1/namespaces/NAME` is the namespace object: its namespace is itself.
    if rp.resource == "namespaces" && rp.namespace.is_none() {
        a.namespace = a.name.clone();
    }
    a.verb = match *method {
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
    .to_string();
    if a.verb.is_empty() {
        a.verb = method.as_str().to_ascii_lowercase();
    }
    let opts = ListOptions::parse(query);
    if a.verb == "get" && a.name.is_empty() {
        // A query that does not parse makes a list (or a watch, if `watch` says so) without
        // a name.
        let watch = match &opts {
            Ok(o) => o.watch,
            // RequestInfo's own reading: `strings.ToLower(values[0])` of Go's `URL.Query()`.
            Err(_) => go_url::first(&go_url::parse_query(query.unwrap_or("")), "watch")
                .is_some_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0")),
        };
        a.verb = if watch { "watch" } else { "list" }.into();
        if let Ok(o) = &opts {
            let exact = o
                .field_selector
                .as_deref()
                .and_then(|s| FieldSelector::parse(s).ok())
                .and_then(|f| f.exact_value("metadata.name").map(str::to_string));
            if let Some(name) = exact.filter(|n| valid_path_segment(n)) {
                a.name = name;
            }
        }
    }
    if a.verb == "delete" && a.name.is_empty() {
        a.verb = "deletecollection".into();
    }
    if matches!(a.verb.as_str(), "list" | "watch" | "deletecollection") {
        for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match k.as_ref() {
                "fieldSelector" if a.field_selector.is_empty() => a.field_selector = v.into_owned(),
                "labelSelector" if a.label_selector.is_empty() => a.label_selector = v.into_owned(),
                _ => {}
            }
        }
    }
    a
}

/// A request for a path that is not a resource (discovery, `/version`, `/metrics`, ...).
pub(crate) fn non_resource_attributes(user: UserInfo, method: &Method, path: &str) -> Attributes {
    Attributes {
        user,
        verb: method.as_str().to_ascii_lowercase(),
        resource_request: false,
        path: path.to_string(),
        ..Default::default()
    }
}

/// `responsewriters` sanitizer: the message is HTML-escaped.
fn sanitize(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// `responsewriters.Forbidden`: `apierrors.NewForbidden` with `forbiddenMessage`, the
/// authorizers' reason after a colon when there is one:
/// `configmaps is forbidden: User "U" cannot list resource "configmaps" in API group "" in the
/// namespace "NS"` (fixture `err-forbidden-list`), `... at the cluster scope`
/// (`err-forbidden-watch`), `pods "nope" is forbidden: ...` for a named object
/// (`err-forbidden-get-protobuf`), `forbidden: User "U" cannot get path "/p"` for a
/// non-resource request.
pub(crate) fn forbidden(attrs: &Attributes, reason: &str) -> Status {
    let refused = crate::wire::status::Refused {
        user: &attrs.user.username,
        verb: &attrs.verb,
        group: &attrs.group,
        resource: &attrs.resource,
        subresource: &attrs.subresource,
        namespace: &attrs.namespace,
        name: &attrs.name,
        path: (!attrs.resource_request).then_some(attrs.path.as_str()),
    };
    Status::forbidden_request(&refused, reason)
}

/// Authorizes `attrs`; a refusal is the apiserver's 403.
pub(crate) fn authorize(
    auth: &Auth,
    attrs: &Attributes,
    headers: &HeaderMap,
    objects: &dyn Objects,
) -> Result<(), Refusal> {
    let decision = auth.authorize(attrs, objects);
    if decision.allowed {
        Ok(())
    } else {
        Err(Box::new(respond::forbidden(
            &forbidden(attrs, &decision.reason),
            error_is_protobuf(headers),
        )))
    }
}
