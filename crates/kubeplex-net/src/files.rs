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
mod tests;
