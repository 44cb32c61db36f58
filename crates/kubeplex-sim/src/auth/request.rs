//! The request side: who a request is (authentication, impersonation), what it asks
//! (`RequestInfo` → authorizer attributes), and the apiserver's 401/403/500 answers.

use http::{HeaderMap, Method, Response};

use super::authorize::{Attributes, Objects};
use super::{
    Auth, UserInfo, ANONYMOUS, AUTHENTICATED, MASTERS, NODES, NODE_NAME_KEY, UNAUTHENTICATED,
};
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
pub(crate) fn authenticate(
    auth: &Auth,
    headers: &HeaderMap,
    objects: &dyn Objects,
) -> Result<UserInfo, Refusal> {
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
            return auth.authenticate_token_in(token, objects).ok_or_else(refuse);
        }
    }
    if auth.anonymous {
        Ok(UserInfo::anonymous())
    } else {
        Err(refuse())
    }
}

/// `impersonate-*` header values of `name`, as Go's `Header` holds them.
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

/// `isNodeUsername`: `system:node:NAME` with NAME a DNS subdomain (`ValidateNodeName`).
fn node_username(username: &str) -> Option<&str> {
    let name = username.strip_prefix("system:node:")?;
    crate::wire::names::is_dns1123_subdomain(name).then_some(name)
}

/// The extra an associated-node check authorizes the requester with, in place of its own
/// extras (`associatedNodeImpersonationRequestorUserInfo`).
const ASSOCIATED_NODE_KEYS: &str = "authentication.kubernetes.io/associated-node-keys";

/// Go's `%#v` of a `*user.DefaultInfo`, as the filter's 400 prints the headers it read.
fn go_default_info(user: &UserInfo, groups: &[String]) -> String {
    let quoted = |v: &[String]| -> String {
        v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ")
    };
    let groups = if groups.is_empty() {
        "[]string(nil)".to_string()
    } else {
        format!("[]string{{{}}}", quoted(groups))
    };
    let extra = if user.extra.is_empty() {
        "map[string][]string(nil)".to_string()
    } else {
        let pairs: Vec<String> =
            user.extra.iter().map(|(k, v)| format!("{k:?}:[]string{{{}}}", quoted(v))).collect();
        format!("map[string][]string{{{}}}", pairs.join(", "))
    };
    format!(
        "&user.DefaultInfo{{Name:{:?}, UID:{:?}, Groups:{groups}, Extra:{extra}}}",
        user.username, user.uid
    )
}

/// What an impersonation check refused: the apiserver's 403 for those attributes, with the
/// authorizers' reason (`checkAuthorization`, `responsewriters.ForbiddenStatusError`).
struct Refused(Box<Attributes>, String);

