//! detector/extract.py's walk (_walk), over the page as lxml serializes libxml2's tree.
//!
//! The tree stays libxml2's: the page is parsed by lxml as before, and its body comes here
//! as `etree.tostring(body, encoding="utf-8")`, its tail included. That text is well formed
//! (every element closed, attributes double-quoted, text escaped), so one pass over it
//! sees the walk's events in the walk's order: a start tag, then the element's text; an
//! end tag, then its tail. Anything the pass does not expect (a processing instruction,
//! a named entity, bytes that are not UTF-8) returns Unsupported and the caller walks the
//! tree in Python: the result is the reference's or nothing.

use xxhash_rust::xxh3::xxh3_64;

use crate::text::{CaseFolds, CODE_POINTS};

/// Bits of a code point's class (extract.page_classes): Python's \w, str.isspace, \d.
const WORD: u8 = 1;
const SPACE: u8 = 2;
const DIGIT: u8 = 4;

/// What the walk does at an element of each name (extract._BLOCK, _CONTAINER, _SKIPPED).
pub const BLOCK: u8 = 1;
pub const CONTAINER: u8 = 2;
pub const SKIPPED: u8 = 4;

pub struct Line {
    pub text: String,
    pub words: u32,
    pub link_words: u32,
    pub key: u64,
    pub stamped: bool,
}

pub enum Walked {
    Page { lines: Vec<Line>, containers: Vec<(u32, u32)> },
    TooManyElements,
    Unsupported,
}

/// FNV-1a: the element names are a few bytes, and SipHash would cost more than the walk's
/// own work at each tag.
#[derive(Default)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100000001b3);
        }
    }
}

pub type Kinds = std::collections::HashMap<Vec<u8>, u8, std::hash::BuildHasherDefault<Fnv>>;

pub struct Walker {
    classes: Vec<u8>,
    folds: CaseFolds,
    kinds: Kinds,
    max_elements: usize,
    stamp_words: u32,
}

struct State<'w> {
    walker: &'w Walker,
    lines: Vec<Line>,
    containers: Vec<(u32, u32)>,
    chunks: String,
    link_words: u32,
    starts: Vec<u32>,
    links: Vec<bool>,
    in_link: u32,
}

impl Walker {
    pub fn new(
        classes: Vec<u8>,
        folds: CaseFolds,
        kinds: Kinds,
        max_elements: usize,
        stamp_words: u32,
    ) -> Option<Walker> {
        if classes.len() != CODE_POINTS {
            return None;
        }
        Some(Walker { classes, folds, kinds, max_elements, stamp_words })
    }

    /// Whether extract._STAMP (`\b\d{4}-\d{2}-\d{2}|\b\d{1,2}:\d{2}`) finds a fetch's
    /// stamp in the line: a run of digits after a non-word character (or the start).
    fn stamped(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let digit = |i: usize| chars.get(i).is_some_and(|&c| self.class(c) & DIGIT != 0);
        let is = |i: usize, c: char| chars.get(i) == Some(&c);
        (0..chars.len()).any(|i| {
            let boundary = i == 0 || self.class(chars[i - 1]) & WORD == 0;
            let date = (0..4).all(|j| digit(i + j))
                && is(i + 4, '-')
                && digit(i + 5)
                && digit(i + 6)
                && is(i + 7, '-')
                && digit(i + 8)
                && digit(i + 9);
            let clock = |n: usize| {
                (0..n).all(|j| digit(i + j))
                    && is(i + n, ':')
                    && digit(i + n + 1)
                    && digit(i + n + 2)
            };
            boundary && digit(i) && (date || clock(2) || clock(1))
        })
    }

    /// templates.pair_bit of each line key of a URL: the top `log2` bits of xxh3 of the
    /// two as little-endian bytes.
    pub fn pair_bits(url: u64, keys: &[u64], log2: u32) -> Vec<u64> {
        let mut pair = [0u8; 16];
        pair[..8].copy_from_slice(&url.to_le_bytes());
        keys.iter()
            .map(|k| {
                pair[8..].copy_from_slice(&k.to_le_bytes());
                xxh3_64(&pair) >> (64 - log2)
            })
            .collect()
    }

