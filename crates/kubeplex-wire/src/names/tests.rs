use super::*;

#[test]
fn names_are_held_to_apimachinerys_rules() {
    for good in ["a", "kube-system", "0abc", &"a".repeat(63)] {
        assert!(is_dns1123_label(good), "{good}");
    }
    for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64)] {
        assert!(!is_dns1123_label(bad), "{bad}");
    }
    for good in ["node-0", "node-0.example.com", &format!("{}.b", "a".repeat(64))] {
        assert!(is_dns1123_subdomain(good), "{good}");
    }
    for bad in ["", "a..b", ".a", "a.", "Node", &"a".repeat(254)] {
        assert!(!is_dns1123_subdomain(bad), "{bad}");
    }
}
