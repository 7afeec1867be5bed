//! detector/simhash.py: the weighted SimHash of one text's features.

use crate::features::Features;

/// simhash.simhash of one text. Every weight is a float32 of at least 1, so every partial
/// sum is a multiple of 2^-23 below 2^30 and exact in float64: the sums, and so the bits,
/// do not depend on the order of addition, which differs from numpy's.
pub fn simhash(f: &Features) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above
        return unsafe { simhash_avx2(f) };
    }
    simhash_sums(f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn simhash_avx2(f: &Features) -> u64 {
    simhash_sums(f) // the same code, vectorized four sums at a time
}

/// BYTE_BITS[v][b] = bit b of the byte value v, as a factor: a feature's weight goes to
/// the sums of its set bits by eight multiply-adds a byte, which vectorize.
const BYTE_BITS: [[f64; 8]; 256] = {
    let mut table = [[0.0; 8]; 256];
    let mut v = 0;
    while v < 256 {
        let mut b = 0;
        while b < 8 {
            table[v][b] = ((v >> b) & 1) as f64;
            b += 1;
        }
        v += 1;
    }
    table
};

#[inline(always)]
fn simhash_sums(f: &Features) -> u64 {
    let mut above = [0f64; 64];
    let mut total = 0f64;
    for (&h, &w) in f.hash.iter().zip(&f.weight) {
        let w = w as f64;
        total += w;
        for (j, sums) in above.chunks_exact_mut(8).enumerate() {
            let bits = &BYTE_BITS[((h >> (8 * j)) & 0xFF) as usize];
            for b in 0..8 {
                sums[b] += w * bits[b];
            }
        }
    }
    let mut fp = 0u64;
    for (bit, &sum) in above.iter().enumerate() {
        if 2.0 * sum > total {
            fp |= 1 << bit;
        }
    }
    fp
}
