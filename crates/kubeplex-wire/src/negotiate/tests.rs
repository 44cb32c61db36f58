use proptest::prelude::*;

use super::*;

const BUILT_IN: Endpoint = Endpoint::BuiltIn;
const CRD: Endpoint = Endpoint::CustomResource;
const NOT_ACCEPTABLE: &str = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf";

fn output(accept: &str, endpoint: Endpoint) -> Result<(MediaType, Representation), String> {
    negotiate_output(Some(accept), endpoint)
        .map(|n| (n.media_type, n.representation))
        .map_err(|e| e.to_string())
}

fn object(media_type: MediaType) -> Result<(MediaType, Representation), String> {
    Ok((media_type, Representation::Object))
}

#[test]
fn fixture_accept_headers() {
    // cm-list-protobuf-fallback: a built-in type answers the first choice.
    let fallback = "application/vnd.kubernetes.protobuf, application/json";
    assert_eq!(output(fallback, BUILT_IN), object(MediaType::Protobuf));
    // The same header for a custom resource gets JSON.
    assert_eq!(output(fallback, CRD), object(MediaType::Json));
    // cm-list-table / watch-table: what kubectl get sends.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    assert_eq!(
        output(table, BUILT_IN),
        Ok((MediaType::Json, Representation::Table(MetaVersion::V1)))
    );
    assert_eq!(output(table, CRD), Ok((MediaType::Json, Representation::Table(MetaVersion::V1))));
    // cm-get-metadata / cm-list-metadata.
    let pom = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let poml = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let v1 = MetaVersion::V1;
    assert_eq!(
        output(pom, BUILT_IN),
        Ok((MediaType::Json, Representation::PartialObjectMetadata(v1)))
    );
    assert_eq!(
        output(poml, BUILT_IN),
        Ok((MediaType::Json, Representation::PartialObjectMetadataList(v1)))
    );
    assert_eq!(MediaType::Json.as_str(), "application/json");
    assert_eq!(v1.api_version(), "meta.k8s.io/v1");
    // watch-protobuf / watch-json content types.
    let watch = negotiate_watch(Some("application/vnd.kubernetes.protobuf"), BUILT_IN).unwrap();
    assert_eq!(
        watch.media_type.watch_content_type(),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    let watch = negotiate_watch(Some("application/json"), BUILT_IN).unwrap();
    assert_eq!(watch.media_type.watch_content_type(), Some("application/json"));
}

#[test]
fn defaults_and_wildcards() {
    assert_eq!(negotiate_output(None, BUILT_IN).map(|n| n.media_type), Ok(MediaType::Json));
    assert_eq!(output("", CRD), object(MediaType::Json));
    assert_eq!(output("*/*", BUILT_IN), object(MediaType::Json));
    assert_eq!(output("*", BUILT_IN), object(MediaType::Json));
    assert_eq!(output("application/*", BUILT_IN), object(MediaType::Json));
    assert_eq!(output("text/html, application/yaml", BUILT_IN), object(MediaType::Yaml));
    assert_eq!(output("text/html", BUILT_IN), Err(NOT_ACCEPTABLE.to_owned()));
    assert_eq!(output("*/json", BUILT_IN), Err(NOT_ACCEPTABLE.to_owned()));
    // Media types are compared case-sensitively, like goautoneg.
    assert_eq!(output("Application/JSON", BUILT_IN), Err(NOT_ACCEPTABLE.to_owned()));
}

#[test]
fn custom_resources_have_no_protobuf_except_metadata() {
    let protobuf = "application/vnd.kubernetes.protobuf";
    assert_eq!(output(protobuf, CRD), Err(NOT_ACCEPTABLE.to_owned()));
    let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    assert_eq!(
        output(metadata, CRD),
        Ok((MediaType::Protobuf, Representation::PartialObjectMetadataList(MetaVersion::V1)))
    );
}

#[test]
fn conversions_the_endpoint_cannot_do_are_skipped() {
    // Tables are never protobuf.
    let table_pb = "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1";
    assert_eq!(output(table_pb, BUILT_IN), Err(NOT_ACCEPTABLE.to_owned()));
    assert_eq!(output(&format!("{table_pb}, application/json"), BUILT_IN), object(MediaType::Json));
    // A conversion needs meta.k8s.io/v1 or v1beta1, and a known kind.
    assert_eq!(output("application/json;as=Table", BUILT_IN), Err(NOT_ACCEPTABLE.to_owned()));
    assert_eq!(
        output("application/json;as=Table;g=meta.k8s.io;v=v2", BUILT_IN),
        Err(NOT_ACCEPTABLE.to_owned())
    );
    assert_eq!(output("application/json;as=Pod;g=;v=v1", BUILT_IN), Err(NOT_ACCEPTABLE.to_owned()));
    assert_eq!(
        output("application/yaml;as=Table;g=meta.k8s.io;v=v1beta1", BUILT_IN),
        Ok((MediaType::Yaml, Representation::Table(MetaVersion::V1beta1)))
    );
    // The last value of a repeated parameter counts, as in a Go map.
    assert_eq!(
        output("application/json;as=Pod;as=Table;g=meta.k8s.io;v=v1", BUILT_IN),
        Ok((MediaType::Json, Representation::Table(MetaVersion::V1)))
    );
}

