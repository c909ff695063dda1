//! Reading a pack through a memory map.
//!
//! A [`PackReader`] validates everything but the slice bytes when it opens
//! (header, trailer, the checksum binding header, table and trailer, and the
//! bounds of every slice), then hands out slices. A slice's BLAKE3 digest is
//! checked the first time the slice is read; the outcome is remembered per
//! slice in an atomic, so a reader shared behind an `Arc` by many threads
//! hashes each slice about once. A slice whose digest does not match is
//! `Corrupted` on every read: its bytes are never handed out. A slice's
//! record index (version 3) lies in the table, so it is checked at the open
//! and handed out as a view over the mapped table bytes
//! ([`PackReader::slice_records`]).
//!
//! The only `unsafe` code of the crate is the memory map, in [`map_file`].

use std::fmt;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use memmap2::Mmap;

use crate::error::{ColdError, ColdErrorKind, Result};
use crate::pack::format::{
    parse_pack, record_index, slice_range, verify_slice, PackLayout, SliceMeta, HEADER_LEN, TRAILER_LEN,
};
use crate::pack::index::RecordIndex;

/// Slice not read yet.
const UNCHECKED: u8 = 0;
/// Slice digest matched.
const VERIFIED: u8 = 1;
/// Slice digest did not match.
const BAD: u8 = 2;

/// Maps `file` read-only.
#[allow(unsafe_code)]
fn map_file(file: &File) -> io::Result<Mmap> {
    // SAFETY: `Mmap::map` is unsafe because the mapped bytes may change, or
    // vanish, underneath the returned slice if the file is modified or
    // truncated while mapped. A pack file is immutable once published: it is
    // written under a temporary name, fsynced, and renamed into place, and
    // rill never opens a published pack for writing, truncates it, or reuses
    // its name (the writer refuses to replace an existing file); it is only
    // ever removed, which leaves existing mappings intact. So nothing in
    // this process changes the bytes we hand out. The one remaining hazard
    // is outside our control: another process truncating the file while it
    // is mapped would make reads of the lost pages raise SIGBUS.
    unsafe { Mmap::map(file) }
}

/// Where the pack's bytes live.
enum Backing {
    Map(Mmap),
    Memory(Bytes),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Map(map) => map,
            Backing::Memory(bytes) => bytes,
        }
    }
}

/// An open, validated pack. `Send + Sync`: share it behind an `Arc`.
pub struct PackReader {
    file: Option<PathBuf>,
    backing: Backing,
    layout: PackLayout,
    checked: Vec<AtomicU8>,
}

impl fmt::Debug for PackReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackReader")
            .field("file", &self.file)
            .field("group", &self.layout.header.group)
            .field("pack_id", &self.layout.header.pack_id)
            .field("bucket", &self.layout.bucket)
            .field("slice_count", &self.layout.slices.len())
            .field("file_len", &self.layout.file_len)
            .field("mapped", &matches!(self.backing, Backing::Map(_)))
            .finish()
    }
}

/// Owner of a zero-copy slice: keeps the reader, and so the mapping, alive.
struct SliceOwner {
    reader: Arc<PackReader>,
    range: Range<usize>,
}

impl AsRef<[u8]> for SliceOwner {
    fn as_ref(&self) -> &[u8] {
        &self.reader.backing.bytes()[self.range.clone()]
    }
}

impl PackReader {
    /// Validates `bytes` as a pack without keeping them: the layout on
    /// success, `Corrupted` on any violation. Slice digests are not checked.
    /// Never panics, whatever the input.
    pub fn parse(bytes: &[u8]) -> Result<PackLayout> {
        parse_pack(bytes)
    }

