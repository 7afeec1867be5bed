//! detector/index/redis/keys.py: the Redis index's bucket names.

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
