//! Tests of the write-ahead log: the format and scan rules byte by byte
//! ([`format`]), the writer over the memory and fault-injecting devices
//! ([`writer`]), and the memory-mapped segment files of the relaxed mode
//! on a real file system ([`mapped`]).

mod format;
mod mapped;
mod writer;