#[test]
fn goautoneg_ordering_quirks() {
    // Higher q first.
    assert_eq!(
        output("application/json;q=0.5, application/vnd.kubernetes.protobuf", BUILT_IN),
        object(MediaType::Protobuf)
    );
    // A specific clause sorts before a wildcard even with a lower q (goautoneg's Less).
    assert_eq!(output("*/*, application/yaml;q=0.5", BUILT_IN), object(MediaType::Yaml));
    assert_eq!(output("application/yaml;q=0.9, */*", BUILT_IN), object(MediaType::Json));
    // q=0 is not "not acceptable" for goautoneg; an unparsable q is 0.
    assert_eq!(output("application/yaml;q=0", BUILT_IN), object(MediaType::Yaml));
    assert_eq!(
        output("application/yaml;q=x, application/json;q=0.1", BUILT_IN),
        object(MediaType::Json)
    );
    // Malformed clauses are dropped, spaces around parts are trimmed.
    assert_eq!(
        output("application, application/json/x, ,  application/yaml ; q=1", BUILT_IN),
        object(MediaType::Yaml)
    );
}

#[test]
fn stream_sv_and_pretty_parameters() {
    assert_eq!(
        output("application/yaml;stream=watch, application/json", BUILT_IN),
        object(MediaType::Json)
    );
    assert_eq!(output("application/json;stream=foo", BUILT_IN), Err(NOT_ACCEPTABLE.to_owned()));
    assert_eq!(output("application/json;stream=watch", BUILT_IN), object(MediaType::Json));
    assert_eq!(output("application/json;sv=v1", BUILT_IN), object(MediaType::Json));
    assert_eq!(output("application/json;sv=v2", BUILT_IN), Err(NOT_ACCEPTABLE.to_owned()));
    let pretty = negotiate_output(Some("application/json;pretty=1"), BUILT_IN).unwrap();
    assert!(pretty.pretty_param && pretty.pretty(Some("false"), None));
    let yaml = negotiate_output(Some("application/yaml;pretty=1"), BUILT_IN).unwrap();
    assert!(!yaml.pretty(None, Some("curl/8.5")));
    let json = negotiate_output(None, BUILT_IN).unwrap();
    assert!(json.pretty(None, Some("curl/8.5")));
    assert!(!json.pretty(None, Some("kubectl/v1.36")));
    assert!(!json.pretty(Some("0"), Some("curl/8.5")));
    assert!(!json.pretty(Some("yes"), Some("Wget/1.2")));
    assert!(json.pretty(Some(""), Some("Mozilla/5.0 (X11)")));
    assert!(json.pretty(Some("True"), None));
}

#[test]
fn watch_needs_a_stream_serializer() {
    let stream_message = "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch";
    let err = negotiate_watch(Some("application/yaml"), BUILT_IN).unwrap_err();
    assert_eq!(
        (err.code(), err.reason(), err.to_string().as_str()),
        (406, "NotAcceptable", stream_message)
    );
    // The first acceptable clause decides; YAML does not fall back to JSON.
    assert!(negotiate_watch(Some("application/yaml, application/json"), BUILT_IN).is_err());
    let err = negotiate_watch(Some("text/plain"), BUILT_IN).unwrap_err();
    assert_eq!(err.to_string(), NOT_ACCEPTABLE);
}

#[test]
fn error_statuses_use_default_restrictions() {
    assert_eq!(negotiate_error(None), Some(MediaType::Json));
    assert_eq!(
        negotiate_error(Some("application/vnd.kubernetes.protobuf")),
        Some(MediaType::Protobuf)
    );
    assert_eq!(negotiate_error(Some("application/json;as=Table;g=meta.k8s.io;v=v1")), None);
    assert_eq!(
        negotiate_error(Some("application/json;sv=v1, application/yaml")),
        Some(MediaType::Yaml)
    );
    assert_eq!(negotiate_error(Some("text/html")), None);
}

#[test]
fn request_content_types() {
    let ok = |ct: &str| negotiate_input(Some(ct), false);
    assert_eq!(negotiate_input(None, false), Ok(MediaType::Json));
    assert_eq!(negotiate_input(Some(""), false), Ok(MediaType::Json));
    assert_eq!(ok("application/json; charset=utf-8"), Ok(MediaType::Json));
    assert_eq!(ok("Application/JSON"), Ok(MediaType::Json));
    assert_eq!(ok(" application/yaml ;"), Ok(MediaType::Yaml));
    assert_eq!(ok("application/vnd.kubernetes.protobuf"), Ok(MediaType::Protobuf));
    assert_eq!(ok("application/json; x=\"a\\\"b\"; y=1; y=1"), Ok(MediaType::Json));
    for bad in [
        "application/json;;",
        "application/json; charset",
        "application/json;a=1;a=2",
        "application/json; a=\"open",
        "application/json/x",
        "/json",
        "application/json x",
        "application/json-patch+json",
        "text/plain",
    ] {
        let err = ok(bad).unwrap_err();
        assert_eq!(err.code(), 415, "{bad}");
        assert_eq!(err.reason(), "UnsupportedMediaType");
        assert_eq!(err.to_string(), "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf", "{bad}");
    }
    assert_eq!(
        negotiate_input(Some("text/plain"), true).unwrap_err().to_string(),
        "the body of the request was in an unknown format - accepted media types include: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
    );
}

proptest! {
    #[test]
    fn never_panics(header in ".{0,80}", pretty in proptest::option::of(".{0,5}")) {
        for endpoint in [BUILT_IN, CRD] {
            if let Ok(n) = negotiate_output(Some(&header), endpoint) {
                let _ = n.pretty(pretty.as_deref(), Some(&header));
            }
            let _ = negotiate_watch(Some(&header), endpoint);
        }
        let _ = negotiate_error(Some(&header));
        let _ = negotiate_input(Some(&header), false);
    }

    #[test]
    fn long_headers_are_handled(clauses in proptest::collection::vec("(application|\\*)/(json|yaml|\\*)(;q=0\\.[0-9])?", 13..40)) {
        let header = clauses.join(",");
        prop_assert!(negotiate_output(Some(&header), BUILT_IN).is_ok());
    }
}
