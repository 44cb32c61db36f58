use super::*;
use proptest::prelude::*;

fn err(s: &str) -> String {
    FieldSelector::parse(s).map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())
}

#[test]
fn parses_the_fixture_selectors() {
    // Fixtures cm-list-fieldsel-name and pod-list-fieldsel-node.
    let sel = FieldSelector::parse("metadata.name=cm-b").unwrap();
    assert_eq!(
        sel.requirements(),
        [FieldRequirement {
            field: "metadata.name".into(),
            operator: FieldOperator::Equals,
            value: "cm-b".into()
        }]
    );
    assert_eq!(sel.exact_value("metadata.name"), Some("cm-b"));
    let sel = FieldSelector::parse("spec.nodeName=node-1").unwrap();
    assert_eq!(sel.exact_value("spec.nodeName"), Some("node-1"));
    assert_eq!(sel.exact_value("metadata.name"), None);
}

#[test]
fn operators_escapes_and_order_follow_apimachinery() {
    // Expected strings come from apimachinery's own ParseSelector + String().
    assert_eq!(err("b==2,a!=1"), "a!=1,b=2");
    assert_eq!(err(r"a=x\,y\=z\\"), r"a=x\,y\=z\\");
    assert_eq!(err("a=,,b!="), "a=,b!=");
    assert_eq!(err("=,!="), "");
    assert_eq!(err("=x"), "=x");
    assert_eq!(err("a!==b"), "invalid field selector: unescaped character in value: 61");
    assert_eq!(err("a=!=b"), "invalid field selector: unescaped character in value: 61");
    assert_eq!(err("a=b=c"), "invalid field selector: unescaped character in value: 61");
    assert_eq!(err(r"a=b\x"), r"invalid field selector: invalid escape sequence: \x");
    assert_eq!(err(r"a=b\"), r"invalid field selector: invalid escape sequence: \");
    assert_eq!(err("zz,a=1"), "invalid selector: 'zz,a=1'; can't understand 'zz'");
    assert_eq!(err("y,x"), "invalid selector: 'y,x'; can't understand 'x'");
    assert_eq!(err("spec.x!=é,ü=1"), "spec.x!=é,ü=1");
}

#[test]
fn matching_treats_missing_fields_as_empty() {
    let sel = FieldSelector::parse("a=1,b!=2,c=").unwrap();
    let get = |have: &'static [(&'static str, &'static str)]| {
        move |f: &str| have.iter().find(|(k, _)| *k == f).map(|(_, v)| (*v).to_owned())
    };
    assert!(sel.matches(get(&[("a", "1")])));
    assert!(sel.matches(get(&[("a", "1"), ("b", "3"), ("c", "")])));
    assert!(!sel.matches(get(&[("a", "1"), ("b", "2")])));
    assert!(!sel.matches(get(&[("a", "1"), ("c", "x")])));
    assert!(!sel.matches(get(&[])));
    assert!(FieldSelector::parse("").unwrap().matches(get(&[])));
    let ne = FieldSelector::parse("a!=1").unwrap();
    assert_eq!(ne.exact_value("a"), None);
}

proptest! {
    #[test]
    fn parse_never_panics(s in "\\PC*") {
        let _ = FieldSelector::parse(&s);
    }

    #[test]
    fn parse_never_panics_on_selector_alphabet(s in "[a-z.=!,\\\\ é]{0,24}") {
        if let Ok(sel) = FieldSelector::parse(&s) {
            // What String() prints parses back to the same terms (re-sorted, since `==`
            // prints as `=`).
            let terms = |sel: &FieldSelector| {
                let mut t: Vec<String> =
                    sel.requirements().iter().map(ToString::to_string).collect();
                t.sort();
                t
            };
            let again = FieldSelector::parse(&sel.to_string());
            prop_assert_eq!(again.as_ref().map(terms), Ok(terms(&sel)));
        }
    }
}
