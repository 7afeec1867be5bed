//! Unicode NFKC (UAX #15) on the interpreter's data: normalize.fold's unicodedata.normalize.
//!
//! The tables come from detector/normalize.py (combining_classes, decompositions,
//! compositions, non_starters), so this agrees with the interpreter's Unicode version,
//! whichever it is; only the Hangul arithmetic, fixed by the standard, is written here.

use std::collections::HashMap;

use crate::text::{le_i32s, CODE_POINTS};

// Hangul syllables: L, V and an optional T jamo, by arithmetic (Unicode ch. 3.12).
const S_BASE: u32 = 0xAC00;
const L_BASE: u32 = 0x1100;
const V_BASE: u32 = 0x1161;
const T_BASE: u32 = 0x11A7; // one before the first T: a syllable without T has index 0
const L_COUNT: u32 = 19;
const V_COUNT: u32 = 21;
const T_COUNT: u32 = 28;
const S_COUNT: u32 = L_COUNT * V_COUNT * T_COUNT;

/// normalize.MAX_NON_STARTERS: a longer run of them is where fold() inserts a combining
/// grapheme joiner first (when the text is not NFKC yet); such texts stay with Python.
const MAX_NON_STARTERS: usize = 30;

// Flags of a code point.
const NON_STARTER: u8 = 1; // normalize.non_starters
const SECOND: u8 = 2; // the second of some pair: most characters need no pair lookup
const KEPT: u8 = 4; // see Nfkc::kept

pub struct Nfkc {
    ccc: Vec<u8>,
    flags: Vec<u8>,
    /// decomposition of c: values[starts[c]..starts[c + 1]], empty where NFKD keeps c
    starts: Vec<u32>,
    values: Vec<u32>,
    pairs: HashMap<(u32, u32), u32>,
}

