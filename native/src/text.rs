//! detector/tokenize.py and normalize.fold: character classes, tokens and their keys,
//! and the fold (NFKC by nfkc.rs where a text needs it, then case folding).

use crate::hashing::fmix64;
use crate::nfkc::Nfkc;

pub const CODE_POINTS: usize = 0x110000;
const WORD: u8 = 1;
const NO_SPACE: u8 = 2;
const SPAN_SEED: u64 = 0x9E3779B97F4A7C15; // tokenize._SPAN_SEED
const SPAN_STEP: u64 = 0x632BE59BD9B4E019; // tokenize._SPAN_STEP

/// tokenize._span_hash of one token: its bytes eight at a time, little endian.
#[inline]
pub fn span_hash(bytes: &[u8]) -> u64 {
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

pub struct Token {
    pub start: usize,
    pub end: usize,
    pub nospace: bool,
}

/// tokenize.tokenize of one text: runs of word characters, and each character of a
/// no-space script alone. Bytes are decoded as tokenize._code_points decodes them.
pub fn tokens(text: &[u8], classes: &[u8], out: &mut Vec<Token>) {
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

/// Little-endian int32s, as numpy's "<i4" tobytes writes them.
pub fn le_i32s(bytes: &[u8]) -> Vec<i32> {
    bytes.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().expect("four bytes"))).collect()
}

/// normalize.casefolds: str.casefold of every code point, at most three characters.
pub struct CaseFolds(Vec<[i32; 3]>); // per code point: offset, second, third

impl CaseFolds {
    /// folds: normalize.casefolds, (3, code points) int32.
    pub fn new(folds: &[u8]) -> Result<Self, &'static str> {
        if folds.len() != 3 * 4 * CODE_POINTS {
            return Err("folds needs three int32 per code point");
        }
        // read in place: a copy of the 13 MB first costs more than the rest of the start
        let at = |r: usize, c: usize| {
            let b = &folds[4 * (r * CODE_POINTS + c)..][..4];
            i32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        Ok(CaseFolds((0..CODE_POINTS).map(|c| [at(0, c), at(1, c), at(2, c)]).collect()))
    }

    /// The code points str.casefold makes of code point `c`: the first always (NUL folds
    /// to itself), the second and third where there are.
    #[inline]
    pub fn of(&self, c: u32) -> impl Iterator<Item = u32> {
        let [first, second, third] = self.0[c as usize];
        let lead = (c as i64 + first as i64) as u32;
        std::iter::once(lead).chain([second as u32, third as u32].into_iter().filter(|&x| x != 0))
    }
}

/// normalize.fold: NFKC, then str.casefold from a table.
pub struct Folder {
    folds: CaseFolds,
    nfkc: Nfkc,
}

impl Folder {
    pub fn new(folds: &[u8], nfkc: Nfkc) -> Result<Self, &'static str> {
        Ok(Folder { folds: CaseFolds::new(folds)?, nfkc })
    }

    /// None for a text fold() inserts combining grapheme joiners into (Nfkc::normalize).
    pub fn fold(&self, text: &str) -> Option<String> {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(text.len());
        let mut chars = Vec::new();
        // Most texts are in NFKC but for a few characters: NFKC runs only from the kept
        // character before each of those to the kept one after it.
        let (mut done, mut kept, mut at) = (0, 0, 0);
        while at < bytes.len() {
            if bytes[at] < 0x80 {
                kept = at; // ASCII is kept
                at += 1;
                continue;
            }
            let ch = text[at..].chars().next().expect("a character starts here");
            if self.nfkc.kept(ch as u32) {
                kept = at;
                at += ch.len_utf8();
                continue;
            }
            let end = self.nfkc.segment_end(text, at + ch.len_utf8());
            self.casefold_str(&text[done..kept], &mut out)?;
            if !self.nfkc.normalize(&text[kept..end], &mut chars) {
                return None;
            }
            for &c in &chars {
                self.casefold(c, &mut out)?;
            }
            (done, kept, at) = (end, end, end);
        }
        self.casefold_str(&text[done..], &mut out)?;
        String::from_utf8(out).ok()
    }

    fn casefold_str(&self, text: &str, out: &mut Vec<u8>) -> Option<()> {
        if text.is_ascii() {
            out.extend(text.bytes().map(|b| b.to_ascii_lowercase())); // str.casefold of ASCII
            return Some(());
        }
        for ch in text.chars() {
            self.casefold(ch as u32, out)?;
        }
        Some(())
    }

    #[inline]
    fn casefold(&self, c: u32, out: &mut Vec<u8>) -> Option<()> {
        if c < 0x80 {
            out.push((c as u8).to_ascii_lowercase());
            return Some(());
        }
        for code in self.folds.of(c) {
            push(out, code)?;
        }
        Some(())
    }
}

#[inline]
fn push(out: &mut Vec<u8>, c: u32) -> Option<()> {
    let mut buf = [0u8; 4];
    out.extend_from_slice(char::from_u32(c)?.encode_utf8(&mut buf).as_bytes());
    Some(())
}
