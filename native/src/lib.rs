//! neardup's batch kernels: the per-token and per-document work of a fingerprint.
//!
//! Each function computes exactly what the numpy reference computes (detector/tokenize.py,
//! features.py, simhash.py, engine.py, verify.py), bit for bit; tests/test_native.py holds
//! the two together. The character classes come from the interpreter (its regex engine's
//! \w), so both paths agree on any Python and Unicode version. Arrays go back to Python as
//! little-endian bytes, read there with numpy.frombuffer; the work runs without the GIL.
//!
//! This file is the Python glue only: it converts arguments and results and calls the
//! stage modules, which know nothing of Python.

mod features;
mod hashing;
mod html;
mod index;
mod json;
mod nfkc;
mod resp;
mod simhash;
mod sketch;
mod text;

use std::collections::HashMap;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyList, PyString};

use features::{Featurizer, Weights};
use nfkc::Nfkc;
use text::{CaseFolds, Folder};

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

fn invalid(message: &'static str) -> PyErr {
    PyValueError::new_err(message)
}

/// normalize's combining_classes, non_starters, decompositions (lengths, values) and
/// compositions (as triples: first, second, composite).
type NfkcTables<'a> = (&'a [u8], &'a [u8], &'a [u8], &'a [u8], &'a [u8]);

#[pyclass(frozen)]
struct Kernels {
    folder: Folder,
    featurizer: Featurizer,
}

#[pymethods]
impl Kernels {
    /// classes: the tokenizer's uint8 class of every code point (tokenize.char_classes);
    /// safe, folds: normalize.nfkc_safe and casefolds; nfkc: normalize's combining_classes,
    /// non_starters, decompositions and compositions, as bytes (NfkcTables); by_length
    /// or table + unseen: the weights; cjk_n, shingle_n: the feature config; literal_n:
    /// words per shingle of the literal pass.
    #[new]
    #[pyo3(signature = (classes, safe, folds, nfkc, cjk_n, shingle_n, literal_n, by_length=None, table=None, unseen=1.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        classes: &[u8],
        safe: &[u8],
        folds: &[u8],
        nfkc: NfkcTables<'_>,
        cjk_n: usize,
        shingle_n: usize,
        literal_n: usize,
        by_length: Option<Vec<f32>>,
        table: Option<HashMap<Vec<u8>, f32>>,
        unseen: f32,
    ) -> PyResult<Self> {
        let weights = match (by_length, table) {
            (Some(w), None) if !w.is_empty() => Weights::ByLength(w),
            (None, Some(t)) => Weights::Table(t, unseen),
            _ => return Err(invalid("give by_length or table, not both")),
        };
        let (ccc, non_starters, lengths, values, pairs) = nfkc;
        let nfkc = Nfkc::new(safe, ccc, non_starters, lengths, values, pairs).map_err(invalid)?;
        Ok(Kernels {
            folder: Folder::new(folds, nfkc).map_err(invalid)?,
            featurizer: Featurizer::new(classes, weights, cjk_n, shingle_n, literal_n)
                .map_err(invalid)?,
        })
    }

    /// normalize.fold of each text (NFKC, then str.casefold); None for a text with a lone
    /// surrogate or a run of more than 30 non-starters: fold() decides those.
    fn fold<'py>(
        &self,
        py: Python<'py>,
        texts_: &Bound<'py, PyList>,
    ) -> PyResult<Vec<Option<Bound<'py, PyString>>>> {
        let owned: Vec<Bound<'py, PyString>> =
            texts_.iter().map(|t| Ok(t.cast_into::<PyString>()?)).collect::<PyResult<_>>()?;
        let views: Vec<Option<&str>> = owned.iter().map(|t| t.to_str().ok()).collect();
        let folded: Vec<Option<String>> =
            py.detach(|| views.iter().map(|t| t.and_then(|t| self.folder.fold(t))).collect());
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
        let t = py.detach(|| self.featurizer.tokens(&views));
        Ok([
            as_bytes(py, &t.doc),
            as_bytes(py, &t.start),
            as_bytes(py, &t.end),
            as_bytes(py, &t.nospace),
            as_bytes(py, &t.key),
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
        let f = py.detach(|| self.featurizer.features(&views));
        Ok([as_bytes(py, &f.doc), as_bytes(py, &f.hash), as_bytes(py, &f.weight)])
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
        let p = py.detach(|| self.featurizer.prints(&views));
        Ok([
            as_bytes(py, &p.fps),
            as_bytes(py, &p.digests),
            as_bytes(py, &p.sets.values),
            as_bytes(py, &p.sets.bounds),
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
        let s = py.detach(|| self.featurizer.shingle_sets(&views));
        Ok([as_bytes(py, &s.values), as_bytes(py, &s.bounds)])
    }
}

/// verify.jaccard of two sorted sets of distinct uint64 (numpy arrays or any buffer).
#[pyfunction]
fn jaccard(py: Python<'_>, a: PyBuffer<u64>, b: PyBuffer<u64>) -> PyResult<f64> {
    Ok(features::jaccard(&view(py, &a)?, &view(py, &b)?))
}

/// verify.jaccard of one set against each of many: the literal pass over a document's
/// candidates, with one call and no copy of the sets.
#[pyfunction]
fn jaccards(py: Python<'_>, a: PyBuffer<u64>, others: Vec<PyBuffer<u64>>) -> PyResult<Vec<f64>> {
    let a = view(py, &a)?;
    others.iter().map(|b| Ok(features::jaccard(&a, &view(py, b)?))).collect()
}

/// A buffer's items: read in place where numpy laid them out as Rust would (C-contiguous
/// and aligned), else copied. The PyBuffer holds its object and no neardup code writes to
/// an array a kernel reads, so the view stays valid and unchanged while it is used.
fn view<'a, T: pyo3::buffer::Element + Copy>(
    py: Python<'_>,
    buf: &'a PyBuffer<T>,
) -> PyResult<std::borrow::Cow<'a, [T]>> {
    let ptr = buf.buf_ptr().cast::<T>();
    if buf.item_count() == 0 {
        return Ok(std::borrow::Cow::Borrowed(&[]));
    }
    if buf.is_c_contiguous() && ptr.is_aligned() {
        // SAFETY: a contiguous, aligned buffer of item_count T, alive as long as `buf`.
        return Ok(std::borrow::Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(ptr, buf.item_count())
        }));
    }
    Ok(std::borrow::Cow::Owned(buf.to_vec(py)?))
}

