//! Whether a file changed since it was last read: the one check behind every file kubeplex
//! reads again when it changes on disk — the serving certificate, key and client CA
//! (`tls::reload`), the upstream client certificate and key, and the bearer-token file
//! (kubeplex's `upstream` module). Like kube-apiserver's `dynamiccertificates` file
//! controllers and client-go's token file source, the files are stat'ed now and then, and read
//! again only when what the stat shows has changed.

use std::path::Path;
use std::time::SystemTime;

/// A file's identity as a stat shows it: a rewrite, a rename over the file or a Secret volume's
/// `..data` symlink swap changes at least one of its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    /// Inode and change time (unix): a rename over the file or a Secret volume's `..data`
    /// symlink swap changes the inode even when size and mtime happen to match; the change
    /// time cannot be set back by a tool that preserves mtimes.
    inode: u64,
    changed: (i64, i64),
}

impl FileStamp {
    /// The stamp of the file at `path` (following symlinks, as reading it does); `None` when
    /// it cannot be stat'ed (missing, or no permission).
    pub fn of(path: &Path) -> Option<FileStamp> {
        Self::stat(path).ok()
    }

    /// [`FileStamp::of`], with the reason a stat failed.
    pub fn stat(path: &Path) -> std::io::Result<FileStamp> {
        std::fs::metadata(path).map(|m| Self::from_metadata(&m))
    }

    #[cfg(unix)]
    fn from_metadata(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            modified: m.modified().ok(),
            len: m.len(),
            inode: m.ino(),
            changed: (m.ctime(), m.ctime_nsec()),
        }
    }

    #[cfg(not(unix))]
    fn from_metadata(m: &std::fs::Metadata) -> FileStamp {
        FileStamp { modified: m.modified().ok(), len: m.len(), inode: 0, changed: (0, 0) }
    }
}

#[cfg(test)]
mod tests {
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
}
