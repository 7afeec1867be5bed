//! neardup's batch kernels: the per-token and per-document work of a fingerprint.
//!
//! Each function computes exactly what the numpy reference computes (detector/tokenize.py,
//! features.py, simhash.py, engine.py, verify.py), bit for bit; tests/test_native.py holds
//! the two together. The character classes come from the interpreter (its regex engine's
//! \w), so both paths agree on any Python and Unicode version. Arrays go back to Python as
//! little-endian bytes, read there with numpy.frombuffer; the work runs without the GIL.

use std::collections::HashMap;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyList, PyString};
use xxhash_rust::xxh3::xxh3_64;

mod resp;

const CODE_POINTS: usize = 0x110000;
const WORD: u8 = 1;
const NO_SPACE: u8 = 2;
const MIX: u64 = 0x9E3779B97F4A7C15; // hashing.MIX
const SPAN_SEED: u64 = 0x9E3779B97F4A7C15; // tokenize._SPAN_SEED
const SPAN_STEP: u64 = 0x632BE59BD9B4E019; // tokenize._SPAN_STEP
const DIGEST_SALTS: [u64; 2] = [0x9E3779B97F4A7C15, 0xD6E8FEB86659FD93]; // engine._digests
const SHINGLE_SHIFT: u32 = 16; // 64 - verify.SHINGLE_BITS

#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51AFD7ED558CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CEB93FE53A87E3);
    h ^ (h >> 33)
}

/// hashing.combine: one hash for a sequence of hashes.
#[inline]
fn combine(hashes: &[u64]) -> u64 {
    let mut acc = hashes[0];
    for &h in &hashes[1..] {
        acc = acc.wrapping_mul(MIX).wrapping_add(h);
    }
    fmix64(acc)
}

/// tokenize._span_hash of one token: its bytes eight at a time, little endian.
#[inline]
fn span_hash(bytes: &[u8]) -> u64 {
    let mut h = fmix64((bytes.len() as u64).wrapping_mul(SPAN_SEED));
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        h = fmix64(h ^ word).wrapping_add(SPAN_STEP);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        // byte by byte: a copy into a buffer would be a memcpy call per token
        let word = tail.iter().rev().fold(0u64, |w, &b| (w << 8) | b as u64);
        h = fmix64(h ^ word).wrapping_add(SPAN_STEP);
    }
    h
}

struct Token {
    start: usize,
    end: usize,
    nospace: bool,
}

/// tokenize.tokenize of one text: runs of word characters, and each character of a
/// no-space script alone. Bytes are decoded as tokenize._code_points decodes them.
fn tokens(text: &[u8], classes: &[u8], out: &mut Vec<Token>) {
    out.clear();
    let at = |i: usize| -> u32 { text.get(i).copied().unwrap_or(b' ') as u32 };
    let mut run: Option<usize> = None;
    let mut i = 0;
    let ascii_word = |i: usize| text[i] < 0x80 && classes[text[i] as usize] == WORD;
    let ascii_other = |i: usize| text[i] < 0x80 && classes[text[i] as usize] != WORD;
    while i < text.len() {
        // Runs of ASCII word or non-word bytes, most of any text, in tight loops.
        if ascii_word(i) {
            run.get_or_insert(i);
            i += 1;
            while i < text.len() && ascii_word(i) {
                i += 1;
            }
            continue;
        }
        if ascii_other(i) {
            if let Some(start) = run.take() {
                out.push(Token { start, end: i, nospace: false });
            }
            i += 1;
            while i < text.len() && ascii_other(i) {
                i += 1;
            }
            continue;
        }
        let b0 = text[i] as u32;
        let (size, class) = if b0 < 0xC0 {
            (1, 0) // a continuation byte without its lead: no character
        } else {
            let (size, code) = if b0 < 0xE0 {
                (2, ((b0 & 0x1F) << 6) | (at(i + 1) & 0x3F))
            } else if b0 < 0xF0 {
                (3, ((b0 & 0x0F) << 12) | ((at(i + 1) & 0x3F) << 6) | (at(i + 2) & 0x3F))
            } else {
                let code = ((b0 & 0x07) << 18)
                    | ((at(i + 1) & 0x3F) << 12)
                    | ((at(i + 2) & 0x3F) << 6)
                    | (at(i + 3) & 0x3F);
                (4, code)
            };
            (size, classes[(code as usize).min(CODE_POINTS - 1)])
        };
        let end = (i + size).min(text.len());
        if class == WORD {
            run.get_or_insert(i);
        } else {
            if let Some(start) = run.take() {
                out.push(Token { start, end: i, nospace: false });
            }
            if class == NO_SPACE {
                out.push(Token { start: i, end, nospace: true });
            }
        }
        i = end;
    }
    if let Some(start) = run {
        out.push(Token { start, end: text.len(), nospace: false });
    }
}