/// The impersonation filter of kube-apiserver 1.36, with `ConstrainedImpersonation` (beta, on by
/// default: `WithConstrainedImpersonation`, `endpoints/filters/impersonation/
/// constrained_impersonation.go` and `mode.go`). The headers name the wanted user
/// (`Impersonate-User`, `-Uid`, each `-Group`, `-Extra-KEY`); each mode in turn — associated-node,
/// arbitrary-node, serviceaccount, user-info, then the legacy `impersonate` verb — that applies to
/// what is wanted checks it with the authorizer, and the first that allows it makes the request
/// that user's; otherwise the first mode's refusal is the 403.
///
/// - **associated-node**: a ServiceAccount whose token is bound to node NAME (its one
///   `authentication.kubernetes.io/node-name` extra) impersonating `system:node:NAME` by user
///   name alone: `impersonate-on:associated-node:VERB` on what the request does, and
///   `impersonate:associated-node` on `nodes` (`authentication.k8s.io`) named `*` — both asked
///   with the requester's extras replaced by the list of their keys, so one answer holds for the
///   ServiceAccount on every node. The user is `system:node:NAME` in `system:nodes`.
/// - **arbitrary-node**, **serviceaccount**: a node's or a ServiceAccount's user name alone:
///   `impersonate-on:MODE:VERB`, then `impersonate:MODE` on `nodes`/`serviceaccounts`
///   (`authentication.k8s.io`) by name.
/// - **user-info**: any other user, with any groups, uid and extras:
///   `impersonate-on:user-info:VERB`, then `impersonate:user-info` on each part; never
///   `system:masters`.
/// - **legacy**: `impersonate` on `users` (or the `serviceaccounts` object), `uids`, each of
///   `groups` and `userextras/KEY`, as since 1.3.
pub(crate) fn impersonate(
    auth: &Auth,
    request: &Attributes,
    headers: &HeaderMap,
    objects: &dyn Objects,
) -> Result<UserInfo, Refusal> {
    let requester = &request.user;
    let mut wanted = UserInfo {
        username: header_values(headers, "impersonate-user").first().copied().unwrap_or("").into(),
        uid: header_values(headers, "impersonate-uid").first().copied().unwrap_or("").into(),
        groups: header_values(headers, "impersonate-group").iter().map(|g| g.to_string()).collect(),
        extra: Default::default(),
    };
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
            wanted.extra.entry(key.clone()).or_default().push(value.to_string());
        }
    }
    let protobuf = error_is_protobuf(headers);
    if wanted.username.is_empty() {
        if wanted.uid.is_empty() && wanted.groups.is_empty() && wanted.extra.is_empty() {
            return Ok(requester.clone());
        }
        let message = format!(
            "requested {} without impersonating a user name",
            go_default_info(&wanted, &wanted.groups)
        );
        return Err(Box::new(respond::error(&Status::bad_request(message), protobuf)));
    }
    let ask = |attrs: Attributes| -> Result<(), Refused> {
        let decision = auth.authorize(&attrs, objects);
        if decision.allowed {
            Ok(())
        } else {
            Err(Refused(Box::new(attrs), decision.reason))
        }
    };
    let only_username =
        wanted.uid.is_empty() && wanted.groups.is_empty() && wanted.extra.is_empty();
    let mut first: Option<Refused> = None;
    let modes: [&dyn Fn() -> Option<Result<UserInfo, Refused>>; 5] = [
        &|| associated_node(&ask, request, &wanted, only_username),
        &|| constrained_named(&ask, request, &wanted, only_username, "arbitrary-node"),
        &|| constrained_named(&ask, request, &wanted, only_username, "serviceaccount"),
        &|| user_info(&ask, request, &wanted),
        &|| Some(legacy(&ask, request, &wanted)),
    ];
    for mode in modes {
        match mode() {
            None => {}
            Some(Ok(user)) => return Ok(user),
            Some(Err(refused)) => {
                first.get_or_insert(refused);
            }
        }
    }
    let Refused(attrs, reason) = first.unwrap_or_else(|| {
        Refused(Box::new(request.clone()), "all impersonation modes failed".into())
    });
    Err(Box::new(respond::forbidden(&forbidden(&attrs, &reason), protobuf)))
}

/// Impersonation check attributes (`impersonationAttributes`).
fn check_attrs(user: &UserInfo, group: &str, verb: &str, resource: &str, name: &str) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        resource_request: true,
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        name: name.into(),
        ..Default::default()
    }
}

/// The request's own attributes with the verb `impersonate-on:MODE:VERB`
/// (`impersonateOnAttributes`).
fn impersonate_on(request: &Attributes, user: &UserInfo, mode: &str) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: format!("impersonate-on:{mode}:{}", request.verb),
        ..request.clone()
    }
}

/// The user the checks made (`ensureGroup`): `system:authenticated` added unless it is
/// anonymous (then `system:unauthenticated`) or already unauthenticated.
fn finished(mut user: UserInfo) -> UserInfo {
    if user.username == ANONYMOUS {
        if !user.in_group(UNAUTHENTICATED) {
            user.groups.push(UNAUTHENTICATED.into());
        }
    } else if !user.in_group(UNAUTHENTICATED) && !user.in_group(AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.into());
    }
    user
}

type Ask<'a> = dyn Fn(Attributes) -> Result<(), Refused> + 'a;

fn associated_node(
    ask: &Ask<'_>,
    request: &Attributes,
    wanted: &UserInfo,
    only_username: bool,
) -> Option<Result<UserInfo, Refused>> {
    let node = node_username(&wanted.username)?;
    let requester = &request.user;
    split_service_account(&requester.username)?;
    let bound = requester.extra.get(NODE_NAME_KEY).filter(|v| v.len() == 1)?;
    if !only_username || bound[0] != node {
        return None;
    }
    // The requester as the checks see it: its extras' keys, not their values.
    let mut keyed = requester.clone();
    let keys: Vec<String> = requester.extra.keys().cloned().collect();
    keyed.extra = [(ASSOCIATED_NODE_KEYS.to_string(), keys)].into_iter().collect();
    Some((|| {
        ask(impersonate_on(request, &keyed, "associated-node"))?;
        let verb = "impersonate:associated-node";
        ask(check_attrs(&keyed, "authentication.k8s.io", verb, "nodes", "*"))?;
        Ok(finished(UserInfo {
            username: wanted.username.clone(),
            groups: vec![NODES.into()],
            ..Default::default()
        }))
    })())
}

