//! SplitMix64, the one pseudo-random generator of bob: seeded workloads, stamp fillers and
//! the random crash-state strategy draw from it. Small, fast and the same on every
//! platform, which seeded runs and recorded state ids need; a crate (rand) would add a
//! dependency whose streams may change between versions.

/// SplitMix64's increment (2^64 / the golden ratio).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// One SplitMix64 step as a hash: the output of a generator whose state is `x`. The same
/// `x` always gives the same value, so callers derive independent values from a seed and
/// an index without keeping a generator.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A SplitMix64 stream from a seed.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next number of the stream.
    pub fn next_u64(&mut self) -> u64 {
        let out = mix(self.0);
        self.0 = self.0.wrapping_add(GAMMA);
        out
    }

    /// A number in `0..bound` (`0` when `bound` is 0); the modulo bias is irrelevant for
    /// bob's few choices.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_splitmix64_of_the_reference() {
        // The reference implementation's first outputs for seed 1234567 (Vigna, splitmix64.c).
        let mut rng = SplitMix64::new(1234567);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(first, vec![6457827717110365317, 3203168211198807973, 9817491932198370423]);
        assert_eq!(mix(1234567), 6457827717110365317);
    }
}
