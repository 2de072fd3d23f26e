//! Tiny deterministic pseudo-random number generator (SplitMix64).
//!
//! Owns every source of randomness of the generator: pids, pointers, commIds, jitter of the
//! simulated clock and the choice of corrupted lines. No external crate is used so that a
//! given seed produces byte-identical output on every platform and toolchain.

/// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit state, one add and two multiply-xorshift rounds.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// New generator from a seed. Any value, including 0, is a valid seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// Uniform value in `0..n` (0 when `n == 0`). The modulo bias is irrelevant here.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform value in `lo..=hi` (returns `lo` when `hi <= lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.below(hi - lo + 1)
        }
    }

    /// Uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `x` scaled by a uniform factor in `[1 - frac, 1 + frac)`.
    pub fn jitter(&mut self, x: f64, frac: f64) -> f64 {
        x * (1.0 + frac * (2.0 * self.unit() - 1.0))
    }

    /// Independent child generator; `salt` separates children forked at the same point.
    pub fn fork(&mut self, salt: u64) -> SplitMix64 {
        SplitMix64::new(self.next_u64() ^ mix64(salt))
    }
}

/// The SplitMix64 output function, usable as a stateless 64-bit hash.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        // First outputs of SplitMix64 seeded with 0 (reference implementation by S. Vigna).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn ranges() {
        let mut r = SplitMix64::new(7);
        for _ in 0..1000 {
            let v = r.range(3, 9);
            assert!((3..=9).contains(&v));
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range(5, 5), 5);
    }
}
