//! detector/features.py, verify.py and engine._digests: token weights, features (no-space
//! n-grams, word shingles), the literal pass's shingle sets, and the exact-copy digest;
//! and the batches that run a text through all of them.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_64;

use crate::hashing::{combine, fmix64};
use crate::simhash::simhash;
use crate::text::{span_hash, tokens, Token};

const DIGEST_SALTS: [u64; 2] = [0x9E3779B97F4A7C15, 0xD6E8FEB86659FD93]; // engine._digests
const SHINGLE_SHIFT: u32 = 16; // 64 - verify.SHINGLE_BITS

pub enum Weights {
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
pub struct Features {
    pub hash: Vec<u64>,
    pub weight: Vec<f32>,
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

/// The per-token columns of a batch: tokens and their keys, offsets within each text.
#[derive(Default)]
pub struct TokenColumns {
    pub doc: Vec<i64>,
    pub start: Vec<i64>,
    pub end: Vec<i64>,
    pub nospace: Vec<u8>,
    pub key: Vec<u64>,
}

/// The features of a batch, each with its text's index.
#[derive(Default)]
pub struct FeatureColumns {
    pub doc: Vec<i64>,
    pub hash: Vec<u64>,
    pub weight: Vec<f32>,
}

/// Shingle sets of a batch, concatenated; set d is values[bounds[d]..bounds[d + 1]].
pub struct Sets {
    pub values: Vec<u64>,
    pub bounds: Vec<i64>,
}

impl Sets {
    fn new() -> Self {
        Sets { values: vec![], bounds: vec![0] }
    }

    fn push(&mut self, set: &[u64]) {
        self.values.extend_from_slice(set);
        self.bounds.push(self.values.len() as i64);
    }
}

/// What the engine needs of a batch: fingerprints, digest pairs, literal shingle sets.
pub struct Prints {
    pub fps: Vec<u64>,
    pub digests: Vec<u64>,
    pub sets: Sets,
}

pub struct Featurizer {
    classes: Vec<u8>,
    weights: Weights,
    cjk_n: usize,
    shingle_n: usize, // features "words" is 1
    literal_n: usize,
}

impl Featurizer {
    /// classes: the tokenizer's class of every code point (tokenize.char_classes).
    pub fn new(
        classes: &[u8],
        weights: Weights,
        cjk_n: usize,
        shingle_n: usize,
        literal_n: usize,
    ) -> Result<Self, &'static str> {
        if classes.len() != crate::text::CODE_POINTS {
            return Err("classes needs a byte per code point");
        }
        if cjk_n == 0 || shingle_n == 0 || literal_n == 0 {
            return Err("n-gram and shingle sizes must be at least 1");
        }
        Ok(Featurizer { classes: classes.to_vec(), weights, cjk_n, shingle_n, literal_n })
    }

    pub fn tokens(&self, texts: &[&[u8]]) -> TokenColumns {
        let mut s = Scratch::default();
        let mut out = TokenColumns::default();
        for (d, text) in texts.iter().enumerate() {
            self.tokenize(text, &mut s);
            for (t, &k) in s.tokens.iter().zip(&s.keys) {
                out.doc.push(d as i64);
                out.start.push(t.start as i64);
                out.end.push(t.end as i64);
                out.nospace.push(t.nospace as u8);
                out.key.push(k);
            }
        }
        out
    }

    pub fn features(&self, texts: &[&[u8]]) -> FeatureColumns {
        let mut s = Scratch::default();
        let mut out = FeatureColumns::default();
        for (d, text) in texts.iter().enumerate() {
            self.tokenize(text, &mut s);
            self.featurize(text, &mut s);
            out.doc.extend(std::iter::repeat_n(d as i64, s.features.hash.len()));
            out.hash.extend_from_slice(&s.features.hash);
            out.weight.extend_from_slice(&s.features.weight);
        }
        out
    }

    pub fn prints(&self, texts: &[&[u8]]) -> Prints {
        let mut s = Scratch::default();
        let mut fps = Vec::with_capacity(texts.len());
        let mut digests = Vec::with_capacity(2 * texts.len());
        let mut sets = Sets::new();
        for text in texts {
            self.tokenize(text, &mut s);
            self.featurize(text, &mut s);
            fps.push(simhash(&s.features));
            digests.extend(digest(&s.keys));
            self.literal_shingles(&mut s);
            sets.push(&s.shingles);
        }
        Prints { fps, digests, sets }
    }

    pub fn shingle_sets(&self, texts: &[&[u8]]) -> Sets {
        let mut s = Scratch::default();
        let mut sets = Sets::new();
        for text in texts {
            self.tokenize(text, &mut s);
            self.literal_shingles(&mut s);
            sets.push(&s.shingles);
        }
        sets
    }

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

/// engine._digests of one text: two salted sums over its token keys and positions.
fn digest(keys: &[u64]) -> [u64; 2] {
    DIGEST_SALTS.map(|salt| {
        keys.iter().enumerate().fold(0u64, |acc, (pos, &k)| {
            acc.wrapping_add(fmix64(k ^ (pos as u64).wrapping_mul(salt)))
        })
    })
}

/// verify.jaccard of two sorted sets of distinct values.
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
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
    inter as f64 / (a.len() + b.len() - inter) as f64
}
