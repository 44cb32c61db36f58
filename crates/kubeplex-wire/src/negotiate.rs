//! Content negotiation exactly as kube-apiserver does it
//! (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/negotiation`, goautoneg, and
//! `RequestScope.AllowsMediaTypeTransform`): which serializer answers a request, whether the
//! object is converted (`as=Table`, `as=PartialObjectMetadata[List]` with `g`/`v`), and the
//! 406/415 messages clients see when nothing fits.
//!
//! The apiserver's quirks are kept on purpose, since clients were written against them: clauses
//! with `q=0` still match, the clause order comes from goautoneg's (non-strict) sort, and a
//! clause whose parameters the endpoint cannot honour is skipped in favour of the next one —
//! which is how `application/vnd.kubernetes.protobuf, application/json` gets JSON from a custom
//! resource while a built-in type answers in protobuf (fixture `cm-list-protobuf-fallback`).

/// A serializer the apiserver offers, in its preference order (`SupportedMediaTypes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    Json,
    Yaml,
    Protobuf,
}

const MEDIA_TYPES: [MediaType; 3] = [MediaType::Json, MediaType::Yaml, MediaType::Protobuf];

/// `NotAcceptable` lists every serializer of the scope (custom resources list protobuf too).
const ACCEPTED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";
/// The same for watch: YAML has no stream serializer.
const ACCEPTED_STREAM: &str =
    "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch";

impl MediaType {
    /// The `Content-Type` of a non-watch response.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaType::Json => "application/json",
            MediaType::Yaml => "application/yaml",
            MediaType::Protobuf => "application/vnd.kubernetes.protobuf",
        }
    }

    fn subtype(self) -> &'static str {
        match self {
            MediaType::Json => "json",
            MediaType::Yaml => "yaml",
            MediaType::Protobuf => "vnd.kubernetes.protobuf",
        }
    }

    /// The `Content-Type` of a watch response: JSON keeps its plain type, protobuf adds
    /// `;stream=watch`; `None` for YAML, which cannot stream.
    pub fn watch_content_type(self) -> Option<&'static str> {
        match self {
            MediaType::Json => Some("application/json"),
            MediaType::Yaml => None,
            MediaType::Protobuf => Some("application/vnd.kubernetes.protobuf;stream=watch"),
        }
    }
}

/// Version of `meta.k8s.io` a conversion targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaVersion {
    V1,
    V1beta1,
}

impl MetaVersion {
    /// The `apiVersion` written in the converted object.
    pub fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// What the response body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// The resource itself (its own kind, or `<Kind>List`).
    Object,
    Table(MetaVersion),
    /// For a single object or a watch: each object as PartialObjectMetadata.
    PartialObjectMetadata(MetaVersion),
    PartialObjectMetadataList(MetaVersion),
}

/// The endpoint being negotiated for: what it can serve without conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// Built-in types: JSON, YAML and protobuf.
    BuiltIn,
    /// Custom resources have no protobuf encoding (their `StandardSerializers` are JSON and
    /// YAML); protobuf is allowed only for a conversion to PartialObjectMetadata.
    CustomResource,
}

/// The outcome of negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    pub media_type: MediaType,
    pub representation: Representation,
    /// `pretty=1` was a parameter of the chosen clause.
    pub pretty_param: bool,
}

impl Negotiated {
    /// Whether the apiserver would indent the body: only JSON has a pretty serializer; the
    /// `pretty` query parameter (first value, Go's `ParseBool`) wins over the User-Agent rule
    /// (`curl`, `Wget`, browsers). Never for watch events.
    pub fn pretty(&self, query_pretty: Option<&str>, user_agent: Option<&str>) -> bool {
        self.media_type == MediaType::Json
            && (self.pretty_param || is_pretty_print(query_pretty, user_agent))
    }
}

/// `isPrettyPrint`: `query_pretty` is the first `pretty` query value, if any.
pub fn is_pretty_print(query_pretty: Option<&str>, user_agent: Option<&str>) -> bool {
    if let Some(value) = query_pretty.filter(|v| !v.is_empty()) {
        return matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True");
    }
    let ua = user_agent.unwrap_or_default();
    ua.starts_with("curl") || ua.starts_with("Wget") || ua.starts_with("Mozilla/5.0")
}

