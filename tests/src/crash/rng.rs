//! Deterministic randomness: SplitMix64 and a tuple hash, fully specified
//! here so that a seed replays the same workload whatever the dependency
//! versions. Invariant: every random choice of the workload (scripts,
//! payloads, the parent's delays) is a pure function of the seed and of
//! the domain tag and numbers it is mixed with.

fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a tuple of numbers into one seed.
pub fn mix(parts: &[u64]) -> u64 {
    parts.iter().fold(0x6A09_E667_F3BC_C909, |h, p| finalize(h ^ finalize(p.wrapping_add(0x9E37_79B9))))
}

/// SplitMix64: small, fast and fully specified here, so a seed replays the
/// same workload whatever the dependency versions.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        finalize(self.0)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p` percent.
    pub fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}
