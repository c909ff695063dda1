//! Tests of the write-ahead log: the format and scan rules byte by byte
//! ([`format`]), the writer over the memory and fault-injecting devices
//! ([`writer`]), and the page-cache segment files of the relaxed mode on a
//! real file system ([`page_cache`]).

mod format;
mod page_cache;
mod writer;
