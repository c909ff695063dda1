//! Tests of the write-ahead log: the format and scan rules byte by byte
//! ([`format`]), and the writer over the memory and fault-injecting
//! devices ([`writer`]).

mod format;
mod writer;