/// Negotiation failures, with the apiserver's messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NegotiateError {
    #[error("only the following media types are accepted: {0}")]
    NotAcceptable(&'static str),
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {0}"
    )]
    UnsupportedMediaType(&'static str),
}

impl NegotiateError {
    /// HTTP code of the `Status` to answer with.
    pub fn code(&self) -> u16 {
        match self {
            NegotiateError::NotAcceptable(_) => 406,
            NegotiateError::UnsupportedMediaType(_) => 415,
        }
    }

    /// `reason` of that `Status`.
    pub fn reason(&self) -> &'static str {
        match self {
            NegotiateError::NotAcceptable(_) => "NotAcceptable",
            NegotiateError::UnsupportedMediaType(_) => "UnsupportedMediaType",
        }
    }
}

/// One clause of an `Accept` header as goautoneg parses it.
#[derive(Debug, Clone, PartialEq)]
struct Clause<'a> {
    media: &'a str,
    subtype: &'a str,
    q: f32,
    params: Vec<(&'a str, &'a str)>,
}

impl Clause<'_> {
    /// Go's map keeps the last value of a repeated parameter.
    fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

/// goautoneg's `nextSplitElement`: split at the first `sep`.
fn split_once_or_all(s: &str, sep: char) -> (&str, &str) {
    s.split_once(sep).unwrap_or((s, ""))
}

fn trim_spaces(s: &str) -> &str {
    s.trim_matches(' ')
}

/// goautoneg's `ParseAccept`: malformed clauses and parameters are dropped, `q` is parsed as a
/// 32-bit float (0 when unparsable), and only spaces are trimmed.
fn parse_accept(header: &str) -> Vec<Clause<'_>> {
    let mut clauses = Vec::new();
    let mut remaining = header;
    while !remaining.is_empty() {
        let (part, rest) = split_once_or_all(remaining, ',');
        remaining = rest;
        let part = trim_spaces(part);
        let (range, mut params_text) = split_once_or_all(part, ';');
        let (media, rest) = split_once_or_all(range, '/');
        let media = trim_spaces(media);
        let subtype = if rest.is_empty() {
            if media != "*" {
                continue;
            }
            "*"
        } else {
            let (subtype, extra) = split_once_or_all(rest, '/');
            if !extra.is_empty() {
                continue;
            }
            trim_spaces(subtype)
        };
        let mut clause = Clause { media, subtype, q: 1.0, params: Vec::new() };
        while !params_text.is_empty() {
            let (param, rest) = split_once_or_all(params_text, ';');
            params_text = rest;
            let (key, value) = split_once_or_all(param, '=');
            if value.is_empty() {
                continue;
            }
            let (value, extra) = split_once_or_all(value, '=');
            if !extra.is_empty() {
                continue;
            }
            match trim_spaces(key) {
                "q" => clause.q = value.parse().unwrap_or(0.0),
                key => clause.params.push((key, trim_spaces(value))),
            }
        }
        clauses.push(clause);
    }
    sort_clauses(&mut clauses);
    clauses
}

/// goautoneg's `Less`, which is not a strict order (a later wildcard-free clause with a lower `q`
/// still sorts before a wildcard); the apiserver's choice depends on exactly this.
fn less(a: &Clause<'_>, b: &Clause<'_>) -> bool {
    a.q > b.q || (a.media != "*" && b.media == "*") || (a.subtype != "*" && b.subtype == "*")
}

