use super::*;
use crate::upstream::testing::TempDir;

#[test]
fn changed_files_are_read_again_and_a_broken_change_keeps_the_last() {
    let dir = TempDir::new("cert-files");
    let files = CertFiles { cert: dir.write("c.pem", "cert 1"), key: dir.write("k.pem", "key 1") };
    let reloading = ReloadingCert::new(files.clone()).unwrap();
    assert_eq!(reloading.current().cert_pem, b"cert 1");
    let look_now = || reloading.state.lock().unwrap().checked -= CHECK_EVERY;
    std::fs::remove_file(&files.key).unwrap();
    look_now();
    assert_eq!(reloading.current().key_pem, b"key 1", "a missing key keeps the last pair");
    // A renewal: new contents and modification times.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&files.cert, "cert 2").unwrap();
    std::fs::write(&files.key, "key 2").unwrap();
    assert_eq!(reloading.current().cert_pem, b"cert 1", "looked at most every 10 s");
    look_now();
    let now = reloading.current();
    assert_eq!((now.cert_pem.as_slice(), now.key_pem.as_slice()), (&b"cert 2"[..], &b"key 2"[..]));
}
