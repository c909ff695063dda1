//! Writing a pack: the slices of one flush of one bucket of one group, laid
//! out as FORMAT.md "Cold pack file" says, and published atomically.
//!
//! [`write_pack`] writes `<name>.tmp` in the target directory, fsyncs it,
//! renames it to `<name>` and fsyncs the directory, so a pack is either
//! absent or whole under its final name; a crash can leave only a `.tmp`
//! file behind, which no reader opens. It refuses to replace an existing
//! file: a published pack is immutable. [`encode_pack`] produces the same
//! bytes in memory. Both write format version 3 and check every input first
//! (names within the format's limits, no empty slice, no offset overflow,
//! every slice's record index valid for it) and write nothing on a bad one.
//! [`encode_pack_version`] also writes version 1, as older builds did, for
//! fixtures, tests and fuzzing.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::error::{ColdError, Result};
use crate::pack::format::{
    check_name, encode_header, encode_table, encode_trailer, entry_len, has_record_index, Digest, PackHeader,
    SliceMeta, HEADER_LEN, PACK_FORMAT_VERSION, READ_FORMAT_VERSIONS, TRAILER_LEN,
};
use crate::pack::index::{check_index, RecordIndexBuf};

/// Buffer between the encoder and the file; larger writes go straight
/// through.
const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// One slice to pack: the bytes `[start, start + len)` of one incarnation of
/// one stream, given as consecutive parts (typically whole records) whose
/// concatenation is the slice, and where its records start and their times.
#[derive(Clone, Copy, Debug)]
pub struct SliceSpec<'a> {
    /// The stream's name within the pack's bucket.
    pub stream: &'a str,
    /// The stream's incarnation.
    pub incarnation: u64,
    /// Stream offset of the slice's first byte.
    pub start: u64,
    /// The slice's bytes, in order; empty parts are allowed, an empty slice
    /// is not.
    pub parts: &'a [&'a [u8]],
    /// The slice's records, in absolute stream offsets: the first starts at
    /// `start`, every one inside the slice. Not written in version 1.
    pub index: &'a RecordIndexBuf,
}

impl SliceSpec<'_> {
    /// Total length of the parts.
    pub fn len(&self) -> u64 {
        self.parts.iter().map(|part| part.len() as u64).sum()
    }

    /// Whether the slice has no bytes (which a pack never holds).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What was written for one slice, in the order the slices were given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceSummary {
    /// Length of the slice in bytes.
    pub len: u64,
    /// File offset of the slice's first byte.
    pub data_offset: u64,
    /// BLAKE3 of the slice's bytes, as stored in the table.
    pub digest: Digest,
}

/// What [`write_pack`] published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackSummary {
    /// The file's name within its directory.
    pub file_name: String,
    /// Length of the file in bytes.
    pub bytes: u64,
    /// One summary per slice, in the order given (= table order).
    pub slices: Vec<SliceSummary>,
}

