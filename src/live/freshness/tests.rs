use super::metadata_list::MetadataList;

/// The proofs' lists are read as the apiserver writes them: an empty collection's items are
/// `null`, a non-empty one's carry their metadata (`fixtures/cm-list-metadata.body`). A proof
/// list that could not be read makes every read waiting on it pass through.
#[test]
fn a_metadata_list_is_read_empty_or_not() {
    let empty = br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"42"},"items":null}"#;
    let list = MetadataList::parse(empty).expect("an empty list");
    assert_eq!(list.metadata.resource_version, "42");
    assert!(list.items.unwrap_or_default().is_empty());
    let fixture = include_bytes!("../../../../shared/fixtures/cm-list-metadata.body");
    let list = MetadataList::parse(fixture).expect("the fixture");
    let items = list.items.unwrap_or_default();
    assert!(!items.is_empty());
    assert!(items
        .iter()
        .all(|i| !i.metadata.name.is_empty() && !i.metadata.resource_version.is_empty()));
}