enum Weights {
    /// features.BuiltinWeights: by UTF-8 length, the last entry for every longer token
    ByLength(Vec<f32>),
    /// features.IdfTable: by token, `unseen` for the others
    Table(HashMap<Vec<u8>, f32>, f32),
}

impl Weights {
    #[inline]
    fn of(&self, token: &[u8]) -> f32 {
        match self {
            Weights::ByLength(w) => w[token.len().min(w.len() - 1)],
            Weights::Table(w, unseen) => *w.get(token).unwrap_or(unseen),
        }
    }
}

/// One text's features, as features.Featurizer.batch makes them.
#[derive(Default)]
struct Features {
    hash: Vec<u64>,
    weight: Vec<f32>,
}

#[pyclass(frozen)]
struct Kernels {
    classes: Vec<u8>,
    safe: Vec<u8>,   // normalize.nfkc_safe: 1 where NFKC has nothing to do
    folds: Vec<[i32; 3]>, // normalize.casefolds per code point: offset, second, third
    weights: Weights,
    cjk_n: usize,
    shingle_n: usize, // features "words" is 1
    literal_n: usize,
}

/// Scratch space of one batch, reused from text to text.
#[derive(Default)]
struct Scratch {
    tokens: Vec<Token>,
    keys: Vec<u64>,
    features: Features,
    staged: Features,
    shingles: Vec<u64>,
}

impl Kernels {
    fn tokenize(&self, text: &[u8], s: &mut Scratch) {
        tokens(text, &self.classes, &mut s.tokens);
        s.keys.clear();
        s.keys.extend(s.tokens.iter().map(|t| span_hash(&text[t.start..t.end])));
    }

    /// features.Featurizer.batch for one text: token features, then no-space n-grams,
    /// then word shingles.
    fn featurize(&self, text: &[u8], s: &mut Scratch) {
        let f = &mut s.features;
        f.hash.clear();
        f.weight.clear();
        for t in &s.tokens {
            let token = &text[t.start..t.end];
            f.hash.push(xxh3_64(token));
            f.weight.push(self.weights.of(token));
        }
        if self.cjk_n > 1 && s.tokens.iter().any(|t| t.nospace) {
            nospace_ngrams(&s.tokens, f, &mut s.staged, self.cjk_n);
            std::mem::swap(f, &mut s.staged);
        }
        if self.shingle_n > 1 && !f.hash.is_empty() {
            word_shingles(f, &mut s.staged, self.shingle_n);
            std::mem::swap(&mut s.features, &mut s.staged);
        }
    }

    /// verify.shingle_set of the text's token keys: sorted distinct 48-bit shingles.
    fn literal_shingles(&self, s: &mut Scratch) {
        let (keys, n) = (&s.keys, self.literal_n);
        s.shingles.clear();
        if keys.is_empty() {
            return;
        }
        if keys.len() < n {
            s.shingles.push(combine(keys) >> SHINGLE_SHIFT);
            return;
        }
        s.shingles.extend(keys.windows(n).map(|w| combine(w) >> SHINGLE_SHIFT));
        s.shingles.sort_unstable();
        s.shingles.dedup();
    }
}