/// Checks the inputs of a pack of format `version`; the error is
/// `InvalidInput`.
fn check_inputs(version: u16, bucket: &str, slices: &[SliceSpec<'_>]) -> Result<()> {
    if !READ_FORMAT_VERSIONS.contains(&version) {
        return Err(ColdError::invalid_input(format!(
            "pack format version {version}: this build writes {READ_FORMAT_VERSIONS:?}"
        )));
    }
    check_name("bucket", bucket.as_bytes()).map_err(ColdError::invalid_input)?;
    if slices.is_empty() {
        return Err(ColdError::invalid_input("a pack holds at least one slice"));
    }
    if u32::try_from(slices.len()).is_err() {
        return Err(ColdError::invalid_input(format!(
            "{} slices exceed the format's u32 count",
            slices.len()
        )));
    }
    for (index, slice) in slices.iter().enumerate() {
        check_name("stream", slice.stream.as_bytes())
            .map_err(|why| ColdError::invalid_input(format!("slice {index}: {why}")))?;
        let len = slice.len();
        if len == 0 {
            return Err(ColdError::invalid_input(format!(
                "slice {index} of stream {:?} is empty",
                slice.stream
            )));
        }
        if slice.start.checked_add(len).is_none() {
            return Err(ColdError::invalid_input(format!(
                "slice {index}: stream range {} + {len} overflows",
                slice.start
            )));
        }
        if has_record_index(version) {
            check_index(slice.index, slice.start, len).map_err(|why| {
                ColdError::invalid_input(format!(
                    "slice {index} of stream {:?}: record index: {why}",
                    slice.stream
                ))
            })?;
        }
    }
    Ok(())
}

/// Writes the whole pack, in format `version`, to `out` and returns its
/// length and slice table. The inputs must have passed [`check_inputs`] and
/// [`check_table_len`].
fn emit<W: Write>(
    out: &mut W,
    version: u16,
    group: u32,
    pack_id: u64,
    bucket: &str,
    slices: &[SliceSpec<'_>],
) -> io::Result<(u64, Vec<SliceMeta>)> {
    let header = encode_header(&PackHeader { version, group, pack_id, slice_count: slices.len() as u32 });
    out.write_all(&header)?;
    let mut offset = HEADER_LEN as u64;
    let mut metas = Vec::with_capacity(slices.len());
    for slice in slices {
        let mut hasher = blake3::Hasher::new();
        let mut len = 0u64;
        for part in slice.parts {
            hasher.update(part);
            out.write_all(part)?;
            len += part.len() as u64;
        }
        metas.push(SliceMeta {
            stream: slice.stream.to_owned(),
            incarnation: slice.incarnation,
            start: slice.start,
            len,
            data_offset: offset,
            digest: *hasher.finalize().as_bytes(),
            record_index: None,
        });
        offset += len;
    }
    let indexes: Vec<&RecordIndexBuf> = slices.iter().map(|s| s.index).collect();
    let table = encode_table(bucket, version, &mut metas, &indexes);
    let trailer = encode_trailer(version, &header, &table, offset, slices.len() as u32)
        .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err.to_string()))?;
    out.write_all(&table)?;
    out.write_all(&trailer)?;
    Ok((offset + table.len() as u64 + TRAILER_LEN as u64, metas))
}

