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

pub struct Nfkc {
    ccc: Vec<u8>,
    non_starter: Vec<u8>,
    /// decomposition of c: values[starts[c]..starts[c + 1]], empty where NFKD keeps c
    starts: Vec<u32>,
    values: Vec<u32>,
    pairs: HashMap<(u32, u32), u32>,
}

impl Nfkc {
    /// Each table as normalize.py makes it: ccc and non_starters a byte per code point,
    /// lengths a byte per code point and values int32, compositions (2, code points) int32.
    pub fn new(
        ccc: &[u8],
        non_starters: &[u8],
        lengths: &[u8],
        values: &[u8],
        compositions: &[u8],
    ) -> Result<Self, &'static str> {
        if ccc.len() != CODE_POINTS || non_starters.len() != CODE_POINTS {
            return Err("combining classes and non-starters need a byte per code point");
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
        if compositions.len() != 2 * 4 * CODE_POINTS {
            return Err("compositions need two int32 per code point");
        }
        let rows = le_i32s(compositions);
        let pairs = (0..CODE_POINTS)
            .filter(|&c| rows[c] != 0)
            .map(|c| ((rows[c] as u32, rows[CODE_POINTS + c] as u32), c as u32))
            .collect();
        Ok(Nfkc {
            ccc: ccc.to_vec(),
            non_starter: non_starters.to_vec(),
            starts,
            values,
            pairs,
        })
    }

    /// NFKC of text into out, as code points; false (out undefined) for a text with a run
    /// of more than MAX_NON_STARTERS non-starters.
    pub fn normalize(&self, text: &str, out: &mut Vec<u32>) -> bool {
        out.clear();
        let mut run = 0;
        for ch in text.chars() {
            let c = ch as u32;
            run = if self.non_starter[c as usize] != 0 { run + 1 } else { 0 };
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
