use super::*;

#[test]
fn field_not_known_message_is_the_apiservers() {
    // Fixture err-bad-fieldselector (configmaps, fieldSelector=data.key=x).
    let err = SelectorError::FieldNotKnown("data.key".into());
    assert_eq!(
        err.to_string(),
        r#""data.key" is not a known field selector: only "metadata.name", "metadata.namespace""#
    );
    assert_eq!(
        SelectorError::FieldUnescaped(',').to_string(),
        "invalid field selector: unescaped character in value: 44"
    );
}