impl Kernels {
    fn fold_one(&self, text: &str) -> Option<String> {
        let mut out = String::with_capacity(text.len());
        for ch in text.chars() {
            if ch.is_ascii() {
                out.push(ch.to_ascii_lowercase()); // what str.casefold does to ASCII
                continue;
            }
            let c = ch as usize;
            if self.safe[c] == 0 {
                return None;
            }
            let [first, second, third] = self.folds[c];
            if first == 0 && second == 0 {
                out.push(ch);
                continue;
            }
            for code in [c as i64 + first as i64, second as i64, third as i64] {
                if code != 0 {
                    out.push(char::from_u32(code as u32)?);
                }
            }
        }
        Some(out)
    }
}

/// features._nospace_ngrams: each run of adjacent no-space characters becomes its
/// character n-grams; a run shorter than n, one feature of the whole run.
fn nospace_ngrams(tokens: &[Token], f: &Features, out: &mut Features, n: usize) {
    out.hash.clear();
    out.weight.clear();
    let mut i = 0;
    while i < tokens.len() {
        if !tokens[i].nospace {
            out.hash.push(f.hash[i]);
            out.weight.push(f.weight[i]);
            i += 1;
            continue;
        }
        let mut run = 1;
        while i + run < tokens.len()
            && tokens[i + run].nospace
            && tokens[i + run - 1].end == tokens[i + run].start
        {
            run += 1;
        }
        let width = n.min(run);
        for g in i..=(i + run - width) {
            out.hash.push(combine(&f.hash[g..g + width]));
            // float32 sums, then float64 division, then float32, as numpy does there
            let mut sum = f.weight[g];
            for &w in &f.weight[g + 1..g + width] {
                sum += w;
            }
            out.weight.push((sum as f64 / width as f64) as f32);
        }
        i += run;
    }
}

/// features._shingles for one text: word n-shingles; a text shorter than n keeps its words.
fn word_shingles(f: &Features, out: &mut Features, n: usize) {
    out.hash.clear();
    out.weight.clear();
    if f.hash.len() < n {
        out.hash.extend_from_slice(&f.hash);
        out.weight.extend_from_slice(&f.weight);
        return;
    }
    for (hashes, weights) in f.hash.windows(n).zip(f.weight.windows(n)) {
        out.hash.push(combine(hashes));
        let sum: f32 = weights.iter().fold(0.0f32, |a, &w| a + w);
        out.weight.push(sum / n as f32);
    }
}

/// simhash.simhash of one text. Every weight is a float32 of at least 1, so every partial
/// sum is a multiple of 2^-23 below 2^30 and exact in float64: the sums, and so the bits,
/// do not depend on the order of addition, which differs from numpy's.
fn simhash(f: &Features) -> u64 {
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

/// engine._digests of one text: two salted sums over its token keys and positions.
fn digest(keys: &[u64]) -> [u64; 2] {
    DIGEST_SALTS.map(|salt| {
        keys.iter().enumerate().fold(0u64, |acc, (pos, &k)| {
            acc.wrapping_add(fmix64(k ^ (pos as u64).wrapping_mul(salt)))
        })
    })
}

fn as_bytes<'py, T: Copy>(py: Python<'py>, values: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: T is a plain integer or float type; its bytes are its little-endian value
    // on every platform neardup builds for (numpy reads them back as "<u8", "<f4").
    let raw = unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    };
    PyBytes::new(py, raw)
}

fn texts<'a>(list: &'a Bound<'_, PyList>) -> PyResult<Vec<Bound<'a, PyBytes>>> {
    list.iter().map(|t| Ok(t.cast_into::<PyBytes>()?)).collect()
}