/// Go's `sort.Sort` runs insertion sort on up to 12 elements, which is what real headers have.
/// Longer headers get a stable sort by the same keys, which only differs from Go's pdqsort where
/// `less` contradicts itself, and stays O(n log n) on hostile input.
fn sort_clauses(clauses: &mut [Clause<'_>]) {
    if clauses.len() <= 12 {
        for i in 1..clauses.len() {
            let mut j = i;
            while j > 0 && less(&clauses[j], &clauses[j - 1]) {
                clauses.swap(j, j - 1);
                j -= 1;
            }
        }
    } else {
        clauses.sort_by(|a, b| {
            b.q.total_cmp(&a.q)
                .then((a.media == "*").cmp(&(b.media == "*")))
                .then((a.subtype == "*").cmp(&(b.subtype == "*")))
        });
    }
}

/// Who decides which clause parameters are acceptable.
#[derive(Debug, Clone, Copy)]
enum Restrictions {
    /// A resource endpoint (`RequestScope`).
    Scope(Endpoint),
    /// `DefaultEndpointRestrictions`, used to encode error Statuses: no conversion, no `sv`.
    Default,
}

/// `acceptMediaTypeOptions` + `AllowsMediaTypeTransform`: the clause's parameters against the
/// serializer it matched, or `None` to move on to the next candidate.
fn accept_options(
    clause: &Clause<'_>,
    media_type: MediaType,
    restrictions: Restrictions,
) -> Option<Negotiated> {
    // Go reads the parameters from a map: a repeated key counts once, with its last value.
    let param = |key| clause.param(key);
    // Only watch streams exist, and YAML has no stream serializer.
    if param("stream")
        .is_some_and(|v| !v.is_empty() && (media_type == MediaType::Yaml || v != "watch"))
    {
        return None;
    }
    // `sv` names the meta group's server version: `v1` on resource endpoints, none for errors.
    let sv_allowed = |v: &str| matches!(restrictions, Restrictions::Scope(_)) && v == "v1";
    if param("sv").is_some_and(|v| !v.is_empty() && !sv_allowed(v)) {
        return None;
    }
    let pretty_param = param("pretty") == Some("1");
    let convert = ["as", "g", "v"].into_iter().any(|key| param(key).is_some());
    let (kind, group, version) =
        (param("as").unwrap_or(""), param("g").unwrap_or(""), param("v").unwrap_or(""));
    let representation = match (restrictions, convert) {
        (Restrictions::Default, true) => return None,
        (Restrictions::Default, false) => Representation::Object,
        (Restrictions::Scope(endpoint), false) => {
            if endpoint == Endpoint::CustomResource && media_type == MediaType::Protobuf {
                return None;
            }
            Representation::Object
        }
        (Restrictions::Scope(_), true) => {
            let meta_version = match (group, version) {
                ("meta.k8s.io", "v1") => MetaVersion::V1,
                ("meta.k8s.io", "v1beta1") => MetaVersion::V1beta1,
                _ => return None,
            };
            match kind {
                // Tables are only written as JSON or YAML.
                "Table" if media_type != MediaType::Protobuf => Representation::Table(meta_version),
                "PartialObjectMetadata" => Representation::PartialObjectMetadata(meta_version),
                "PartialObjectMetadataList" => {
                    Representation::PartialObjectMetadataList(meta_version)
                }
                _ => return None,
            }
        }
    };
    Some(Negotiated { media_type, representation, pretty_param })
}

/// `NegotiateMediaTypeOptions`: the first (clause, serializer) pair that is acceptable.
fn negotiate(accept: Option<&str>, restrictions: Restrictions) -> Option<Negotiated> {
    let header = accept.unwrap_or_default();
    if header.is_empty() {
        let representation = Representation::Object;
        return Some(Negotiated {
            media_type: MediaType::Json,
            representation,
            pretty_param: false,
        });
    }
    for clause in parse_accept(header) {
        for media_type in MEDIA_TYPES {
            let matches = (clause.media == "application"
                && (clause.subtype == media_type.subtype() || clause.subtype == "*"))
                || (clause.media == "*" && clause.subtype == "*");
            if !matches {
                continue;
            }
            if let Some(negotiated) = accept_options(&clause, media_type, restrictions) {
                return Some(negotiated);
            }
        }
    }
    None
}

/// Negotiates a GET or LIST response (`NegotiateOutputMediaType`). A missing or empty `Accept`
/// means JSON.
pub fn negotiate_output(
    accept: Option<&str>,
    endpoint: Endpoint,
) -> Result<Negotiated, NegotiateError> {
    negotiate(accept, Restrictions::Scope(endpoint)).ok_or(NegotiateError::NotAcceptable(ACCEPTED))
}

/// Negotiates a watch. The apiserver negotiates twice: as for a list (406 listing all types),
/// then for the stream, where the first acceptable clause must have a stream serializer — so
/// `Accept: application/yaml, application/json` is refused rather than falling back to JSON.
pub fn negotiate_watch(
    accept: Option<&str>,
    endpoint: Endpoint,
) -> Result<Negotiated, NegotiateError> {
    let negotiated = negotiate_output(accept, endpoint)?;
    if negotiated.media_type == MediaType::Yaml {
        return Err(NegotiateError::NotAcceptable(ACCEPTED_STREAM));
    }
    Ok(negotiated)
}

/// The serializer for an error `Status` (`ErrorNegotiated`, `DefaultEndpointRestrictions`), or
/// `None` when nothing fits: the apiserver then writes the Status as indented JSON
/// (`json.MarshalIndent`, two spaces) with `Content-Type: application/json`.
pub fn negotiate_error(accept: Option<&str>) -> Option<MediaType> {
    negotiate(accept, Restrictions::Default).map(|n| n.media_type)
}

/// The serializer for a request body (`NegotiateInputSerializerForMediaType`): no
/// `Content-Type` means JSON; otherwise it must parse as a MIME type (Go's
/// `mime.ParseMediaType`) whose lowercased type is one the apiserver decodes. `streaming` picks
/// the 415 message of streaming endpoints.
pub fn negotiate_input(
    content_type: Option<&str>,
    streaming: bool,
) -> Result<MediaType, NegotiateError> {
    let value = content_type.unwrap_or_default();
    if value.is_empty() {
        return Ok(MediaType::Json);
    }
    let found = parse_mime_type(value)
        .and_then(|essence| MEDIA_TYPES.into_iter().find(|m| m.as_str() == essence));
    found.ok_or(NegotiateError::UnsupportedMediaType(if streaming {
        ACCEPTED_STREAM
    } else {
        ACCEPTED
    }))
}

/// RFC 1521 `tspecials`.
fn is_tspecial(c: char) -> bool {
    "()<>@,;:\\\"/[]?=".contains(c)
}

/// A printable ASCII character other than a tspecial.
fn is_token_char(c: char) -> bool {
    c > ' ' && c < '\u{7f}' && !is_tspecial(c)
}

/// Splits off the leading token (possibly empty).
fn take_token(s: &str) -> (&str, &str) {
    let end = s.find(|c| !is_token_char(c)).unwrap_or(s.len());
    s.split_at(end)
}

/// A parameter value: a token, or a quoted string (ending at the first unescaped quote; CR/LF
/// inside is invalid). `None` when there is no value.
fn take_value(s: &str) -> Option<(String, &str)> {
    let Some(quoted) = s.strip_prefix('"') else {
        let (token, rest) = take_token(s);
        return (!token.is_empty()).then(|| (token.to_owned(), rest));
    };
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, quoted.get(i + 1..).unwrap_or_default())),
            // Go keeps a backslash literally unless it escapes a tspecial.
            '\\' if quoted.get(i + 1..).and_then(|r| r.chars().next()).is_some_and(is_tspecial) => {
                if let Some((_, next)) = chars.next() {
                    value.push(next);
                }
            }
            '\r' | '\n' => return None,
            c => value.push(c),
        }
    }
    None
}

