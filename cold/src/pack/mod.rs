//! Packs: one file per flush of one bucket of one group, holding slices of
//! many streams of that bucket (FORMAT.md, "Cold pack file").
//!
//! A slice is a contiguous byte range `[start, end)` of one incarnation of one
//! stream, made of whole records. Streams of different buckets never share a
//! pack, so erasing a bucket means deleting its packs and nothing else. A
//! pack is written once ([`write_pack`]), published by an atomic rename, and
//! never modified; it is read through a memory map ([`PackReader`]), with
//! every slice checked against its BLAKE3 digest before its bytes are handed
//! out, and kept open in a [`PackCache`] bounded by mapped bytes. Since
//! format version 3 every slice also carries its record index (where each
//! record starts and its time, [`RecordIndex`]), inside the table and so
//! under the pack's checksums.

mod cache;
mod format;
mod index;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

pub use cache::{PackCache, PackCacheStats};
pub use format::{
    has_record_index, parse_pack, Digest, PackHeader, PackLayout, RecordIndexSpan, SliceMeta,
    ENTRY_FIXED_LEN, HEADER_LEN, HEADER_MAGIC, MAX_NAME_LEN, PACK_FORMAT_VERSION, READ_FORMAT_VERSIONS,
    TRAILER_LEN, TRAILER_MAGIC, V1_ENTRY_FIXED_LEN,
};
pub use index::{RecordIndex, RecordIndexBuf, RECORD_START_LEN, TIME_RUN_LEN};
pub use reader::PackReader;
pub use writer::{
    encode_pack, encode_pack_version, remove_pack, sync_dir, write_pack, PackSummary, SliceSpec, SliceSummary,
};