#[pymethods]
impl Kernels {
    /// classes: the tokenizer's uint8 class of every code point (tokenize.char_classes);
    /// by_length or table + unseen: the weights; cjk_n, shingle_n: the feature config;
    /// literal_n: words per shingle of the literal pass.
    #[new]
    #[pyo3(signature = (classes, safe, folds, cjk_n, shingle_n, literal_n, by_length=None, table=None, unseen=1.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        classes: &[u8],
        safe: &[u8],
        folds: &[u8],
        cjk_n: usize,
        shingle_n: usize,
        literal_n: usize,
        by_length: Option<Vec<f32>>,
        table: Option<HashMap<Vec<u8>, f32>>,
        unseen: f32,
    ) -> PyResult<Self> {
        if classes.len() != CODE_POINTS || safe.len() != CODE_POINTS {
            return Err(PyValueError::new_err("classes and safe need a byte per code point"));
        }
        if folds.len() != 3 * 4 * CODE_POINTS {
            return Err(PyValueError::new_err("folds needs three int32 per code point"));
        }
        let row = |r: usize, c: usize| {
            let b = &folds[4 * (r * CODE_POINTS + c)..][..4];
            i32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        let folds = (0..CODE_POINTS).map(|c| [row(0, c), row(1, c), row(2, c)]);
        if cjk_n == 0 || shingle_n == 0 || literal_n == 0 {
            return Err(PyValueError::new_err("n-gram and shingle sizes must be at least 1"));
        }
        let weights = match (by_length, table) {
            (Some(w), None) if !w.is_empty() => Weights::ByLength(w),
            (None, Some(t)) => Weights::Table(t, unseen),
            _ => return Err(PyValueError::new_err("give by_length or table, not both")),
        };
        Ok(Kernels {
            classes: classes.to_vec(),
            safe: safe.to_vec(),
            folds: folds.collect(),
            weights,
            cjk_n,
            shingle_n,
            literal_n,
        })
    }

    /// normalize.fold of each text (NFKC, then str.casefold) where the text needs no
    /// NFKC work; None where it does (or holds a lone surrogate): unicodedata decides those.
    fn fold<'py>(
        &self,
        py: Python<'py>,
        texts_: &Bound<'py, PyList>,
    ) -> PyResult<Vec<Option<Bound<'py, PyString>>>> {
        let owned: Vec<Bound<'py, PyString>> =
            texts_.iter().map(|t| Ok(t.cast_into::<PyString>()?)).collect::<PyResult<_>>()?;
        let views: Vec<Option<&str>> = owned.iter().map(|t| t.to_str().ok()).collect();
        let folded: Vec<Option<String>> =
            py.detach(|| views.iter().map(|t| t.and_then(|t| self.fold_one(t))).collect());
        Ok(folded.into_iter().map(|f| f.map(|f| PyString::new(py, &f))).collect())
    }

    /// The tokens of UTF-8 texts: (doc int64, start int64, end int64, nospace bool,
    /// key uint64) as bytes, offsets within each text.
    fn tokens<'py>(
        &self,
        py: Python<'py>,
        texts_: &Bound<'py, PyList>,
    ) -> PyResult<[Bound<'py, PyBytes>; 5]> {
        let owned = texts(texts_)?;
        let views: Vec<&[u8]> = owned.iter().map(|t| t.as_bytes()).collect();
        let (doc, start, end, nospace, key) = py.detach(|| {
            let mut s = Scratch::default();
            let (mut doc, mut start, mut end) = (vec![], vec![], vec![]);
            let (mut nospace, mut key) = (vec![], vec![]);
            for (d, text) in views.iter().enumerate() {
                self.tokenize(text, &mut s);
                for (t, &k) in s.tokens.iter().zip(&s.keys) {
                    doc.push(d as i64);
                    start.push(t.start as i64);
                    end.push(t.end as i64);
                    nospace.push(t.nospace as u8);
                    key.push(k);
                }
            }
            (doc, start, end, nospace, key)
        });
        Ok([
            as_bytes(py, &doc),
            as_bytes(py, &start),
            as_bytes(py, &end),
            as_bytes(py, &nospace),
            as_bytes(py, &key),
        ])
    }

    /// The features of UTF-8 texts: (doc int64, hash uint64, weight float32) as bytes.
    fn features<'py>(
        &self,
        py: Python<'py>,
        texts_: &Bound<'py, PyList>,
    ) -> PyResult<[Bound<'py, PyBytes>; 3]> {
        let owned = texts(texts_)?;
        let views: Vec<&[u8]> = owned.iter().map(|t| t.as_bytes()).collect();
        let (doc, hash, weight) = py.detach(|| {
            let mut s = Scratch::default();
            let (mut doc, mut hash, mut weight) = (vec![], vec![], vec![]);
            for (d, text) in views.iter().enumerate() {
                self.tokenize(text, &mut s);
                self.featurize(text, &mut s);
                doc.extend(std::iter::repeat_n(d as i64, s.features.hash.len()));
                hash.extend_from_slice(&s.features.hash);
                weight.extend_from_slice(&s.features.weight);
            }
            (doc, hash, weight)
        });
        Ok([as_bytes(py, &doc), as_bytes(py, &hash), as_bytes(py, &weight)])
    }

    /// What the engine needs of each UTF-8 text: (fingerprints uint64, digests uint64
    /// pairs, literal shingle sets uint64 concatenated, their bounds int64) as bytes.
    fn prints<'py>(
        &self,
        py: Python<'py>,
        texts_: &Bound<'py, PyList>,
    ) -> PyResult<[Bound<'py, PyBytes>; 4]> {
        let owned = texts(texts_)?;
        let views: Vec<&[u8]> = owned.iter().map(|t| t.as_bytes()).collect();
        let (fps, digests, shingles, bounds) = py.detach(|| {
            let mut s = Scratch::default();
            let mut fps = Vec::with_capacity(views.len());
            let mut digests = Vec::with_capacity(2 * views.len());
            let (mut shingles, mut bounds) = (vec![], vec![0i64]);
            for text in &views {
                self.tokenize(text, &mut s);
                self.featurize(text, &mut s);
                fps.push(simhash(&s.features));
                digests.extend(digest(&s.keys));
                self.literal_shingles(&mut s);
                shingles.extend_from_slice(&s.shingles);
                bounds.push(shingles.len() as i64);
            }
            (fps, digests, shingles, bounds)
        });
        Ok([
            as_bytes(py, &fps),
            as_bytes(py, &digests),
            as_bytes(py, &shingles),
            as_bytes(py, &bounds),
        ])
    }

    /// The literal shingle sets alone: (shingles uint64 concatenated, bounds int64).
    fn shingle_sets<'py>(
        &self,
        py: Python<'py>,
        texts_: &Bound<'py, PyList>,
    ) -> PyResult<[Bound<'py, PyBytes>; 2]> {
        let owned = texts(texts_)?;
        let views: Vec<&[u8]> = owned.iter().map(|t| t.as_bytes()).collect();
        let (shingles, bounds) = py.detach(|| {
            let mut s = Scratch::default();
            let (mut shingles, mut bounds) = (vec![], vec![0i64]);
            for text in &views {
                self.tokenize(text, &mut s);
                self.literal_shingles(&mut s);
                shingles.extend_from_slice(&s.shingles);
                bounds.push(shingles.len() as i64);
            }
            (shingles, bounds)
        });
        Ok([as_bytes(py, &shingles), as_bytes(py, &bounds)])
    }
}

