//! Readers for real data: IDX (the MNIST format, gzipped or not), CSV of
//! numbers, and a character tokenizer for text. Bad files are errors, never
//! panics: every size is checked before anything is allocated or indexed.

use crate::{Error, Result, Tensor};
use std::io::Read;
use std::path::Path;

/// The most a gzipped file may inflate to (guards against gzip bombs).
const MAX_INFLATED: u64 = 1 << 31;

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}

fn format_err(path: &str, msg: impl std::fmt::Display) -> Error {
    Error::Format(format!("{path}: {msg}"))
}

/// Reads an IDX file (`.gz` or plain, detected from the bytes) into a tensor
/// of its shape: u8 data as `U8`, signed integers as `I64`, floats as F32/F64.
///
/// ```no_run
/// let images = tapir_runtime::data::read_idx("data/digits-images-idx3-ubyte").unwrap();
/// assert_eq!(images.shape(), &[1797, 8, 8]);
/// ```
pub fn read_idx(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let bytes = read_file(path)?;
    parse_idx(&bytes).map_err(|e| format_err(&path.display().to_string(), e))
}

/// [`read_idx`] on bytes already in memory.
pub fn parse_idx(bytes: &[u8]) -> std::result::Result<Tensor, String> {
    let inflated;
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = vec![];
        flate2::read::GzDecoder::new(bytes)
            .take(MAX_INFLATED + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("bad gzip data ({e})"))?;
        if out.len() as u64 > MAX_INFLATED {
            return Err(format!("inflates to more than {MAX_INFLATED} bytes"));
        }
        inflated = out;
        &inflated[..]
    } else {
        bytes
    };
    if bytes.len() < 4 || bytes[0] != 0 || bytes[1] != 0 {
        return Err("not an IDX file (it must start with two zero bytes)".into());
    }
    let (code, ndim) = (bytes[2], bytes[3] as usize);
    let width = match code {
        0x08 | 0x09 => 1,
        0x0B => 2,
        0x0C | 0x0D => 4,
        0x0E => 8,
        other => return Err(format!("unknown IDX element type 0x{other:02x}")),
    };
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(format!(
            "truncated header: {ndim} dims need {header} bytes, the file has {}",
            bytes.len()
        ));
    }
    let dims: Vec<usize> = (0..ndim)
        .map(|i| {
            u32::from_be_bytes([
                bytes[4 + 4 * i],
                bytes[5 + 4 * i],
                bytes[6 + 4 * i],
                bytes[7 + 4 * i],
            ]) as usize
        })
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or("the dims' product overflows")?;
    let data = &bytes[header..];
    let need = count.checked_mul(width).ok_or("the data size overflows")?;
    if data.len() != need {
        return Err(format!(
            "dims {dims:?} of {width}-byte elements need {need} data bytes, the file has {}",
            data.len()
        ));
    }
    let be = |c: &[u8]| -> [u8; 8] {
        let mut b = [0u8; 8];
        b[8 - c.len()..].copy_from_slice(c);
        b
    };
    Ok(match code {
        0x08 => Tensor::from_vec(data.to_vec(), &dims),
        0x09 => Tensor::from_vec(data.iter().map(|&b| b as i8 as i64).collect(), &dims),
        0x0B => Tensor::from_vec(
            data.chunks_exact(2)
                .map(|c| i16::from_be_bytes([c[0], c[1]]) as i64)
                .collect(),
            &dims,
        ),
        0x0C => Tensor::from_vec(
            data.chunks_exact(4)
                .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            &dims,
        ),
        0x0D => Tensor::from_vec(
            data.chunks_exact(4)
                .map(|c| f32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            &dims,
        ),
        _ => Tensor::from_vec(
            data.chunks_exact(8)
                .map(|c| f64::from_be_bytes(be(c)))
                .collect(),
            &dims,
        ),
    })
}

/// Reads a CSV of numbers into an f32 tensor `[rows, columns]`; with
/// `header`, the first line gives the column names. Blank lines are skipped.
///
/// ```
/// let path = std::env::temp_dir().join("tapir_doc.csv");
/// std::fs::write(&path, "a,b\n1,2\n3,4.5\n").unwrap();
/// let (names, t) = tapir_runtime::data::read_csv(&path, true).unwrap();
/// assert_eq!(names, ["a", "b"]);
/// assert_eq!(t.to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.5]);
/// ```
pub fn read_csv(path: impl AsRef<Path>, header: bool) -> Result<(Vec<String>, Tensor)> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let text =
        String::from_utf8(read_file(path)?).map_err(|_| format_err(&name, "not UTF-8 text"))?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let names: Vec<String> = if header {
        lines
            .next()
            .map(|(_, l)| l.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default()
    } else {
        vec![]
    };
    let mut values = vec![];
    let mut width = None;
    let mut rows = 0;
    for (i, line) in lines {
        let row: Vec<&str> = line.split(',').collect();
        let w = *width.get_or_insert(row.len());
        if row.len() != w {
            return Err(format_err(
                &name,
                format!("line {}: {} columns, expected {w}", i + 1, row.len()),
            ));
        }
        for (j, cell) in row.iter().enumerate() {
            let v: f32 = cell.trim().parse().map_err(|_| {
                format_err(
                    &name,
                    format!(
                        "line {}, column {}: `{}` is not a number",
                        i + 1,
                        j + 1,
                        cell.trim()
                    ),
                )
            })?;
            values.push(v);
        }
        rows += 1;
    }
    let width = width.unwrap_or(names.len());
    Ok((names, Tensor::from_vec(values, &[rows, width])))
}

/// Characters to token ids and back: the vocabulary is the text's distinct
/// characters, sorted.
///
/// ```
/// use tapir_runtime::data::CharTokenizer;
/// let tok = CharTokenizer::from_text("hello");
/// assert_eq!(tok.vocab_size(), 4);
/// let ids = tok.encode("hell").unwrap();
/// assert_eq!(ids, vec![1, 0, 2, 2]);
/// assert_eq!(tok.decode(&ids), "hell");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CharTokenizer {
    chars: Vec<char>,
}

impl CharTokenizer {
    /// A tokenizer over the characters of `text` (sorted, as the vocabulary).
    pub fn from_text(text: &str) -> CharTokenizer {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        CharTokenizer { chars }
    }

    /// Number of distinct characters.
    pub fn vocab_size(&self) -> usize {
        self.chars.len()
    }

    /// The ids of `text`; a character outside the vocabulary is an error.
    pub fn encode(&self, text: &str) -> Result<Vec<i64>> {
        text.chars()
            .map(|c| {
                self.chars.binary_search(&c).map(|i| i as i64).map_err(|_| {
                    Error::Format(format!("CharTokenizer: {c:?} is not in the vocabulary"))
                })
            })
            .collect()
    }

    /// The text of `ids`; ids outside the vocabulary become `?`.
    pub fn decode(&self, ids: &[i64]) -> String {
        ids.iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.chars.get(i))
                    .copied()
                    .unwrap_or('?')
            })
            .collect()
    }
}