/// arbitrary-node and serviceaccount: the user name alone, of a node or a ServiceAccount.
fn constrained_named(
    ask: &Ask<'_>,
    request: &Attributes,
    wanted: &UserInfo,
    only_username: bool,
    mode: &str,
) -> Option<Result<UserInfo, Refused>> {
    if !only_username {
        return None;
    }
    let requester = &request.user;
    let verb = format!("impersonate:{mode}");
    let (check, groups) = match mode {
        "arbitrary-node" => {
            let node = node_username(&wanted.username)?;
            (
                check_attrs(requester, "authentication.k8s.io", &verb, "nodes", node),
                vec![NODES.into()],
            )
        }
        _ => {
            let (ns, name) = split_service_account(&wanted.username)?;
            let mut check =
                check_attrs(requester, "authentication.k8s.io", &verb, "serviceaccounts", name);
            check.namespace = ns.into();
            let groups =
                vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}")];
            (check, groups)
        }
    };
    Some((|| {
        ask(impersonate_on(request, requester, mode))?;
        ask(check)?;
        Ok(finished(UserInfo { username: wanted.username.clone(), groups, ..Default::default() }))
    })())
}

fn user_info(
    ask: &Ask<'_>,
    request: &Attributes,
    wanted: &UserInfo,
) -> Option<Result<UserInfo, Refused>> {
    if node_username(&wanted.username).is_some()
        || split_service_account(&wanted.username).is_some()
    {
        return None;
    }
    let requester = &request.user;
    Some((|| {
        ask(impersonate_on(request, requester, "user-info"))?;
        parts(ask, requester, wanted, "impersonate:user-info", "authentication.k8s.io", true)
    })())
}

fn legacy(ask: &Ask<'_>, request: &Attributes, wanted: &UserInfo) -> Result<UserInfo, Refused> {
    parts(ask, &request.user, wanted, "impersonate", "", false)
}

/// `impersonationModeState.check`: the user name, the uid, each group, each extra, with `verb`;
/// users and groups in `group` (`authentication.k8s.io` for constrained modes, the core group
/// for legacy); a ServiceAccount as its `serviceaccounts` object.
fn parts(
    ask: &Ask<'_>,
    requester: &UserInfo,
    wanted: &UserInfo,
    verb: &str,
    group: &str,
    constrained: bool,
) -> Result<UserInfo, Refused> {
    let mut user = wanted.clone();
    let mut username = check_attrs(requester, group, verb, "users", &wanted.username);
    if let Some((ns, name)) = split_service_account(&wanted.username) {
        username.resource = "serviceaccounts".into();
        username.namespace = ns.into();
        username.name = name.into();
        if wanted.groups.is_empty() {
            user.groups =
                vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}")];
        }
    }
    ask(username)?;
    if !wanted.uid.is_empty() {
        ask(check_attrs(requester, "authentication.k8s.io", verb, "uids", &wanted.uid))?;
    }
    if !wanted.groups.is_empty() {
        let mut groups = check_attrs(requester, group, verb, "groups", "");
        if constrained {
            if wanted.groups.iter().any(String::is_empty) {
                return Err(Refused(
                    Box::new(groups.clone()),
                    "impersonating the empty string group is not allowed".into(),
                ));
            }
            if wanted.groups.iter().any(|g| g == MASTERS) {
                groups.name = MASTERS.into();
                return Err(Refused(
                    Box::new(groups.clone()),
                    "impersonating the system:masters group is not allowed".into(),
                ));
            }
        }
        let all_at_once = constrained && wanted.groups.len() >= 4 && {
            groups.name = "*".into();
            ask(groups.clone()).is_ok()
        };
        if !all_at_once {
            for g in &wanted.groups {
                groups.name = g.clone();
                ask(groups.clone())?;
            }
        }
    }
    let mut extras = check_attrs(requester, "authentication.k8s.io", verb, "userextras", "");
    for (key, values) in &wanted.extra {
        extras.subresource = key.clone();
        for v in values {
            extras.name = v.clone();
            ask(extras.clone())?;
        }
    }
    Ok(finished(user))
}

/// Authentication and impersonation together: the user the request runs as. `request` is
/// what the request asks (its attributes with any user): the constrained modes authorize the
/// requester for that too.
pub(crate) fn identify(
    auth: &Auth,
    headers: &HeaderMap,
    request: Attributes,
    objects: &dyn Objects,
) -> Result<UserInfo, Refusal> {
    let requester = authenticate(auth, headers, objects)?;
    let request = Attributes { user: requester, ..request };
    impersonate(auth, &request, headers, objects)
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
