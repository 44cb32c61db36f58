use super::*;

#[test]
fn the_authority_of_a_url() {
    assert_eq!(authority("https://127.0.0.1:6443").as_deref(), Some("127.0.0.1:6443"));
    assert_eq!(authority("https://[::1]:443/x").as_deref(), Some("[::1]:443"));
    assert_eq!(authority("https://"), None);
}
