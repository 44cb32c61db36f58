use super::*;

#[test]
fn a_rewrite_or_a_rename_over_the_file_changes_its_stamp_and_a_look_does_not() {
    let dir = std::env::temp_dir().join(format!("kubeplex-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    assert_eq!(FileStamp::of(&path), None, "missing");
    std::fs::write(&path, "one").unwrap();
    let first = FileStamp::of(&path).expect("stat");
    let _ = std::fs::read(&path).unwrap();
    assert_eq!(FileStamp::of(&path), Some(first), "reading it is no change");
    std::fs::write(&path, "one more").unwrap();
    let rewritten = FileStamp::of(&path).expect("stat");
    assert_ne!(rewritten, first, "a rewrite");
    // The same size and contents, renamed over it (an atomic writer's swap).
    let next = dir.join("token.next");
    std::fs::write(&next, "one more").unwrap();
    std::fs::rename(&next, &path).unwrap();
    assert_ne!(FileStamp::of(&path), Some(rewritten), "a rename over it");
    std::fs::remove_dir_all(&dir).unwrap();
}
