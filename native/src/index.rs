//! The indexes: the Redis index's bucket names (detector/index/redis/keys.py) and the
//! memory index's lookup (detector/index/memory.py).

/// Layout.buckets: for bucket i, prefixes[which[i]] + "{table}:{key:x}".
pub fn bucket_names(
    prefixes: &[Vec<u8>],
    which: &[u32],
    tables: &[i64],
    keys: &[u64],
) -> Result<Vec<Vec<u8>>, &'static str> {
    if which.len() != tables.len() || which.len() != keys.len() {
        return Err("which, tables and keys differ in length");
    }
    let mut out = Vec::with_capacity(which.len());
    for ((&w, &table), &key) in which.iter().zip(tables).zip(keys) {
        let prefix = prefixes.get(w as usize).ok_or("a bucket's prefix is missing")?;
        let mut name = Vec::with_capacity(prefix.len() + 24);
        name.extend_from_slice(prefix);
        name.extend_from_slice(table.to_string().as_bytes());
        name.push(b':');
        name.extend_from_slice(format!("{key:x}").as_bytes());
        out.push(name);
    }
    Ok(out)
}

/// A memory-index block table (detector/index/memory.py, _Space): keys sorted, the
/// position in fps of each entry, and, for a table of short keys, where each key's run
/// starts (2^bits + 1 offsets).
pub struct Table<'a> {
    pub keys: Keys<'a>,
    pub members: &'a [u32],
    pub starts: Option<&'a [u32]>,
}

/// A table's keys are uint32 when they fit (memory.py, _key_type), else uint64.
pub enum Keys<'a> {
    U32(&'a [u32]),
    U64(&'a [u64]),
}

impl Keys<'_> {
    fn len(&self) -> usize {
        match self {
            Keys::U32(k) => k.len(),
            Keys::U64(k) => k.len(),
        }
    }

    /// The run of entries whose key is `key`, as numpy's searchsorted left and right.
    fn run(&self, key: u64) -> (usize, usize) {
        match self {
            Keys::U32(k) => match u32::try_from(key) {
                Ok(key) => (k.partition_point(|&x| x < key), k.partition_point(|&x| x <= key)),
                Err(_) => (k.len(), k.len()),
            },
            Keys::U64(k) => (k.partition_point(|&x| x < key), k.partition_point(|&x| x <= key)),
        }
    }
}

/// For each query, the distinct positions in fps within Hamming distance k and their
/// distances, in position order: query i's are positions[bounds[i]..bounds[i + 1]].
pub struct Near {
    pub bounds: Vec<i64>,
    pub positions: Vec<u32>,
    pub distances: Vec<u8>,
}

/// memory.py's _near: the probed keys of each query (probes, queries by columns, the
/// table of each column in `which`) read the newest `max_bucket` entries of their run,
/// and the unmerged tail fps[merged..] is scanned whole.
#[allow(clippy::too_many_arguments)]
pub fn near(
    queries: &[u64],
    fps: &[u64],
    tables: &[Table<'_>],
    which: &[usize],
    probes: &[u64],
    merged: usize,
    k: u32,
    max_bucket: usize,
) -> Result<Near, &'static str> {
    if probes.len() != queries.len() * which.len() {
        return Err("probes must be queries by probe columns");
    }
    if which.iter().any(|&t| t >= tables.len()) {
        return Err("a probe names a table that is not given");
    }
    if merged > fps.len() {
        return Err("merged is beyond the fingerprints");
    }
    if tables.iter().any(|t| t.members.len() != t.keys.len()) {
        return Err("a table's keys and members differ in length");
    }
    let mut out = Near { bounds: vec![0], positions: Vec::new(), distances: Vec::new() };
    let mut found: Vec<(u32, u8)> = Vec::new();
    for (i, &q) in queries.iter().enumerate() {
        found.clear();
        if merged > 0 {
            for (&t, &key) in which.iter().zip(&probes[i * which.len()..(i + 1) * which.len()]) {
                let table = &tables[t];
                let (lo, hi) = match table.starts {
                    Some(starts) => {
                        let at = usize::try_from(key).map_err(|_| "a probe beyond the offsets")?;
                        match (starts.get(at), starts.get(at + 1)) {
                            (Some(&lo), Some(&hi)) => (lo as usize, hi as usize),
                            _ => return Err("a probe beyond the offsets"),
                        }
                    }
                    None => table.keys.run(key),
                };
                if hi > table.members.len() || lo > hi {
                    return Err("a table's offsets are beyond its entries");
                }
                // members of a key are in insertion order: the newest are last
                for &pos in &table.members[lo.max(hi.saturating_sub(max_bucket))..hi] {
                    let fp =
                        fps.get(pos as usize).ok_or("a table names a fingerprint not given")?;
                    within(q, *fp, pos, k, &mut found);
                }
            }
        }
        for (pos, &fp) in fps.iter().enumerate().skip(merged) {
            within(q, fp, pos as u32, k, &mut found);
        }
        found.sort_unstable();
        found.dedup();
        for &(pos, d) in &found {
            out.positions.push(pos);
            out.distances.push(d);
        }
        out.bounds.push(out.positions.len() as i64);
    }
    Ok(out)
}

fn within(q: u64, fp: u64, pos: u32, k: u32, found: &mut Vec<(u32, u8)>) {
    let d = (q ^ fp).count_ones();
    if d <= k {
        found.push((pos, d as u8));
    }
}
