//! apimachinery's name validation (`k8s.io/apimachinery/pkg/util/validation`), as the apiserver
//! holds namespace and node names to it.

/// `validation.IsDNS1123Label`, which `ValidateNamespaceName` applies: 1 to 63 characters of
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
pub fn is_dns1123_label(s: &str) -> bool {
    (1..=63).contains(&s.len()) && matches_dns1123_label(s)
}

/// `validation.IsDNS1123Subdomain`, which node names are held to: at most 253 characters of
/// dot-separated labels (the regular expression limits no label's length).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && matches_dns1123_subdomain(s)
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`, of any length.
pub fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, of any length.
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    matches!((b.first(), b.last()), (Some(f), Some(l)) if alnum(f) && alnum(l))
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

#[cfg(test)]
mod tests;