/// verify.jaccard of two sorted sets of distinct uint64 (numpy arrays or any buffer).
#[pyfunction]
fn jaccard(py: Python<'_>, a: PyBuffer<u64>, b: PyBuffer<u64>) -> PyResult<f64> {
    let (a, b) = (a.to_vec(py)?, b.to_vec(py)?);
    if a.is_empty() && b.is_empty() {
        return Ok(1.0);
    }
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    Ok(inter as f64 / (a.len() + b.len() - inter) as f64)
}

const SKETCH_ORDER_SEED: u64 = 0x5BD1E9955BD1E995; // sketch._ORDER_SEED
const SKETCH_BITS_SEED: u64 = 0x27D4EB2F165667C5; // sketch._BITS_SEED
const SKETCH_PROBE_SEED: u64 = 0x165667B19E3779F9; // sketch._PROBE_SEED
const SKETCH_PROBE_STEPS: u64 = 64; // sketch.PROBE_STEPS

/// sketch.sketches: the b-bit one-permutation MinHash of each shingle set (values[bounds[d]
/// .. bounds[d + 1]]), densified by each empty bin's probe sequence, as bytes.
#[pyfunction]
fn sketches<'py>(
    py: Python<'py>,
    values: PyBuffer<u64>,
    bounds: PyBuffer<i64>,
    log_bins: u32,
    bits: u32,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    if !(3..=16).contains(&log_bins) || ![1, 2, 4, 8].contains(&bits) {
        return Err(PyValueError::new_err("sketch: bins 2^3..2^16, bits 1, 2, 4 or 8"));
    }
    let (values, bounds) = (values.to_vec(py)?, bounds.to_vec(py)?);
    let k = 1usize << log_bins;
    let shift = 64 - log_bins;
    let mask = (1u64 << bits) - 1;
    let packed = py.detach(|| {
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
        out
    });
    Ok(packed.iter().map(|s| PyBytes::new(py, s)).collect())
}

