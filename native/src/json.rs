//! detector/records.py: a decision's JSON, the bytes of Decision.to_json (Python's
//! json.JSONEncoder with ensure_ascii=False and its default separators) as UTF-8.

use std::io::Write;

/// records.ORIGIN: the keys of a Kafka record's origin a decision carries, in their order.
pub const ORIGIN: [&str; 3] = ["topic", "partition", "offset"];

/// A value the encoder writes as json writes it; anything else is left to Python.
#[derive(Clone, Copy)]
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    // -2^63 to 2^64 - 1: a Kafka offset is signed, a fingerprint unsigned
    Int(i128),
    Float(f64),
    Str(&'a str),
}

use Scalar::{Float, Int, Null, Str};

impl Scalar<'_> {
    fn truthy(&self) -> bool {
        match *self {
            Null => false,
            Scalar::Bool(b) => b,
            Int(i) => i != 0,
            Float(x) => x != 0.0,
            Str(s) => !s.is_empty(),
        }
    }
}

/// Decision's fields, as its to_dict reads them.
pub struct Decision<'a> {
    pub id: Scalar<'a>,
    pub duplicate_of: Scalar<'a>,
    pub fingerprint: Scalar<'a>,
    pub distance: Scalar<'a>,
    pub similarity: Scalar<'a>,
    pub exact: Scalar<'a>,
    pub features: Scalar<'a>,
    pub namespace: Scalar<'a>,
    pub detector: Scalar<'a>,
    pub decided_at: Scalar<'a>,
    pub revision: Scalar<'a>,
    pub previous_fingerprint: Scalar<'a>,
    pub duplicate_of_revision: Scalar<'a>,
    pub url: Scalar<'a>,
    pub version: Scalar<'a>,
    /// The origin's value of each of ORIGIN's keys it has
    pub origin: [Option<Scalar<'a>>; 3],
    pub extraction: Scalar<'a>,
    pub space: Scalar<'a>,
    pub k: Scalar<'a>,
    pub evidence: Scalar<'a>,
    pub cluster: Scalar<'a>,
}

impl<'a> Decision<'a> {
    /// From the dataclass's fields in its order, without the origin.
    pub fn new(fields: [Scalar<'a>; 20], origin: [Option<Scalar<'a>>; 3]) -> Self {
        let mut fields = fields.into_iter();
        let mut next = || fields.next().expect("20 fields");
        // a struct expression's fields are evaluated in the order written
        Decision {
            id: next(),
            duplicate_of: next(),
            fingerprint: next(),
            distance: next(),
            similarity: next(),
            exact: next(),
            features: next(),
            namespace: next(),
            detector: next(),
            decided_at: next(),
            revision: next(),
            previous_fingerprint: next(),
            duplicate_of_revision: next(),
            url: next(),
            version: next(),
            origin,
            extraction: next(),
            space: next(),
            k: next(),
            evidence: next(),
            cluster: next(),
        }
    }
}

/// A decision Python writes otherwise than this encoder would (a fingerprint that is not a
/// uint64, a similarity that is not a float, a NaN or an infinity, which json writes as
/// the NaN and Infinity no JSON reader takes): the caller has Python write it.
#[derive(Debug)]
pub struct Unsupported;

/// `, "name": `, the separators json writes before a key of a decision but the first.
macro_rules! key {
    ($name:literal) => {
        concat!(", \"", $name, "\": ").as_bytes()
    };
}

