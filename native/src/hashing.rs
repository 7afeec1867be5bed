//! detector/hashing.py: the mixer and the sequence hash every stage shares.

pub const MIX: u64 = 0x9E3779B97F4A7C15; // hashing.MIX

#[inline]
pub fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51AFD7ED558CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CEB93FE53A87E3);
    h ^ (h >> 33)
}

/// hashing.combine: one hash for a sequence of hashes.
#[inline]
pub fn combine(hashes: &[u64]) -> u64 {
    let mut acc = hashes[0];
    for &h in &hashes[1..] {
        acc = acc.wrapping_mul(MIX).wrapping_add(h);
    }
    fmix64(acc)
}