/// The Redis index's bucket names (index/redis/keys.py, Layout.buckets): for bucket i,
/// prefixes[which[i]] + "{table}:{key:x}", as bytes.
#[pyfunction]
fn bucket_names<'py>(
    py: Python<'py>,
    prefixes: Vec<Vec<u8>>,
    which: PyBuffer<u32>,
    tables: PyBuffer<i64>,
    keys: PyBuffer<u64>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let (which, tables, keys) = (which.to_vec(py)?, tables.to_vec(py)?, keys.to_vec(py)?);
    if which.len() != tables.len() || which.len() != keys.len() {
        return Err(PyValueError::new_err("which, tables and keys differ in length"));
    }
    let mut name = Vec::with_capacity(64);
    let mut out = Vec::with_capacity(which.len());
    for ((&w, &table), &key) in which.iter().zip(&tables).zip(&keys) {
        let prefix = prefixes
            .get(w as usize)
            .ok_or_else(|| PyValueError::new_err("a bucket's prefix is missing"))?;
        name.clear();
        name.extend_from_slice(prefix);
        name.extend_from_slice(table.to_string().as_bytes());
        name.push(b':');
        name.extend_from_slice(format!("{key:x}").as_bytes());
        out.push(PyBytes::new(py, &name));
    }
    Ok(out)
}

/// index/redis/resp.py: commands (sequences of bytes, str, int or float, as redis-py's
/// Encoder takes them) as one RESP buffer.
#[pyfunction]
fn resp_commands<'py>(
    py: Python<'py>,
    commands: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::with_capacity(commands.len() * 64);
    let mut owned: Vec<Vec<u8>> = Vec::new();
    for cmd in &commands {
        owned.clear();
        for arg in cmd.try_iter()? {
            owned.push(resp_arg(&arg?)?);
        }
        let views: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
        resp::command(&views, &mut out);
    }
    Ok(PyBytes::new(py, &out))
}

/// One argument's bytes as redis-py's Encoder makes them: bytes as they are, str as UTF-8,
/// int and float as their repr; a bool, or anything else, is refused as it refuses them.
fn resp_arg(arg: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = arg.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = arg.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    if arg.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err("a Redis argument cannot be a bool"));
    }
    if arg.is_instance_of::<PyInt>() || arg.is_instance_of::<PyFloat>() {
        return Ok(arg.repr()?.to_str()?.as_bytes().to_vec());
    }
    if let Ok(b) = arg.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    Err(PyTypeError::new_err(format!(
        "a Redis argument must be bytes, str, int or float, not {}",
        arg.get_type().name()?
    )))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Kernels>()?;
    m.add_function(wrap_pyfunction!(jaccard, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_names, m)?)?;
    m.add_function(wrap_pyfunction!(sketches, m)?)?;
    m.add_function(wrap_pyfunction!(resp_commands, m)?)?;
    Ok(())
}