/// Go's `mime.ParseMediaType`, reduced to what decides validity: the lowercased `type/subtype`,
/// or `None` where Go returns an error.
fn parse_mime_type(value: &str) -> Option<String> {
    let (base, mut params) = value.find(';').map_or((value, ""), |i| value.split_at(i));
    let essence = base.to_lowercase().trim().to_owned();
    let (media, rest) = take_token(&essence);
    if media.is_empty() {
        return None;
    }
    if !rest.is_empty() {
        let (subtype, rest) = take_token(rest.strip_prefix('/')?);
        if subtype.is_empty() || !rest.is_empty() {
            return None;
        }
    }
    let mut seen: Vec<(String, String)> = Vec::new();
    loop {
        params = params.trim_start();
        if params.is_empty() {
            break;
        }
        // `; key = value`, spaces allowed around each part; a trailing `;` is ignored.
        let after_semicolon = params.strip_prefix(';')?.trim_start();
        let (key, rest) = take_token(after_semicolon);
        if key.is_empty() {
            if params.trim() == ";" {
                break;
            }
            return None;
        }
        let rest = rest.trim_start().strip_prefix('=')?.trim_start();
        let (value, rest) = take_value(rest)?;
        let key = key.to_lowercase();
        // A repeated parameter is an error unless it repeats the same value.
        if seen.iter().any(|(k, v)| *k == key && *v != value) {
            return None;
        }
        seen.push((key, value));
        params = rest;
    }
    Some(essence)
}

#[cfg(test)]
mod tests;