/// One memory-index table as memory.py hands it over: keys (uint32 or uint64), members
/// (uint32) and the offsets of its runs (uint32) or None.
type TableArrays<'py> = (Bound<'py, PyAny>, PyBuffer<u32>, Option<PyBuffer<u32>>);

enum KeyBuffer {
    U32(PyBuffer<u32>),
    U64(PyBuffer<u64>),
}

/// memory.py's _near (index::near): for each query, the distinct positions of its
/// fingerprints within k and their distances, as bytes (bounds int64, positions uint32,
/// distances uint8).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn near<'py>(
    py: Python<'py>,
    queries: PyBuffer<u64>,
    fps: PyBuffer<u64>,
    tables: Vec<TableArrays<'py>>,
    which: Vec<usize>,
    probes: PyBuffer<u64>,
    merged: usize,
    k: u32,
    max_bucket: usize,
) -> PyResult<[Bound<'py, PyBytes>; 3]> {
    let keys: Vec<KeyBuffer> = tables
        .iter()
        .map(|(keys, _, _)| match PyBuffer::<u32>::get(keys) {
            Ok(k) => Ok(KeyBuffer::U32(k)),
            Err(_) => Ok(KeyBuffer::U64(PyBuffer::<u64>::get(keys)?)),
        })
        .collect::<PyResult<_>>()?;
    let keys: Vec<index::Keys<'_>> = keys
        .iter()
        .map(|k| {
            Ok(match k {
                KeyBuffer::U32(b) => index::Keys::U32(view_in_place(py, b)?),
                KeyBuffer::U64(b) => index::Keys::U64(view_in_place(py, b)?),
            })
        })
        .collect::<PyResult<_>>()?;
    let mut views = Vec::with_capacity(tables.len());
    for ((_, members, starts), keys) in tables.iter().zip(keys) {
        views.push(index::Table {
            keys,
            members: view_in_place(py, members)?,
            starts: starts.as_ref().map(|s| view_in_place(py, s)).transpose()?,
        });
    }
    let (queries, fps, probes) = (view(py, &queries)?, view(py, &fps)?, view(py, &probes)?);
    let found = py
        .detach(|| index::near(&queries, &fps, &views, &which, &probes, merged, k, max_bucket))
        .map_err(invalid)?;
    Ok([
        as_bytes(py, &found.bounds),
        as_bytes(py, &found.positions),
        as_bytes(py, &found.distances),
    ])
}

