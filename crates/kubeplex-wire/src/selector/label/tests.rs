//! Expected strings were produced by apimachinery's own `labels.Parse` and `Selector.String()`.

use super::*;
use proptest::prelude::*;

/// The parsed selector as Go prints it, or the error message.
fn parse(s: &str) -> String {
    LabelSelector::parse(s).map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())
}

const NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

#[test]
fn fixture_bad_label_selector() {
    // Fixture err-bad-labelselector: labelSelector=a%20in%20(
    assert_eq!(
        parse("a in ("),
        "unable to parse requirement: found '', expected: ',', ')' or identifier"
    );
}

#[test]
fn fixture_selectors_parse_and_match() {
    // Fixtures cm-list-labelsel and cm-list-labelsel-set.
    let sel = LabelSelector::parse("app=web,tier!=back").unwrap();
    assert_eq!(sel.to_string(), "app=web,tier!=back");
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    };
    assert!(sel.matches(&labels(&[("app", "web"), ("tier", "front")])));
    assert!(sel.matches(&labels(&[("app", "web")])));
    assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "back")])));
    assert!(!sel.matches(&labels(&[("app", "db")])));

    let set = LabelSelector::parse("app in (web,db),!tier").unwrap();
    assert_eq!(set.to_string(), "app in (db,web),!tier");
    assert!(set.matches(&labels(&[("app", "db")])));
    assert!(!set.matches(&labels(&[("app", "db"), ("tier", "x")])));
    assert!(!set.matches(&labels(&[("app", "api")])));
    assert!(!set.matches(&labels(&[])));
}