impl Nfkc {
    /// Each table as normalize.py makes it: safe, ccc and non_starters a byte per code
    /// point, lengths a byte per code point and values int32; pairs int32 triples (first,
    /// second, composite), one for each composite of normalize.compositions.
    pub fn new(
        safe: &[u8],
        ccc: &[u8],
        non_starters: &[u8],
        lengths: &[u8],
        values: &[u8],
        pairs: &[u8],
    ) -> Result<Self, &'static str> {
        if [safe, ccc, non_starters].iter().any(|t| t.len() != CODE_POINTS) {
            return Err("safe, combining classes and non-starters need a byte per code point");
        }
        if lengths.len() != CODE_POINTS {
            return Err("decomposition lengths need a byte per code point");
        }
        let values: Vec<u32> = le_i32s(values).into_iter().map(|v| v as u32).collect();
        let mut starts = Vec::with_capacity(CODE_POINTS + 1);
        let mut at = 0u32;
        starts.push(at);
        for &n in lengths {
            at += n as u32;
            starts.push(at);
        }
        if at as usize != values.len() || values.iter().any(|&v| v as usize >= CODE_POINTS) {
            return Err("decompositions do not match their lengths");
        }
        let triples = le_i32s(pairs);
        if !pairs.len().is_multiple_of(12)
            || triples.iter().any(|&v| v < 0 || v as usize >= CODE_POINTS)
        {
            return Err("pairs need three code points each");
        }
        let pairs: HashMap<(u32, u32), u32> =
            triples.chunks_exact(3).map(|t| ((t[0] as u32, t[1] as u32), t[2] as u32)).collect();
        let mut flags: Vec<u8> =
            non_starters.iter().map(|&n| if n != 0 { NON_STARTER } else { 0 }).collect();
        let hangul = (V_BASE..V_BASE + V_COUNT).chain(T_BASE + 1..T_BASE + T_COUNT);
        for second in pairs.keys().map(|&(_, second)| second).chain(hangul) {
            flags[second as usize] |= SECOND;
        }
        let mut nfkc = Nfkc { ccc: ccc.to_vec(), flags, starts, values, pairs };
        let mut first = Vec::with_capacity(18);
        for c in 0..CODE_POINTS as u32 {
            first.clear();
            nfkc.decompose(c, &mut first);
            let lead = first[0];
            if safe[c as usize] != 0
                && nfkc.class(lead) == 0
                && nfkc.flags[lead as usize] & SECOND == 0
            {
                nfkc.flags[c as usize] |= KEPT;
            }
        }
        Ok(nfkc)
    }

    /// Whether NFKC keeps c as it is (normalize.nfkc_safe) and starts its decomposition
    /// with a starter nothing composes onto: NFKC(a + c + b) is then NFKC(a) + NFKC(c + b),
    /// nothing reorders or composes across c. A text need be normalized only between the
    /// kept characters around those that are not.
    #[inline]
    pub fn kept(&self, c: u32) -> bool {
        self.flags[c as usize] & KEPT != 0
    }

    /// Where the segment to normalize from text[..from] ends: at the next kept character.
    pub fn segment_end(&self, text: &str, from: usize) -> usize {
        text[from..]
            .char_indices()
            .find(|&(_, ch)| self.kept(ch as u32))
            .map_or(text.len(), |(i, _)| from + i)
    }

    /// NFKC of text into out, as code points; false (out undefined) for a text with a run
    /// of more than MAX_NON_STARTERS non-starters.
    pub fn normalize(&self, text: &str, out: &mut Vec<u32>) -> bool {
        out.clear();
        let mut run = 0;
        for ch in text.chars() {
            let c = ch as u32;
            run = if self.flags[c as usize] & NON_STARTER != 0 { run + 1 } else { 0 };
            if run > MAX_NON_STARTERS {
                return false;
            }
            self.decompose(c, out);
        }
        self.reorder(out);
        self.compose(out);
        true
    }

    fn decompose(&self, c: u32, out: &mut Vec<u32>) {
        if (S_BASE..S_BASE + S_COUNT).contains(&c) {
            let s = c - S_BASE;
            out.push(L_BASE + s / (V_COUNT * T_COUNT));
            out.push(V_BASE + s % (V_COUNT * T_COUNT) / T_COUNT);
            if !s.is_multiple_of(T_COUNT) {
                out.push(T_BASE + s % T_COUNT);
            }
            return;
        }
        let (a, b) = (self.starts[c as usize], self.starts[c as usize + 1]);
        if a == b {
            out.push(c);
        } else {
            // each decomposition is NFKD already: full, and in canonical order itself
            out.extend_from_slice(&self.values[a as usize..b as usize]);
        }
    }

    #[inline]
    fn class(&self, c: u32) -> u8 {
        self.ccc[c as usize]
    }

    /// Canonical ordering: each run of non-starters stably sorted by combining class.
    fn reorder(&self, chars: &mut [u32]) {
        let mut i = 0;
        while i < chars.len() {
            if self.class(chars[i]) == 0 {
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && self.class(chars[i]) != 0 {
                i += 1;
            }
            let run = &mut chars[start..i];
            if run.windows(2).any(|w| self.class(w[0]) > self.class(w[1])) {
                run.sort_by_key(|&c| self.class(c)); // stable
            }
        }
    }

    /// The primary composite of a pair, canonical or Hangul (L+V, LV+T).
    fn pair(&self, first: u32, second: u32) -> Option<u32> {
        if self.flags[second as usize] & SECOND == 0 {
            return None;
        }
        if (L_BASE..L_BASE + L_COUNT).contains(&first)
            && (V_BASE..V_BASE + V_COUNT).contains(&second)
        {
            let (l, v) = (first - L_BASE, second - V_BASE);
            return Some(S_BASE + (l * V_COUNT + v) * T_COUNT);
        }
        if (S_BASE..S_BASE + S_COUNT).contains(&first)
            && (first - S_BASE).is_multiple_of(T_COUNT)
            && T_BASE < second
            && second < T_BASE + T_COUNT
        {
            return Some(first + (second - T_BASE));
        }
        self.pairs.get(&(first, second)).copied()
    }

    /// Canonical composition (UAX #15): each character joins the last starter when
    /// nothing between them blocks it (a starter, or a mark of its class or higher), in
    /// place.
    fn compose(&self, chars: &mut Vec<u32>) {
        let mut starter: Option<usize> = None; // where the last starter was written
        let mut last_class = 0u8; // of the last character written
        let mut kept = 0;
        for i in 0..chars.len() {
            let c = chars[i];
            let class = self.class(c);
            if let Some(s) = starter {
                let adjacent = kept == s + 1;
                if adjacent || last_class < class {
                    if let Some(composite) = self.pair(chars[s], c) {
                        chars[s] = composite;
                        continue;
                    }
                }
            }
            if class == 0 {
                starter = Some(kept);
            }
            last_class = class;
            chars[kept] = c;
            kept += 1;
        }
        chars.truncate(kept);
    }
}
