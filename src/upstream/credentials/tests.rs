use super::*;

#[tokio::test]
async fn basic_is_base64_of_user_colon_password() {
    let auth = AuthConfig::Basic { username: "admin".into(), password: "s3cret".into() };
    let creds = Credentials::new(&auth, Duration::ZERO).unwrap();
    let current = creds.current().await.unwrap();
    assert_eq!(current.authorization.unwrap(), "Basic YWRtaW46czNjcmV0");
}

#[tokio::test]
async fn static_token_is_a_sensitive_bearer_header() {
    let creds = Credentials::new(&AuthConfig::Token("abc".into()), Duration::ZERO).unwrap();
    let value = creds.current().await.unwrap().authorization.unwrap();
    assert_eq!(value, "Bearer abc");
    assert!(value.is_sensitive());
}

#[test]
fn a_token_with_a_newline_inside_is_refused() {
    let err = Credentials::new(&AuthConfig::Token("a\nb".into()), Duration::ZERO).err().unwrap();
    assert_eq!(
        err.to_string(),
        "the bearer token contains characters not allowed in an http header"
    );
}

#[tokio::test]
async fn token_file_is_reread_when_changed_and_kept_when_broken() {
    let dir = super::super::testing::TempDir::new("auth-token");
    let path = dir.write("token", "one\n");
    let auth = AuthConfig::TokenFile { path: path.clone(), initial: "zero".into() };
    let creds = Credentials::new(&auth, Duration::ZERO).unwrap();
    let header = || async { creds.current().await.unwrap().authorization.unwrap() };
    assert_eq!(header().await, "Bearer one");
    std::fs::write(&path, "second").unwrap();
    assert_eq!(header().await, "Bearer second");
    std::fs::write(&path, "").unwrap();
    assert_eq!(header().await, "Bearer second");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(header().await, "Bearer second");
    std::fs::write(&path, "third").unwrap();
    assert_eq!(header().await, "Bearer third");
}

#[tokio::test]
async fn token_file_is_not_checked_again_within_the_interval() {
    let dir = super::super::testing::TempDir::new("auth-interval");
    let path = dir.write("token", "one");
    let auth = AuthConfig::TokenFile { path: path.clone(), initial: "zero".into() };
    let creds = Credentials::new(&auth, Duration::from_secs(3600)).unwrap();
    assert_eq!(creds.current().await.unwrap().authorization.unwrap(), "Bearer one");
    std::fs::write(&path, "rotated").unwrap();
    assert_eq!(creds.current().await.unwrap().authorization.unwrap(), "Bearer one");
}