#[test]
fn syntax_errors_name_the_token_like_apimachinery() {
    assert_eq!(parse("x=a b"), "found 'b', expected: ',' or 'end of string'");
    assert_eq!(parse(","), "found ',', expected: !, identifier, or 'end of string'");
    assert_eq!(parse("x,"), "found '', expected: identifier after ','");
    assert_eq!(parse("!"), "unable to parse requirement: found '', expected: identifier");
    assert_eq!(parse("!x=a"), "found '=', expected: ',' or 'end of string'");
    assert_eq!(parse("x in a"), "unable to parse requirement: found 'a' expected: '('");
    assert_eq!(parse("x in (a b)"), "unable to parse requirement: found 'b', expected: ',' or ')'");
    assert_eq!(
        parse("x (a)"),
        "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(parse("x==y==z"), "found '==', expected: ',' or 'end of string'");
    assert_eq!(parse("x=>5"), "unable to parse requirement: found '>', expected: identifier");
    assert_eq!(parse("!!x"), "unable to parse requirement: found '!', expected: identifier");
    assert_eq!(parse("x,!"), "unable to parse requirement: found '', expected: identifier");
    assert_eq!(parse("x in (a)(b)"), "found '(', expected: ',' or 'end of string'");
}

#[test]
fn keys_and_values_are_validated_with_the_apiservers_messages() {
    assert_eq!(
        parse("-x"),
        format!("unable to parse requirement: <nil>: Invalid value: \"-x\": name part {NAME_RULE}")
    );
    assert_eq!(
        parse("x/"),
        format!("unable to parse requirement: <nil>: Invalid value: \"x/\": name part must be non-empty; name part {NAME_RULE}")
    );
    assert_eq!(
        parse("/x"),
        "unable to parse requirement: <nil>: Invalid value: \"/x\": prefix part must be non-empty"
    );
    assert_eq!(
        parse("a/b/c"),
        format!("unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key {NAME_RULE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
    );
    assert_eq!(
        parse("Ex.com/x"),
        "unable to parse requirement: <nil>: Invalid value: \"Ex.com/x\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
    assert_eq!(
        parse("é=1"),
        format!("unable to parse requirement: <nil>: Invalid value: \"é\": name part {NAME_RULE}")
    );
    let long = "a".repeat(64);
    assert_eq!(
        parse(&format!("x={long}")),
        format!("unable to parse requirement: values[0][x]: Invalid value: \"{long}\": must be no more than 63 bytes")
    );
    assert_eq!(
        parse("x>abc"),
        "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    assert_eq!(
        parse("x >"),
        "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    // Several errors come back as Go's aggregate: "[a, b]".
    assert_eq!(
        parse("x>a-"),
        format!("unable to parse requirement: [values[0]: Invalid value: \"a-\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][x]: Invalid value: \"a-\": {VALUE_RULE}]")
    );
}

#[test]
fn values_whitespace_and_nul_follow_the_lexer() {
    assert_eq!(parse(""), "");
    assert_eq!(parse("x in ()"), "x in ()");
    assert_eq!(parse("x in (,)"), "x in ()");
    assert_eq!(parse("x in (a,,b)"), "x in (,a,b)");
    assert_eq!(parse("in in (in)"), "in in (in)");
    assert_eq!(parse("x=="), "x==");
    assert_eq!(parse("x=,y"), "x=,y");
    assert_eq!(parse("x\t=\ty\n"), "x=y");
    assert_eq!(parse("b>1,a<2,c notin (z,y)"), "a<2,b>1,c notin (y,z)");
    // A NUL byte ends the token it is in (or, between tokens, the whole selector).
    assert_eq!(parse("a=b\0,c"), "a=b,c");
    assert_eq!(
        parse("x\0y"),
        "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(parse("a=b \0junk"), "a=b");
}

#[test]
fn matching_follows_requirement_matches() {
    let m = |sel: &str, pairs: &[(&str, &str)]| {
        let labels: serde_json::Map<String, serde_json::Value> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v))).collect();
        LabelSelector::parse(sel).unwrap().matches(&labels)
    };
    assert!(m("", &[]));
    assert!(m("x", &[("x", "")]));
    assert!(!m("x", &[]));
    assert!(m("!x", &[("y", "1")]));
    assert!(m("x notin (a)", &[]));
    assert!(!m("x in (a)", &[]));
    assert!(m("x!=a", &[]));
    assert!(m("x=", &[("x", "")]));
    assert!(m("x in (,a)", &[("x", "")]));
    assert!(m("n>5", &[("n", "6")]));
    assert!(!m("n>5", &[("n", "5")]));
    assert!(m("n<5", &[("n", "-7")]));
    assert!(!m("n<5", &[("n", "x")]));
    assert!(!m("n<5", &[]));
    // A non-string label value counts as absent.
    let labels: serde_json::Map<String, serde_json::Value> =
        [("x".to_owned(), serde_json::json!(1))].into_iter().collect();
    assert!(LabelSelector::parse("!x").unwrap().matches(&labels));
}

#[test]
fn exact_value_is_requires_exact_match() {
    let sel = LabelSelector::parse("app=web,tier in (front),env in (a,b),x!=y,z==1").unwrap();
    assert_eq!(sel.exact_value("app"), Some("web"));
    assert_eq!(sel.exact_value("tier"), Some("front"));
    assert_eq!(sel.exact_value("env"), None);
    assert_eq!(sel.exact_value("x"), None);
    assert_eq!(sel.exact_value("z"), Some("1"));
    assert_eq!(sel.exact_value("missing"), None);
    // Only the first requirement on the key counts.
    let sel = LabelSelector::parse("a!=1,a=2").unwrap();
    assert_eq!(sel.exact_value("a"), None);
    assert!(!sel.is_empty());
    assert!(LabelSelector::parse(" ").unwrap().is_empty());
    let r = &sel.requirements()[1];
    assert_eq!(
        (r.key(), r.operator(), r.values()),
        ("a", Operator::Equals, ["2".to_owned()].as_slice())
    );
}

proptest! {
    #[test]
    fn parse_never_panics(s in "\\PC*") {
        let _ = LabelSelector::parse(&s);
    }

    #[test]
    fn printed_selectors_parse_back(s in "[a-z!=(),<> 0-9/.\\-\\t\\x00]{0,24}|(in|notin|[a-c]|[=!(),<>]| )*") {
        if let Ok(sel) = LabelSelector::parse(&s) {
            prop_assert_eq!(LabelSelector::parse(&sel.to_string()), Ok(sel));
        }
    }
}