    fn class(&self, c: char) -> u8 {
        self.classes[c as usize]
    }

    /// Runs of word characters: `len(_WORD.findall(text))`.
    fn words(&self, text: &str) -> u32 {
        let mut n = 0;
        let mut in_word = false;
        if text.is_ascii() {
            for &b in text.as_bytes() {
                let word = self.classes[b as usize] & WORD != 0;
                n += (word && !in_word) as u32;
                in_word = word;
            }
            return n;
        }
        for c in text.chars() {
            let word = self.class(c) & WORD != 0;
            n += (word && !in_word) as u32;
            in_word = word;
        }
        n
    }

    /// xxh3 of `_DIGITS.sub("#", text.casefold())`, as UTF-8.
    fn key(&self, text: &str) -> u64 {
        let mut out = String::with_capacity(text.len());
        let mut in_digits = false;
        if text.is_ascii() {
            // str.casefold of ASCII is its lower case, and its only \d are 0-9
            let mut bytes = Vec::with_capacity(text.len());
            for &b in text.as_bytes() {
                let digit = b.is_ascii_digit();
                if !digit {
                    bytes.push(b.to_ascii_lowercase());
                } else if !in_digits {
                    bytes.push(b'#');
                }
                in_digits = digit;
            }
            return xxh3_64(&bytes);
        }
        for c in text.chars() {
            for folded in self.folds.of(c as u32).filter_map(char::from_u32) {
                let digit = self.class(folded) & DIGIT != 0;
                if !digit {
                    out.push(folded);
                } else if !in_digits {
                    out.push('#');
                }
                in_digits = digit;
            }
        }
        xxh3_64(out.as_bytes())
    }

    pub fn walk(&self, xml: &[u8]) -> Walked {
        let Ok(xml) = std::str::from_utf8(xml) else { return Walked::Unsupported };
        let Some(targets) = targets(xml) else { return Walked::Unsupported };
        let mut s = State {
            walker: self,
            lines: Vec::new(),
            containers: Vec::new(),
            chunks: String::new(),
            link_words: 0,
            starts: Vec::new(),
            links: Vec::new(),
            in_link: 0,
        };
        let (mut elements, mut skipped) = (0usize, 0u32);
        let mut text = String::new();
        for piece in pieces(xml) {
            let (tag, empty) = match piece {
                Piece::Broken => return Walked::Unsupported,
                Piece::Text { .. } if skipped > 0 => continue,
                Piece::Text { raw, escaped: false } => {
                    s.add(raw);
                    continue;
                }
                Piece::Text { raw, escaped: true } => {
                    if !unescape(raw, &mut text) {
                        return Walked::Unsupported;
                    }
                    s.add(&text);
                    continue;
                }
                Piece::End(name) => {
                    if !is_name(name) {
                        return Walked::Unsupported;
                    }
                    let kind = self.kind(name);
                    if kind & SKIPPED != 0 {
                        let Some(left) = skipped.checked_sub(1) else {
                            return Walked::Unsupported;
                        };
                        skipped = left;
                    } else if skipped == 0 && !s.end(kind) {
                        return Walked::Unsupported;
                    }
                    continue;
                }
                Piece::Start { tag, empty } => (tag, empty),
            };
            let Some(Tag { name, href, .. }) = start_tag(tag) else {
                return Walked::Unsupported;
            };
            elements += 1;
            if elements > self.max_elements {
                return Walked::TooManyElements;
            }
            let kind = self.kind(name);
            if skipped > 0 || kind & SKIPPED != 0 {
                skipped += (kind & SKIPPED != 0) as u32;
                if empty && kind & SKIPPED != 0 {
                    skipped -= 1;
                }
                continue;
            }
            let counted = name == "a"
                && href.is_some_and(|h| {
                    !(h.len() > 1 && h.starts_with('#') && targets.contains(&h[1..]))
                });
            s.start(kind, counted);
            if empty {
                s.end(kind);
            }
        }
        if skipped != 0 || !s.starts.is_empty() {
            return Walked::Unsupported; // not the well-formed text lxml writes
        }
        s.flush();
        Walked::Page { lines: s.lines, containers: s.containers }
    }

