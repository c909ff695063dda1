//! The error type of the cold tier.
//!
//! Every fallible call of this crate returns a [`ColdError`]: a typed
//! [`ColdErrorKind`] plus, when one is known, the file it concerns. The crate
//! depends on no other workspace crate, so the shard maps these errors onto
//! its own: `Corrupted` and `Io` are persistent failures of the engine,
//! `InvalidInput` and `NoSuchSlice` are the caller's mistakes (or, for a slice
//! the log says a pack holds, a pack that does not hold what it should).
//! Callers match on the kind, never on the message text.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ColdErrorKind {
    /// Bytes at rest are not what this crate wrote: a checksum mismatch, a
    /// bad magic or version, a field out of bounds, a truncated file. `what`
    /// says which check failed and where.
    Corrupted {
        /// Which check failed, and where.
        what: String,
    },
    /// An operating-system call failed. `op` names the operation ("open",
    /// "write", "fsync", "rename", ...), `io_kind` is the error's
    /// [`io::ErrorKind`] (so a caller can tell, say, `NotFound` apart) and
    /// `source` the error itself (also [`std::error::Error::source`] of the
    /// [`ColdError`]).
    Io {
        /// The operation that failed.
        op: &'static str,
        /// The error's kind.
        io_kind: io::ErrorKind,
        /// The error itself.
        source: IoSource,
    },
    /// The request itself is invalid (an empty slice, a name that is empty or
    /// too long, a file name with a path separator); nothing was written.
    InvalidInput {
        /// What is invalid.
        what: String,
    },
    /// A slice index at or beyond the pack's slice count.
    NoSuchSlice {
        /// The index asked for.
        index: usize,
        /// Slices the pack holds.
        slice_count: usize,
    },
}

/// The operating-system error behind an `Io` error, shared so that the
/// errors holding it stay `Clone`.
///
/// Two sources are equal when their [`io::ErrorKind`]s are: an I/O error is
/// identified by what failed (the operation, the kind, the file), not by the
/// text or the OS error object. The shard's error type uses it too.
#[derive(Clone, Debug)]
pub struct IoSource(Arc<io::Error>);

impl IoSource {
    /// Wraps `err`.
    pub fn new(err: io::Error) -> Self {
        IoSource(Arc::new(err))
    }

    /// The error itself.
    pub fn get(&self) -> &io::Error {
        &self.0
    }

    /// The error's kind.
    pub fn kind(&self) -> io::ErrorKind {
        self.0.kind()
    }
}

impl From<io::Error> for IoSource {
    fn from(err: io::Error) -> Self {
        IoSource::new(err)
    }
}

impl PartialEq for IoSource {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind()
    }
}

impl Eq for IoSource {}

impl fmt::Display for IoSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An error of the cold tier: a kind, and the file it concerns when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColdError {
    kind: ColdErrorKind,
    file: Option<PathBuf>,
}

/// Result alias of the crate.
pub type Result<T, E = ColdError> = std::result::Result<T, E>;

impl ColdError {
    /// An error of `kind`, about no file in particular.
    pub fn new(kind: ColdErrorKind) -> Self {
        ColdError { kind, file: None }
    }

    /// A `Corrupted` error saying `what`.
    pub fn corrupted(what: impl Into<String>) -> Self {
        ColdError::new(ColdErrorKind::Corrupted { what: what.into() })
    }

    /// An `InvalidInput` error saying `what`.
    pub fn invalid_input(what: impl Into<String>) -> Self {
        ColdError::new(ColdErrorKind::InvalidInput { what: what.into() })
    }

    /// An `Io` error from a failed `op` on `file`, keeping `err` as its
    /// source.
    pub fn io(op: &'static str, file: &Path, err: io::Error) -> Self {
        ColdError::new(ColdErrorKind::Io { op, io_kind: err.kind(), source: IoSource::new(err) })
            .with_file(file)
    }

    /// The same error, naming `file` (unless it already names one).
    pub fn with_file(mut self, file: &Path) -> Self {
        if self.file.is_none() {
            self.file = Some(file.to_path_buf());
        }
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &ColdErrorKind {
        &self.kind
    }

    /// The file the error concerns, when known.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Whether the error is `Corrupted`.
    pub fn is_corrupted(&self) -> bool {
        matches!(self.kind, ColdErrorKind::Corrupted { .. })
    }
}

impl fmt::Display for ColdErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColdErrorKind::Corrupted { what } => write!(f, "corrupted: {what}"),
            ColdErrorKind::Io { op, source, .. } => write!(f, "i/o error during {op}: {source}"),
            ColdErrorKind::InvalidInput { what } => write!(f, "invalid input: {what}"),
            ColdErrorKind::NoSuchSlice { index, slice_count } => {
                write!(f, "no slice {index} in a pack of {slice_count} slices")
            }
        }
    }
}

impl fmt::Display for ColdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}: {}", file.display(), self.kind),
            None => self.kind.fmt(f),
        }
    }
}

impl std::error::Error for ColdError {
    /// The operating-system error of an `Io` error.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ColdErrorKind::Io { source, .. } => Some(source.get()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An I/O error keeps the OS error as its source and compares by what
    // failed, not by the error object.
    #[test]
    fn io_errors_keep_their_source_and_compare_by_kind() {
        let file = Path::new("/cold/p.pack");
        let a = ColdError::io("open", file, io::Error::new(io::ErrorKind::NotFound, "first text"));
        let b = ColdError::io("open", file, io::Error::new(io::ErrorKind::NotFound, "other text"));
        let c = ColdError::io("open", file, io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let source = std::error::Error::source(&a).and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(source.map(|e| e.to_string()), Some("first text".to_string()));
        assert!(a.to_string().contains("/cold/p.pack") && a.to_string().contains("first text"), "{a}");
    }
}