    /// Opens and validates the pack at `path`, reading it through a memory
    /// map. Errors name the file.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|err| ColdError::io("open", path, err))?;
        let len = file.metadata().map_err(|err| ColdError::io("stat", path, err))?.len();
        let minimum = (HEADER_LEN + TRAILER_LEN) as u64;
        if len < minimum {
            return Err(ColdError::corrupted(format!(
                "pack of {len} bytes is shorter than a header and a trailer ({minimum} bytes)"
            ))
            .with_file(path));
        }
        let map = map_file(&file).map_err(|err| ColdError::io("mmap", path, err))?;
        if map.len() as u64 != len {
            return Err(ColdError::corrupted(format!(
                "pack changed size while opening ({len} bytes, then {})",
                map.len()
            ))
            .with_file(path));
        }
        let layout = parse_pack(&map).map_err(|err| err.with_file(path))?;
        Ok(Self::assemble(Some(path.to_path_buf()), Backing::Map(map), layout))
    }

    /// Validates a pack held in memory (an in-memory store, a test, a fuzz
    /// target) and reads it like a mapped one.
    pub fn from_bytes(bytes: Bytes) -> Result<Self> {
        let layout = parse_pack(&bytes)?;
        Ok(Self::assemble(None, Backing::Memory(bytes), layout))
    }

    fn assemble(file: Option<PathBuf>, backing: Backing, layout: PackLayout) -> Self {
        let checked = layout.slices.iter().map(|_| AtomicU8::new(UNCHECKED)).collect();
        PackReader { file, backing, layout, checked }
    }

    fn name_file(&self, err: ColdError) -> ColdError {
        match &self.file {
            Some(file) => err.with_file(file),
            None => err,
        }
    }

    /// The file the pack was opened from (`None` for an in-memory pack).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The validated layout: header fields, bucket, slice table, sizes.
    pub fn layout(&self) -> &PackLayout {
        &self.layout
    }

    /// The pack's format version: 3, or 1 for a pack without record
    /// indexes.
    pub fn format_version(&self) -> u16 {
        self.layout.header.version
    }

    /// The group that wrote the pack.
    pub fn group(&self) -> u32 {
        self.layout.header.group
    }

    /// The pack's id, as given to the writer.
    pub fn pack_id(&self) -> u64 {
        self.layout.header.pack_id
    }

    /// The bucket every slice of the pack belongs to.
    pub fn bucket(&self) -> &str {
        &self.layout.bucket
    }

    /// Number of slices; at least one.
    pub fn slice_count(&self) -> usize {
        self.layout.slices.len()
    }

    /// Length of the file in bytes (what the pack costs in a cache).
    pub fn file_len(&self) -> u64 {
        self.layout.file_len
    }

    /// All slice entries, in table (= file) order.
    pub fn slices(&self) -> &[SliceMeta] {
        &self.layout.slices
    }

    /// The entry of slice `index`.
    pub fn slice_meta(&self, index: usize) -> Result<&SliceMeta> {
        self.layout.slices.get(index).ok_or_else(|| {
            self.name_file(ColdError::new(ColdErrorKind::NoSuchSlice {
                index,
                slice_count: self.layout.slices.len(),
            }))
        })
    }

    /// The record index of slice `index`: where each of its records starts
    /// and its time. `Ok(None)` for a slice of a version 1 pack, which has
    /// none; `NoSuchSlice` past the last slice. Checked at the open (it is
    /// part of the table), so this reads no slice bytes.
    pub fn slice_records(&self, index: usize) -> Result<Option<RecordIndex<'_>>> {
        let meta = self.slice_meta(index)?;
        record_index(self.backing.bytes(), &self.layout, meta).map_err(|err| self.name_file(err))
    }

    /// The index of the slice of `stream` (incarnation `incarnation`) that
    /// starts at stream offset `start`, if the pack holds one.
    pub fn find_slice(&self, stream: &str, incarnation: u64, start: u64) -> Option<usize> {
        self.layout
            .slices
            .iter()
            .position(|s| s.stream == stream && s.incarnation == incarnation && s.start == start)
    }

    /// The bytes of slice `index`, checked against the slice's digest the
    /// first time (`Corrupted` on a mismatch, on this and every later read).
    pub fn slice_bytes(&self, index: usize) -> Result<&[u8]> {
        self.slice_meta(index)?;
        let bytes = self.backing.bytes();
        match self.checked[index].load(Ordering::Acquire) {
            VERIFIED => Ok(&bytes[slice_range(&self.layout.slices[index])]),
            _ => match verify_slice(bytes, &self.layout, index) {
                Ok(data) => {
                    self.checked[index].store(VERIFIED, Ordering::Release);
                    Ok(data)
                }
                Err(err) => {
                    self.checked[index].store(BAD, Ordering::Release);
                    Err(self.name_file(err))
                }
            },
        }
    }

    /// Slice `index` as a zero-copy [`Bytes`] that keeps the pack (and its
    /// mapping) alive for as long as it lives, checked like
    /// [`slice_bytes`](Self::slice_bytes).
    pub fn slice_as_bytes(self: &Arc<Self>, index: usize) -> Result<Bytes> {
        let range = self.slice_bytes(index).map(|_| slice_range(&self.layout.slices[index]))?;
        Ok(match &self.backing {
            Backing::Memory(bytes) => bytes.slice(range),
            Backing::Map(_) => Bytes::from_owner(SliceOwner { reader: Arc::clone(self), range }),
        })
    }

    /// Checks every slice's digest; the first mismatch is returned.
    pub fn verify_all(&self) -> Result<()> {
        (0..self.slice_count()).try_for_each(|index| self.slice_bytes(index).map(|_| ()))
    }

    /// Whether slice `index` has been read and found intact.
    pub fn is_verified(&self, index: usize) -> bool {
        self.checked.get(index).is_some_and(|state| state.load(Ordering::Acquire) == VERIFIED)
    }

    /// Whether slice `index` has been read and found corrupted.
    pub fn is_known_bad(&self, index: usize) -> bool {
        self.checked.get(index).is_some_and(|state| state.load(Ordering::Acquire) == BAD)
    }
}
