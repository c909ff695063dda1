//! A reader that turns fuzz input bytes into structured choices.
//!
//! Targets that build a valid encoding from their input (to check round
//! trips, not only rejection) read their numbers through a [`Cursor`]. It
//! never fails: past the end of the input every number reads as zero and
//! every byte string as empty, so any input is a recipe.

/// Reads little-endian numbers and byte strings from fuzz input.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    /// Up to `n` bytes (fewer at the end of the input).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let end = self.pos.saturating_add(n).min(self.data.len());
        let out = &self.data[self.pos..end];
        self.pos = end;
        out
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(usize::MAX)
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let got = self.take(N);
        out[..got.len()].copy_from_slice(got);
        out
    }

    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A number in `0..n` (`0` when `n` is zero).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.u32() as usize) % n
    }

    /// A byte string of length `0..max` taken from the input.
    pub fn bytes(&mut self, max: usize) -> &'a [u8] {
        let len = self.below(max);
        self.take(len)
    }
}
