//! Tests of the pack format: layout and validation ([`format`]), the record
//! index of version 3 ([`index`]), the memory-mapped reader ([`reader`]),
//! the cache of open packs ([`cache`]), and the builders they share
//! ([`support`]).

mod cache;
mod format;
mod index;
mod reader;
pub(crate) mod support;