    /// extract._tagless_words of a page that drop_comments_scripts_styles has made: its
    /// words outside strip_markup's tags (`<` then a letter, `!`, or `/` and a letter, up
    /// to the next `<` or `>` when that is a `>`). None for bytes that are not UTF-8.
    pub fn tagless_words(&self, text: &[u8]) -> Option<u64> {
        let text = std::str::from_utf8(text).ok()?;
        let b = text.as_bytes();
        let letter = |at: usize| b.get(at).is_some_and(|c| c.is_ascii_alphabetic());
        let (mut at, mut n, mut in_word) = (0, 0u64, false);
        while at < b.len() {
            let c = b[at];
            if c == b'<'
                && (letter(at + 1)
                    || b.get(at + 1) == Some(&b'!')
                    || (b.get(at + 1) == Some(&b'/') && letter(at + 2)))
            {
                let angle = b[at + 1..].iter().position(|&c| c == b'<' || c == b'>');
                if let Some(end) = angle.map(|i| at + 1 + i).filter(|&end| b[end] == b'>') {
                    at = end + 1;
                    in_word = false;
                    continue;
                }
            }
            let (class, size) = if c < 0x80 {
                (self.classes[c as usize], 1)
            } else {
                let ch = text[at..].chars().next()?;
                (self.class(ch), ch.len_utf8())
            };
            let word = class & WORD != 0;
            n += (word && !in_word) as u64;
            in_word = word;
            at += size;
        }
        Some(n)
    }

    fn kind(&self, name: &str) -> u8 {
        self.kinds.get(name.as_bytes()).copied().unwrap_or(0)
    }
}

impl State<'_> {
    fn start(&mut self, kind: u8, counted: bool) {
        if kind & BLOCK != 0 {
            self.flush();
        }
        self.in_link += counted as u32;
        self.links.push(counted);
        self.starts.push(self.lines.len() as u32);
    }

    /// False for an end tag without its start.
    fn end(&mut self, kind: u8) -> bool {
        let (Some(start), Some(counted)) = (self.starts.pop(), self.links.pop()) else {
            return false;
        };
        if kind & BLOCK != 0 {
            self.flush();
        }
        self.in_link -= counted as u32;
        if kind & CONTAINER != 0 {
            self.containers.push((start, self.lines.len() as u32));
        }
        true
    }

    fn add(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.chunks.push_str(text);
        if self.in_link > 0 {
            self.link_words += self.walker.words(text);
        }
    }

    /// `" ".join("".join(chunks).split())`, and the line's counts and key.
    fn flush(&mut self) {
        if !self.chunks.is_empty() {
            let w = self.walker;
            let mut text = String::with_capacity(self.chunks.len());
            for part in self.chunks.split(|c: char| w.class(c) & SPACE != 0) {
                if !part.is_empty() {
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(part);
                }
            }
            if !text.is_empty() {
                let words = w.words(&text);
                let key = w.key(&text);
                let link_words = self.link_words.min(words);
                let stamped = words <= w.stamp_words && w.stamped(&text);
                self.lines.push(Line { text, words, link_words, key, stamped });
            }
            self.chunks.clear();
        }
        self.link_words = 0;
    }
}

/// A name as libxml2's HTML parser reads one (htmlParseHTMLName): `<!` and `<?` are not.
fn is_name(name: &str) -> bool {
    let named = |b: u8| b.is_ascii_alphanumeric() || b":._-".contains(&b);
    !name.is_empty() && name.bytes().all(named)
}

/// A start tag's name and the raw (escaped) values of the attributes the walk reads, as
/// libxml2 writes them: `name` then ` attr="value"` pairs.
struct Tag<'a> {
    name: &'a str,
    href: Option<&'a str>,
    target: Option<&'a str>, // its id, and an `a` element's name too: what #x points to
    anchor: Option<&'a str>,
}