/// view() of an index's table, which must not be copied at every lookup: a table that is
/// not contiguous and aligned is refused.
fn view_in_place<'a, T: pyo3::buffer::Element + Copy>(
    py: Python<'_>,
    buf: &'a PyBuffer<T>,
) -> PyResult<&'a [T]> {
    match view(py, buf)? {
        std::borrow::Cow::Borrowed(items) => Ok(items),
        std::borrow::Cow::Owned(_) => Err(invalid("an index table must be contiguous and aligned")),
    }
}

/// sketch.sketches: the b-bit one-permutation MinHash of each shingle set (values[bounds[d]
/// .. bounds[d + 1]]), as bytes.
#[pyfunction]
fn sketches<'py>(
    py: Python<'py>,
    values: PyBuffer<u64>,
    bounds: PyBuffer<i64>,
    log_bins: u32,
    bits: u32,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let (values, bounds) = (values.to_vec(py)?, bounds.to_vec(py)?);
    let packed = py.detach(|| sketch::sketches(&values, &bounds, log_bins, bits));
    Ok(packed.map_err(invalid)?.iter().map(|s| PyBytes::new(py, s)).collect())
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
    let names = index::bucket_names(&prefixes, &which, &tables, &keys).map_err(invalid)?;
    Ok(names.iter().map(|n| PyBytes::new(py, n)).collect())
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

/// records.py's Decision.encode_many: each decision's JSON as bytes, from its fields (a
/// tuple of records._JSON_FIELDS: json::Decision::new's, then the origin); None for one
/// left to Python: a value of another type than json::Scalar's (a subclass too: numpy's,
/// an enum), an int beyond 64 bits, a str with a lone surrogate, a NaN or an infinity.
#[pyfunction]
fn decision_json<'py>(
    py: Python<'py>,
    decisions: Vec<Bound<'py, pyo3::types::PyTuple>>,
) -> Vec<Option<Bound<'py, PyBytes>>> {
    let mut out = Vec::with_capacity(1024);
    let mut encode = |fields: &Bound<'py, pyo3::types::PyTuple>| {
        out.clear();
        if fields.len() != 21 {
            return None; // a Decision of a field more (or less) than json.rs knows
        }
        let mut items = fields.iter_borrowed();
        let mut scalars = [json::Scalar::Null; 20];
        for scalar in &mut scalars {
            *scalar = json_scalar(items.next()?)?;
        }
        let origin = items.next()?;
        let origin = if origin.is_none() {
            [None, None, None]
        } else {
            let origin = origin.cast_exact::<pyo3::types::PyDict>().ok()?;
            json::ORIGIN.map(|key| origin.get_item(key).ok().flatten())
        };
        let mut values = [None; 3];
        for (value, held) in values.iter_mut().zip(&origin) {
            if let Some(held) = held {
                *value = Some(json_scalar(held.as_borrowed())?);
            }
        }
        json::decision(&json::Decision::new(scalars, values), &mut out).ok()?;
        Some(PyBytes::new(py, &out))
    };
    decisions.iter().map(&mut encode).collect()
}

fn json_scalar<'a>(value: Borrowed<'a, '_, PyAny>) -> Option<json::Scalar<'a>> {
    use json::Scalar;
    Some(if value.is_none() {
        Scalar::Null
    } else if value.is_exact_instance_of::<PyString>() {
        Scalar::Str(value.extract().ok()?)
    } else if value.is_exact_instance_of::<PyInt>() {
        // uint64 first: a fingerprint is one, and no int of a decision is negative
        Scalar::Int(match value.extract::<u64>() {
            Ok(u) => u.into(),
            Err(_) => value.extract::<i64>().ok()?.into(),
        })
    } else if value.is_exact_instance_of::<PyFloat>() {
        Scalar::Float(value.extract().ok()?)
    } else if value.is_exact_instance_of::<PyBool>() {
        Scalar::Bool(value.is_truthy().ok()?)
    } else {
        return None;
    })
}

