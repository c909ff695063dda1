//! A test-only FUSE file system that forgets what was not synced: the
//! `lazyfs` of the power-loss test (`tests/tests/power_loss.rs`).
//!
//! It serves a directory tree from memory ([`model`]), mounted with
//! `fuser` ([`fuse`]) over a backing directory that holds what the
//! "disk" holds ([`mount`]). Writes and directory changes are volatile
//! until the application syncs them; a power cut throws away everything
//! volatile, and the next mount shows only what was durable.
//!
//! # What is durable
//!
//! The rules follow POSIX `fsync` and Linux's documented behaviour, taking
//! the strictest reading wherever a real file system may keep more:
//!
//! * **File data.** `write` and `truncate` (`ftruncate`, `O_TRUNC`,
//!   `set_len`) change the file at once for every reader, and become
//!   durable when `fsync` or `fdatasync` of that file succeeds. Both are
//!   treated alike: this model keeps no metadata beyond the bytes and the
//!   length, which `fdatasync` must also persist (fdatasync(2): "the file
//!   size ... is needed to allow a subsequent data retrieval"). `close`
//!   (FUSE `flush`) makes nothing durable.
//! * **Directory entries.** Creating a file or directory, `unlink`,
//!   `rmdir` and `rename` change the directory at once and become durable
//!   when `fsync` of *that directory* succeeds, which makes its whole
//!   current entry set durable. fsync of a file does **not** make its own
//!   entry durable: fsync(2) on Linux says "Calling fsync() does not
//!   necessarily ensure that the entry in the directory containing the
//!   file has also reached disk. For that an explicit fsync() on a file
//!   descriptor for the directory is also needed." ext4 in its default
//!   `data=ordered` mode often persists the entry anyway, because its
//!   fsync commits the whole journal transaction; this model does not, so
//!   a missing directory fsync is always seen. A new subdirectory is
//!   likewise durable only once its parent is synced, and a file's synced
//!   bytes are reachable after a cut only through durable entries.
//! * **Rename** is atomic: after a cut the directory holds either the old
//!   or the new name (the one its last fsync saw). Renames between two
//!   directories are refused with `EXDEV` (the engine never does them),
//!   so a rename is always made durable by one directory's fsync. Hard
//!   links, symlinks, special files and extended attributes are not
//!   supported; modes, owners and times are not kept.
//! * **Power cut.** Every directory returns to its durable entries, every
//!   file to its durable bytes, and inodes no durable entry reaches are
//!   gone. With a torn cut ([`model::Cut::Torn`]), each file instead keeps
//!   a random prefix of its unsynced changes in order, and the first write
//!   it loses may still land partly: its sectors up to a 512-byte boundary
//!   inside it (what a disk that persists in order, a sector at a time,
//!   may leave). Directory changes are never torn.
//! * **Failed fsync.** [`mount::LazyMount::fail_next_fsync`] makes the next
//!   fsync of a chosen file (or of anything below a chosen directory)
//!   return `EIO`. As on Linux after a failed writeback (see "Can
//!   Applications Recover from fsync Failures?", USENIX ATC 2020, and the
//!   kernel's `errseq_t` error reporting), the file's unsynced changes are
//!   then marked clean: reads still return them, but no later successful
//!   fsync makes them durable, and a power cut loses them. (Linux works in
//!   pages: a later write to the same page would write the whole page back
//!   and so persist the neighbouring lost bytes too; this model persists
//!   only the later write's own bytes, the more forgetful of the two.)
//!
//! # Kernel caching
//!
//! Entry and attribute timeouts are zero and no open asks to keep the page
//! cache, so lookups, attributes and opens always reach this file system;
//! writes are not cached (no `writeback_cache`), so every `write` reaches
//! the model before it returns. Reads may be served from the kernel's page
//! cache of the current mount, which always matches the model's current
//! bytes. A power cut unmounts and mounts anew, so nothing the kernel
//! cached survives it. (Direct I/O is not requested: the engine reads its
//! packs through shared memory maps, which FUSE direct I/O refuses without
//! an extra init flag; the remount already guarantees a cold cache.)

pub mod fuse;
pub mod model;
pub mod mount;
#[cfg(test)]
mod tests;

pub use model::{Cut, CutReport, Model};
pub use mount::LazyMount;
