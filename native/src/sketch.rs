//! detector/sketch.py: b-bit one-permutation MinHash sketches of shingle sets.

use crate::hashing::fmix64;

const SKETCH_ORDER_SEED: u64 = 0x5BD1E9955BD1E995; // sketch._ORDER_SEED
const SKETCH_BITS_SEED: u64 = 0x27D4EB2F165667C5; // sketch._BITS_SEED
const SKETCH_PROBE_SEED: u64 = 0x165667B19E3779F9; // sketch._PROBE_SEED
const SKETCH_PROBE_STEPS: u64 = 64; // sketch.PROBE_STEPS

/// sketch.sketches: the sketch of each shingle set (values[bounds[d]..bounds[d + 1]]),
/// densified by each empty bin's probe sequence, packed as sketch.py packs it.
pub fn sketches(
    values: &[u64],
    bounds: &[i64],
    log_bins: u32,
    bits: u32,
) -> Result<Vec<Vec<u8>>, &'static str> {
    if !(3..=16).contains(&log_bins) || ![1, 2, 4, 8].contains(&bits) {
        return Err("sketch: bins 2^3..2^16, bits 1, 2, 4 or 8");
    }
    let k = 1usize << log_bins;
    let shift = 64 - log_bins;
    let mask = (1u64 << bits) - 1;
    let mut out = Vec::with_capacity(bounds.len().saturating_sub(1));
    let mut least = vec![u64::MAX; k];
    let mut kept = vec![0u8; k];
    let mut filled = vec![false; k];
    for d in 0..bounds.len().saturating_sub(1) {
        let set = &values[bounds[d] as usize..bounds[d + 1] as usize];
        least.fill(u64::MAX);
        kept.fill(0);
        filled.fill(false);
        for &x in set {
            let order = fmix64(x ^ SKETCH_ORDER_SEED);
            let bin = (order >> shift) as usize;
            if !filled[bin] || order < least[bin] {
                least[bin] = order;
                filled[bin] = true;
                kept[bin] = (fmix64(x ^ SKETCH_BITS_SEED) & mask) as u8;
            }
        }
        let mut bins = kept.clone();
        if !set.is_empty() {
            for i in 0..k {
                if filled[i] {
                    continue;
                }
                let found = (0..SKETCH_PROBE_STEPS).find_map(|j| {
                    let probe =
                        (fmix64((j * k as u64 + i as u64) ^ SKETCH_PROBE_SEED) >> shift) as usize;
                    filled[probe].then_some(probe)
                });
                // sketch._densify: past the probe steps, the next filled bin round the end
                let at = found.unwrap_or_else(|| {
                    (1..k).map(|o| (i + o) % k).find(|&b| filled[b]).expect("a filled bin")
                });
                bins[i] = kept[at];
            }
        }
        let per = (8 / bits) as usize;
        let mut sketch = Vec::with_capacity(7 + k / per);
        sketch.push(b'S');
        sketch.push(bits as u8);
        sketch.push(log_bins as u8);
        sketch.extend_from_slice(&(set.len().min(u32::MAX as usize) as u32).to_le_bytes());
        for group in bins.chunks(per) {
            let mut byte = 0u8;
            for (t, &v) in group.iter().enumerate() {
                byte |= v << (t as u32 * bits);
            }
            sketch.push(byte);
        }
        out.push(sketch);
    }
    Ok(out)
}