/// extract._walk over an HTML page's body as lxml serializes it (html.rs).
#[pyclass(frozen)]
struct Pages {
    walker: html::Walker,
}

#[pymethods]
impl Pages {
    /// classes: extract.page_classes (\w, isspace, \d bits of every code point); folds:
    /// normalize.casefolds as int32 bytes; block, container, skipped: the walk's element
    /// names; max_elements: extract.MAX_ELEMENTS; stamp_words: extract._STAMP_WORDS.
    #[new]
    fn new(
        classes: &[u8],
        folds: &[u8],
        block: Vec<String>,
        container: Vec<String>,
        skipped: Vec<String>,
        max_elements: usize,
        stamp_words: u32,
    ) -> PyResult<Self> {
        let mut kinds = html::Kinds::default();
        for (names, kind) in
            [(block, html::BLOCK), (container, html::CONTAINER), (skipped, html::SKIPPED)]
        {
            for name in names {
                *kinds.entry(name.into_bytes()).or_default() |= kind;
            }
        }
        let folds = CaseFolds::new(folds).map_err(invalid)?;
        let walker = html::Walker::new(classes.to_vec(), folds, kinds, max_elements, stamp_words)
            .ok_or_else(|| invalid("Pages: a table of the wrong size"))?;
        Ok(Pages { walker })
    }

    /// templates.pair_bit of a URL's key and each line key.
    #[staticmethod]
    fn pair_bits(url: u64, keys: Vec<u64>, log2: u32) -> PyResult<Vec<u64>> {
        if !(1..=64).contains(&log2) {
            return Err(invalid("pair_bits: log2 must be in 1..=64"));
        }
        Ok(html::Walker::pair_bits(url, &keys, log2))
    }

    /// extract._tagless_words of drop_comments_scripts_styles(page) as UTF-8; None where
    /// the bytes are not UTF-8 (a lone surrogate).
    fn tagless_words(&self, py: Python<'_>, text: &[u8]) -> Option<u64> {
        py.detach(|| self.walker.tagless_words(text))
    }

    /// The walk of one body: None where the text is not what the walk expects (the caller
    /// walks the tree), "too_many_elements", or the Page's columns: (the lines' texts
    /// joined by newlines, words, link words, keys, stamped, containers as (start, end)
    /// pairs).
    fn walk<'py>(&self, py: Python<'py>, xml: &[u8]) -> PyResult<Option<Bound<'py, PyAny>>> {
        let walked = py.detach(|| self.walker.walk(xml));
        Ok(match walked {
            html::Walked::Unsupported => None,
            html::Walked::TooManyElements => {
                Some(PyString::new(py, "too_many_elements").into_any())
            }
            html::Walked::Page { lines, containers } => {
                let text = lines.iter().map(|l| l.text.as_str()).collect::<Vec<_>>().join("\n");
                let words: Vec<u32> = lines.iter().map(|l| l.words).collect();
                let links: Vec<u32> = lines.iter().map(|l| l.link_words).collect();
                let keys: Vec<u64> = lines.iter().map(|l| l.key).collect();
                let stamped: Vec<bool> = lines.iter().map(|l| l.stamped).collect();
                let parts = (PyString::new(py, &text), words, links, keys, stamped, containers);
                Some(parts.into_pyobject(py)?.into_any())
            }
        })
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Kernels>()?;
    m.add_class::<Pages>()?;
    m.add_function(wrap_pyfunction!(jaccard, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_names, m)?)?;
    m.add_function(wrap_pyfunction!(sketches, m)?)?;
    m.add_function(wrap_pyfunction!(resp_commands, m)?)?;
    m.add_function(wrap_pyfunction!(decision_json, m)?)?;
    m.add_function(wrap_pyfunction!(jaccards, m)?)?;
    m.add_function(wrap_pyfunction!(near, m)?)?;
    Ok(())
}