/// Checks that the table of these slices, in format `version`, fits the
/// format's `u32` length, so a too-large table is refused before any byte
/// is written.
fn check_table_len(version: u16, bucket: &str, slices: &[SliceSpec<'_>]) -> Result<()> {
    let table_len = slices.iter().try_fold(2 + bucket.len() as u64, |sum, s| {
        entry_len(version, s.stream.len(), s.index.len(), s.index.runs().len())?.checked_add(sum)
    });
    let table_len = table_len.unwrap_or(u64::MAX);
    if u32::try_from(table_len).is_err() {
        return Err(ColdError::invalid_input(format!(
            "slice table of {table_len} bytes exceeds the format's u32 limit"
        )));
    }
    Ok(())
}

fn summarize(file_name: &str, bytes: u64, metas: &[SliceMeta]) -> PackSummary {
    PackSummary {
        file_name: file_name.to_owned(),
        bytes,
        slices: metas
            .iter()
            .map(|m| SliceSummary { len: m.len, data_offset: m.data_offset, digest: m.digest })
            .collect(),
    }
}

/// The bytes of a pack, in memory: exactly what [`write_pack`] would write
/// (format version [`PACK_FORMAT_VERSION`]).
pub fn encode_pack(group: u32, pack_id: u64, bucket: &str, slices: &[SliceSpec<'_>]) -> Result<Vec<u8>> {
    encode_pack_version(PACK_FORMAT_VERSION, group, pack_id, bucket, slices)
}

/// The bytes of a pack in format `version`: 3 (what [`encode_pack`]
/// writes), or 1, as builds before the record index wrote it (the slices'
/// indexes are then neither checked nor written). For fixtures, tests and
/// fuzz corpora of old packs; rill itself writes only version 3. Any other
/// version is `InvalidInput`.
pub fn encode_pack_version(
    version: u16,
    group: u32,
    pack_id: u64,
    bucket: &str,
    slices: &[SliceSpec<'_>],
) -> Result<Vec<u8>> {
    check_inputs(version, bucket, slices)?;
    check_table_len(version, bucket, slices)?;
    let mut out = Vec::new();
    emit(&mut out, version, group, pack_id, bucket, slices)
        .map_err(|err| ColdError::invalid_input(err.to_string()))?;
    debug_assert!(crate::pack::format::parse_pack(&out).is_ok());
    Ok(out)
}

/// Checks that `file_name` names a file directly inside the directory.
fn check_file_name(file_name: &str) -> Result<()> {
    let bad = file_name.is_empty()
        || file_name == "."
        || file_name == ".."
        || file_name.contains('/')
        || file_name.contains('\\')
        || file_name.contains('\0');
    if bad {
        return Err(ColdError::invalid_input(format!(
            "pack file name {file_name:?} is not a plain file name"
        )));
    }
    Ok(())
}

/// Writes a pack of `slices` (all of bucket `bucket`, flushed by group
/// `group` as pack `pack_id`) to `dir/file_name`: the bytes go to
/// `dir/file_name.tmp`, which is fsynced and renamed into place, then the
/// directory is fsynced. Fails with an `Io` error of kind `AlreadyExists`
/// if `dir/file_name` exists, and with `InvalidInput` (writing nothing) if
/// there are no slices, a slice is empty, a name is empty or longer than
/// 255 bytes, or a slice's record index does not fit it.
pub fn write_pack(
    dir: &Path,
    file_name: &str,
    group: u32,
    pack_id: u64,
    bucket: &str,
    slices: &[SliceSpec<'_>],
) -> Result<PackSummary> {
    check_file_name(file_name)?;
    check_inputs(PACK_FORMAT_VERSION, bucket, slices)?;
    check_table_len(PACK_FORMAT_VERSION, bucket, slices)?;
    let path = dir.join(file_name);
    let tmp = dir.join(format!("{file_name}.tmp"));
    match fs::symlink_metadata(&path) {
        Ok(_) => {
            let err = io::Error::new(io::ErrorKind::AlreadyExists, "a pack of that name already exists");
            return Err(ColdError::io("create", &path, err));
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(ColdError::io("stat", &path, err)),
    }

    let file = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|err| ColdError::io("create", &tmp, err))?;
    let written = write_and_sync(file, &tmp, group, pack_id, bucket, slices).and_then(|written| {
        fs::rename(&tmp, &path).map(|()| written).map_err(|e| ColdError::io("rename", &path, e))
    });
    let (bytes, metas) = match written {
        Ok(written) => written,
        Err(err) => {
            // Best effort: the error that matters is the one returned.
            let _ = fs::remove_file(&tmp);
            return Err(err);
        }
    };
    sync_dir(dir)?;
    Ok(summarize(file_name, bytes, &metas))
}

fn write_and_sync(
    file: File,
    tmp: &Path,
    group: u32,
    pack_id: u64,
    bucket: &str,
    slices: &[SliceSpec<'_>],
) -> Result<(u64, Vec<SliceMeta>)> {
    let mut out = BufWriter::with_capacity(WRITE_BUFFER_BYTES, file);
    let written = emit(&mut out, PACK_FORMAT_VERSION, group, pack_id, bucket, slices)
        .map_err(|err| ColdError::io("write", tmp, err))?;
    let file = out.into_inner().map_err(|err| ColdError::io("write", tmp, err.into_error()))?;
    file.sync_all().map_err(|err| ColdError::io("fsync", tmp, err))?;
    Ok(written)
}

/// Makes a rename (or removal) inside `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let handle = File::open(dir).map_err(|err| ColdError::io("open directory", dir, err))?;
    handle.sync_all().map_err(|err| ColdError::io("fsync directory", dir, err))
}

/// Removes the pack `dir/file_name` and makes the removal durable. Returns
/// whether a file was removed (`false` if it was already gone, so a retried
/// removal succeeds). Drop the pack from any [`PackCache`] first.
///
/// [`PackCache`]: crate::pack::PackCache
pub fn remove_pack(dir: &Path, file_name: &str) -> Result<bool> {
    check_file_name(file_name)?;
    let path = dir.join(file_name);
    let removed = match fs::remove_file(&path) {
        Ok(()) => true,
        Err(err) if err.kind() == io::ErrorKind::NotFound => false,
        Err(err) => return Err(ColdError::io("remove", &path, err)),
    };
    sync_dir(dir)?;
    Ok(removed)
}