fn start_tag(tag: &str) -> Option<Tag<'_>> {
    let bytes = tag.as_bytes();
    let upto = |from: usize, stop: u8| bytes[from..].iter().position(|&b| b == stop);
    let name_end = upto(0, b' ').unwrap_or(bytes.len());
    let name = &tag[..name_end];
    if !is_name(name) {
        return None;
    }
    let mut parsed = Tag { name, href: None, target: None, anchor: None };
    let mut at = name_end;
    while at < bytes.len() {
        // ` name="value"`: a space, a name, `="`, the value up to the next `"`
        let eq = at + 1 + upto(at + 1, b'=')?;
        if bytes[at] != b' ' || bytes.get(eq + 1) != Some(&b'"') || !is_name(&tag[at + 1..eq]) {
            return None;
        }
        let end = eq + 2 + upto(eq + 2, b'"')?;
        let value = Some(&tag[eq + 2..end]);
        match &tag[at + 1..eq] {
            "href" if parsed.href.is_none() => parsed.href = value,
            "id" if parsed.target.is_none() => parsed.target = value,
            "name" if name == "a" && parsed.anchor.is_none() => parsed.anchor = value,
            _ => {}
        }
        at = end + 1;
    }
    Some(parsed)
}

/// Every id on the page and every `a` element's name: what a same-page anchor can point
/// to (extract._walk's `targets`). None where a tag is not as libxml2 writes one.
fn targets(xml: &str) -> Option<std::collections::HashSet<&str>> {
    let mut out = std::collections::HashSet::new();
    for piece in pieces(xml) {
        match piece {
            Piece::Broken => return None,
            Piece::Start { tag, .. } => {
                let parsed = start_tag(tag)?;
                out.extend(parsed.target);
                out.extend(parsed.anchor);
            }
            Piece::Text { .. } | Piece::End(_) => {}
        }
    }
    Some(out)
}

/// The serialization's pieces, in order: the text between two tags, an end tag's name,
/// a start tag (its name and attributes) and whether it closes itself (`<br/>`, or
/// `<br />` in a page whose doctype is XHTML); Broken for a `<` that no `>` closes.
enum Piece<'a> {
    Text { raw: &'a str, escaped: bool },
    End(&'a str),
    Start { tag: &'a str, empty: bool },
    Broken,
}

fn pieces(xml: &str) -> impl Iterator<Item = Piece<'_>> {
    let bytes = xml.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        let start = at;
        match *bytes.get(start)? {
            b'<' => {}
            _ => {
                let mut escaped = false;
                while at < bytes.len() && bytes[at] != b'<' {
                    escaped |= bytes[at] == b'&';
                    at += 1;
                }
                return Some(Piece::Text { raw: &xml[start..at], escaped });
            }
        }
        let Some(close) = bytes[start..].iter().position(|&b| b == b'>') else {
            at = bytes.len();
            return Some(Piece::Broken);
        };
        let tag = &xml[start + 1..start + close];
        at = start + close + 1;
        Some(match (tag.strip_prefix('/'), tag.strip_suffix('/')) {
            (Some(name), _) => Piece::End(name),
            (None, Some(tag)) => {
                Piece::Start { tag: tag.strip_suffix(' ').unwrap_or(tag), empty: true }
            }
            (None, None) => Piece::Start { tag, empty: false },
        })
    })
}

/// Text as libxml2 escapes it: &amp; &lt; &gt; &quot; &apos; and numeric references.
/// False for anything else (an entity reference node, which the reference walk sees as
/// its own node).
fn unescape(raw: &str, out: &mut String) -> bool {
    out.clear();
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let Some(semi) = rest[amp..].find(';').map(|i| amp + i) else { return false };
        let name = &rest[amp + 1..semi];
        let c = match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = name.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(dec) = name.strip_prefix('#') {
                    dec.parse::<u32>().ok()
                } else {
                    None
                };
                // U+FFFD as a reference is what libxml2 writes for a character XML
                // cannot hold (a form feed, a control): the tree has the character.
                match code.filter(|&c| c != 0xFFFD).and_then(char::from_u32) {
                    Some(c) => c,
                    None => return false,
                }
            }
        };
        out.push(c);
        rest = &rest[semi + 1..];
    }
    out.push_str(rest);
    true
}