/// Append Decision.to_json's bytes of `d` to `out` (on Unsupported, some of them).
pub fn decision(d: &Decision, out: &mut Vec<u8>) -> Result<(), Unsupported> {
    out.extend_from_slice(b"{\"id\": ");
    scalar(d.id, out)?;
    out.extend_from_slice(key!("decision"));
    out.extend_from_slice(match d.duplicate_of {
        Null => b"\"unique\"",
        _ => b"\"duplicate\"",
    });
    field(key!("duplicate_of"), d.duplicate_of, out)?;
    field(key!("distance"), d.distance, out)?;
    out.extend_from_slice(key!("similarity"));
    match d.similarity {
        Null => out.extend_from_slice(b"null"),
        Float(x) => float(round4(x), out)?,
        _ => return Err(Unsupported), // round() of an int or a bool is another story
    }
    hex(key!("fingerprint"), d.fingerprint, out)?;
    field(key!("exact"), d.exact, out)?;
    // Decision's __post_init__ sets it; an empty one reads as it does there
    let cluster = if d.cluster.truthy() {
        d.cluster
    } else if d.duplicate_of.truthy() {
        d.duplicate_of
    } else {
        d.id
    };
    field(key!("cluster"), cluster, out)?;
    // The optional fields only when set, as to_dict has them
    optional(key!("evidence"), d.evidence, out)?;
    if d.duplicate_of_revision.truthy() {
        field(key!("duplicate_of_revision"), d.duplicate_of_revision, out)?;
    }
    if d.revision.truthy() {
        field(key!("revision"), d.revision, out)?;
        match d.previous_fingerprint {
            Null => field(key!("previous_fingerprint"), Null, out)?,
            fp => hex(key!("previous_fingerprint"), fp, out)?,
        }
    }
    optional(key!("url"), d.url, out)?;
    optional(key!("version"), d.version, out)?;
    for (key, value) in ORIGIN.into_iter().zip(d.origin) {
        if let Some(value) = value {
            out.extend_from_slice(b", \"");
            out.extend_from_slice(key.as_bytes());
            field(b"\": ", value, out)?;
        }
    }
    optional(key!("extraction"), d.extraction, out)?;
    if !matches!(d.space, Null) {
        field(key!("space"), d.space, out)?;
        field(key!("k"), d.k, out)?;
    }
    field(key!("features"), d.features, out)?;
    field(key!("index"), d.namespace, out)?;
    field(key!("detector"), d.detector, out)?;
    field(key!("decided_at"), d.decided_at, out)?;
    out.push(b'}');
    Ok(())
}

fn field(key: &[u8], value: Scalar, out: &mut Vec<u8>) -> Result<(), Unsupported> {
    out.extend_from_slice(key);
    scalar(value, out)
}

fn optional(key: &[u8], value: Scalar, out: &mut Vec<u8>) -> Result<(), Unsupported> {
    match value {
        Null => Ok(()),
        _ => field(key, value, out),
    }
}

/// f"{fp:016x}"
fn hex(key: &[u8], fp: Scalar, out: &mut Vec<u8>) -> Result<(), Unsupported> {
    let Int(fp) = fp else { return Err(Unsupported) };
    let fp = u64::try_from(fp).map_err(|_| Unsupported)?;
    let mut hex = *b"\"0000000000000000\"";
    for (at, digit) in hex[1..17].iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[(fp >> (60 - 4 * at) & 0xF) as usize];
    }
    out.extend_from_slice(key);
    out.extend_from_slice(&hex);
    Ok(())
}

fn scalar(value: Scalar, out: &mut Vec<u8>) -> Result<(), Unsupported> {
    match value {
        Null => out.extend_from_slice(b"null"),
        Scalar::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Int(i) => int(i, out)?,
        Float(x) => float(x, out)?,
        Str(s) => string(s, out),
    }
    Ok(())
}

