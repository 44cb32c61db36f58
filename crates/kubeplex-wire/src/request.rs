//! Request classification: which API path a request addresses and which list/watch options it
//! carries, validated with the apiserver's rules and messages.

use super::status::{FieldError, Status};

pub mod go_url;

/// A path under `/api/v1` or `/apis/{group}/{version}` that names a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    /// `namespaces/{ns}/...` prefix; `None` for cluster-scoped paths and all-namespace lists.
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPath {
    /// `/api`
    LegacyVersions,
    /// `/api/v1`
    LegacyResources,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/apis/{group}/{version}`
    GroupResources(String, String),
    Resource(ResourcePath),
    /// Anything else (`/version`, `/openapi/v2`, `/healthz`, ...).
    Other,
}

/// Splits a request path into the parts the apiserver routes on.
///
/// `/api/v1/namespaces/{ns}` is the namespace object itself (cluster-scoped resource
/// `namespaces`), while `/api/v1/namespaces/{ns}/{resource}` is a namespaced collection; the
/// apiserver's router makes the same distinction.
pub fn parse_path(path: &str) -> ApiPath {
    let trimmed = path.trim_end_matches('/');
    let segs: Vec<&str> = trimmed.split('/').skip(1).collect();
    if segs.iter().any(|s| s.is_empty()) {
        return ApiPath::Other;
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api"] => return ApiPath::LegacyVersions,
        ["api", "v1"] => return ApiPath::LegacyResources,
        ["apis"] => return ApiPath::Groups,
        ["apis", g] => return ApiPath::Group(g.to_string()),
        ["apis", g, v] => return ApiPath::GroupResources(g.to_string(), v.to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return ApiPath::Other,
    };
    let (namespace, rest) = match rest {
        // `namespaces/{ns}/status` and `/finalize` are subresources of the namespace itself.
        ["namespaces", _, "status" | "finalize"] => (None, rest),
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(ns.to_string()), tail),
        _ => (None, rest),
    };
    let (resource, name, subresource) = match rest {
        [r] => (*r, None, None),
        [r, n] => (*r, Some(n.to_string()), None),
        [r, n, s] => (*r, Some(n.to_string()), Some(s.to_string())),
        _ => return ApiPath::Other,
    };
    ApiPath::Resource(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        resource: resource.to_string(),
        name,
        subresource,
    })
}

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    NotOlderThan,
    Exact,
}

/// The query parameters of a get, list or watch (`metav1.ListOptions` plus `timeoutSeconds`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    pub resource_version: Option<String>,
    pub resource_version_match: Option<RvMatch>,
    pub limit: Option<i64>,
    pub continue_token: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: Option<bool>,
    pub timeout_seconds: Option<i64>,
    /// `includeObject` for Table output (`None`, `Metadata`, `Object`).
    pub include_object: Option<String>,
}

impl ListOptions {
    /// Parses a raw query string as the apiserver's list and watch handlers do
    /// (`ParameterCodec.DecodeParameters` into `metainternalversion.ListOptions`, then
    /// `ValidateListOptions`). Unknown parameters are ignored. The query is read as Go's
    /// `URL.Query()` reads it ([`go_url::parse_query`]), and every option takes the *first*
    /// value of a repeated parameter (`Convert_Slice_string_To_*` read `(*in)[0]`). The
    /// conversion's errors are 400s, in the order of metav1.ListOptions' fields
    /// (`timeoutSeconds` before `limit`), then the selectors' syntax (400, the v1 to internal
    /// conversion), and only then the validation's 422.
    pub fn parse(query: Option<&str>) -> Result<ListOptions, Status> {
        let pairs = go_url::parse_query(query.unwrap_or(""));
        let first = |key: &str| go_url::first(&pairs, key);
        let mut o = ListOptions {
            label_selector: first("labelSelector").map(str::to_owned),
            field_selector: first("fieldSelector").map(str::to_owned),
            watch: first("watch").is_some_and(parse_bool),
            allow_watch_bookmarks: first("allowWatchBookmarks").is_some_and(parse_bool),
            resource_version: first("resourceVersion").map(str::to_owned),
            timeout_seconds: first("timeoutSeconds").map(parse_int).transpose()?,
            limit: first("limit").map(parse_int).transpose()?,
            continue_token: first("continue").map(str::to_owned),
            send_initial_events: first("sendInitialEvents").map(parse_bool),
            // A TableOptions parameter, read the same way.
            include_object: first("includeObject").map(str::to_owned),
            ..ListOptions::default()
        };
        let rv_match_raw = first("resourceVersionMatch").map(str::to_owned);
        // `Convert_v1_ListOptions_To_internalversion_ListOptions` parses the selectors (label,
        // then field) inside the decoding: their syntax errors are the decoding's 400, ahead
        // of the validation's 422. (Whether a field is supported is the storage's, later.)
        if let Some(s) = o.label_selector.as_deref() {
            crate::selector::LabelSelector::parse(s)
                .map_err(|e| Status::bad_request(e.to_string()))?;
        }
        if let Some(s) = o.field_selector.as_deref() {
            crate::selector::FieldSelector::parse(s)
                .map_err(|e| Status::bad_request(e.to_string()))?;
        }
        // Empty strings mean "unset" for these string options, as in Go's zero values.
        o.resource_version = o.resource_version.filter(|s| !s.is_empty());
        o.continue_token = o.continue_token.filter(|s| !s.is_empty());
        o.label_selector = o.label_selector.filter(|s| !s.is_empty());
        o.field_selector = o.field_selector.filter(|s| !s.is_empty());
        let rv_match_raw = rv_match_raw.filter(|s| !s.is_empty());
        o.validate(rv_match_raw.as_deref())?;
        o.resource_version_match = match rv_match_raw.as_deref() {
            Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
            Some("Exact") => Some(RvMatch::Exact),
            _ => None,
        };
        Ok(o)
    }

    /// The options of a get of one named object, as the apiserver's `GetResource` reads them:
    /// `export` set to anything but `0`/`false` is refused with its 400, then only
    /// `resourceVersion` (metav1.GetOptions) is decoded, with `includeObject` for a Table;
    /// every list and watch parameter — `watch=1` included — is ignored (a named GET is a
    /// get, whatever its query says).
    pub fn parse_get(query: Option<&str>) -> Result<ListOptions, Status> {
        let pairs = go_url::parse_query(query.unwrap_or(""));
        if go_url::first(&pairs, "export").is_some_and(parse_bool) {
            return Err(Status::bad_request(
                "the export parameter, deprecated since v1.14, is no longer supported",
            ));
        }
        Ok(ListOptions {
            resource_version: go_url::first(&pairs, "resourceVersion")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            // TableOptions are decoded for the response of a get as of a list.
            include_object: go_url::first(&pairs, "includeObject").map(str::to_owned),
            ..ListOptions::default()
        })
    }

    /// apimachinery's `ValidateListOptions` (meta/internalversion/validation), which the
    /// apiserver runs before any storage access and answers with 422 Invalid.
    fn validate(&self, rv_match: Option<&str>) -> Result<(), Status> {
        let mut errs = Vec::new();
        const PATH: &str = "resourceVersionMatch";
        if self.watch {
            if self.send_initial_events.is_some() && rv_match != Some("NotOlderThan") {
                errs.push(FieldError::forbidden(
                    PATH,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if let Some(m) = rv_match {
                if self.send_initial_events.is_none() {
                    errs.push(FieldError::forbidden(
                        PATH,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != "NotOlderThan" {
                    errs.push(FieldError::not_supported(PATH, m, &["NotOlderThan"]));
                }
                if self.continue_token.is_some() {
                    errs.push(FieldError::forbidden(
                        PATH,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            if let Some(m) = rv_match {
                if self.resource_version.is_none() {
                    errs.push(FieldError::forbidden(
                        PATH,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if self.continue_token.is_some() {
                    errs.push(FieldError::forbidden(
                        PATH,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                match m {
                    "Exact" if self.resource_version.as_deref() == Some("0") => {
                        errs.push(FieldError::forbidden(
                            PATH,
                            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                        ))
                    }
                    "Exact" | "NotOlderThan" => {}
                    other => errs.push(FieldError::not_supported(
                        PATH,
                        other,
                        &["Exact", "NotOlderThan", ""],
                    )),
                }
            }
            if self.send_initial_events.is_some() {
                errs.push(FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(Status::invalid("meta.k8s.io", "ListOptions", "", errs))
        }
    }

    /// The resourceVersion as a number, or the apiserver's 400 for a malformed one.
    /// `None` when unset.
    pub fn numeric_resource_version(&self) -> Result<Option<u64>, Status> {
        match &self.resource_version {
            None => Ok(None),
            Some(s) => parse_resource_version(s).map(Some),
        }
    }
}

/// Parses an RV the way the apiserver's storage layer does (`ParseResourceVersion`).
pub fn parse_resource_version(s: &str) -> Result<u64, Status> {
    s.parse::<u64>().map_err(|_| {
        Status::bad_request(format!(
            "resourceVersion: Invalid value: {s:?}: strconv.ParseUint: parsing {s:?}: invalid syntax"
        ))
    })
}

/// Go's query conversion for booleans (`runtime.Convert_Slice_string_To_bool`): only "0" and
/// "false" (any case) are false; everything else, including an empty value, is true.
fn parse_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

/// metav1's `Convert_Slice_string_To_int64` / `_To_Pointer_int64`: `strconv.ParseInt(s, 10,
/// 64)`, whose error the apiserver answers as a 400 with the error's text.
fn parse_int(v: &str) -> Result<i64, Status> {
    v.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        Status::bad_request(format!("strconv.ParseInt: parsing {}: {why}", crate::gojson::quote(v)))
    })
}

#[cfg(test)]
mod tests;