/// int.__repr__, of the ints a Scalar holds, without the formatting machinery (of i128
/// it divides in 128 bits).
fn int(i: i128, out: &mut Vec<u8>) -> Result<(), Unsupported> {
    let mut n = u64::try_from(i.unsigned_abs()).map_err(|_| Unsupported)?;
    if i < 0 {
        out.push(b'-');
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    Ok(())
}

/// What json (ensure_ascii=False) writes for each byte of a str: 0, the byte itself; else
/// the letter after the backslash of its escape, u for \u00XX.
const ESCAPE: [u8; 256] = {
    let mut table = [0; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[0x08] = b'b';
    table[0x0C] = b'f';
    table
};

/// A JSON string as json writes it with ensure_ascii=False: the characters as they are
/// but for the quote, the backslash and the control characters below U+0020.
fn string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (at, &b) in bytes.iter().enumerate() {
        let escape = ESCAPE[b as usize];
        if escape == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[start..at]);
        if escape == b'u' {
            let hex = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                hex[(b >> 4) as usize],
                hex[(b & 0xF) as usize],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', escape]);
        }
        start = at + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Python's round(x, 4): x rounded to 4 decimals, correctly (ties to even on the exact
/// binary value), as Rust's fixed formatting rounds, and read back.
fn round4(x: f64) -> f64 {
    // from 2^52 on a float has no fraction, and its 4 decimals would be 300 digits long
    if !x.is_finite() || x.abs() >= (1u64 << 52) as f64 {
        return x;
    }
    format!("{x:.4}").parse().expect("a float reads back")
}

/// float.__repr__: the shortest digits that read back as x, laid out as repr lays them
/// out: fixed from 1e-4 up to 1e16, else exponent form.
fn float(x: f64, out: &mut Vec<u8>) -> Result<(), Unsupported> {
    if !x.is_finite() {
        return Err(Unsupported);
    }
    let e = shortest(x);
    let (mantissa, exp) = e.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is an int");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    if !(-4..16).contains(&exp) {
        write!(out, "{sign}{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
            .expect("a Vec takes every write");
        return Ok(());
    }
    let digits = mantissa.replace('.', "").into_bytes();
    out.extend_from_slice(sign.as_bytes());
    if exp < 0 {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-exp - 1) as usize, b'0');
        out.extend_from_slice(&digits);
    } else {
        let whole = exp as usize + 1;
        if digits.len() <= whole {
            out.extend_from_slice(&digits);
            out.resize(out.len() + whole - digits.len(), b'0');
            out.extend_from_slice(b".0");
        } else {
            out.extend_from_slice(&digits[..whole]);
            out.push(b'.');
            out.extend_from_slice(&digits[whole..]);
        }
    }
    Ok(())
}

/// repr's digits of x in {:e}'s form ("-1.25e-3"). Of the shortest digits that read back
/// as x, Rust's {:e} and repr both take the nearest to x, but of two as near (x halfway
/// between them, as 1958182951947437.25 is) Rust takes the larger and repr the even one:
/// x correctly rounded to as many digits, as Rust's exact formatting rounds it.
fn shortest(x: f64) -> String {
    let short = format!("{x:e}");
    let mantissa = short.split_once('e').expect("{:e} has an exponent").0;
    let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len());
    let nearest = format!("{x:.decimals$e}");
    if nearest != short && nearest.parse() == Ok(x) {
        return nearest;
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(x: f64) -> String {
        let mut out = vec![];
        float(x, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_as_python_reprs_them() {
        for (x, r) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (123.456, "123.456"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (-1.2345678901234568e17, "-1.2345678901234568e+17"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (-1958182951947437.2, "-1958182951947437.2"), // halfway: to even, not ...437.3
        ] {
            assert_eq!(repr(x), r);
        }
        assert!(float(f64::NAN, &mut vec![]).is_err());
    }

    #[test]
    fn round4_is_pythons_round() {
        for (x, r) in [
            (0.03125, 0.0312),
            (0.03135, 0.0314),
            (0.99995, 1.0),
            (0.12345, 0.1235),
            (2.00005, 2.0),
            (-0.00001, -0.0),
        ] {
            assert_eq!(round4(x).to_bits(), f64::to_bits(r));
        }
    }

    #[test]
    fn strings_escape_as_json_does() {
        let mut out = vec![];
        string("a\"\\\n\r\t\x08\x0c\x01\x1fé\u{2028}😀\x7f", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001fé\u{2028}😀\x7f\""
        );
    }
}
