//! The shared file formats (DESIGN.md §3), also read and written by the Zoltan peer driver.
//!
//! * **Point file `ZPT1`**, little endian: `b"ZPT1"`, `u32 dim`, `u32 has_weights` (0 or 1),
//!   `u32 0`, `u64 n`, `f64 coords[n·dim]` (interleaved), then `f64 weights[n]` if
//!   `has_weights`.
//! * **Sizes file**: text, one relative part size per line (blank lines and lines starting
//!   with `#` are skipped); the partitioner normalises them.
//! * **Parts file**: one little-endian `u32` part id per point.
//!
//! A rank that holds a slice of the points reads only that slice: [`read_point_header`], then
//! [`read_points_range`] (which seeks to the slice's coordinates and weights).
//!
//! Errors name the file and the byte offset or line of the problem.
//!
//! Limits, checked before anything is allocated: a point file holds at most [`MAX_POINTS`]
//! points, a sizes file at most [`MAX_PARTS`] sizes in at most [`MAX_SIZES_FILE_BYTES`].

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Most points a point file may hold (2^27 = 134,217,728: 4.3 GB of 3-D weighted points
/// and about as much again for partitioning them, well inside a 24 GiB host).
pub const MAX_POINTS: u64 = 1 << 27;
/// Most parts a sizes file (and the commands' `--parts`) may ask for (2^20 = 1,048,576).
pub const MAX_PARTS: usize = 1 << 20;
/// Largest sizes file read (16 MiB): a larger or endless file is refused unread.
pub const MAX_SIZES_FILE_BYTES: u64 = 16 << 20;

/// A problem reading or writing one of the files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The operating system refused (missing file, permissions, disk full).
    #[error("{path}: {error}")]
    Os {
        /// The file.
        path: PathBuf,
        /// The underlying error (printed in the message, so not also a `source()`: a
        /// report that walks the chain would print it twice).
        error: std::io::Error,
    },
    /// The file's content does not follow the format.
    #[error("{path}: byte {offset}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Byte offset where the problem is.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// The operating system refused a read or seek at a known place.
    #[error("{path}: byte {offset}: {error}")]
    OsAt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the read or seek.
        offset: u64,
        /// The underlying error (in the message, not a `source()`; see [`IoError::Os`]).
        error: std::io::Error,
    },
    /// Points were asked for beyond the end of a point file.
    #[error("{path}: points {start}..{end} requested, but the file holds {n} points")]
    Range {
        /// The file.
        path: PathBuf,
        /// First point asked for.
        start: u64,
        /// One past the last point asked for.
        end: u64,
        /// Points in the file.
        n: u64,
    },
    /// A line of a text file does not parse.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The file.
        path: PathBuf,
        /// Line number, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Points read from (or to be written to) a `ZPT1` file.
#[derive(Debug, Clone, PartialEq)]
pub struct PointSet {
    /// Coordinates per point (1, 2 or 3 in the format; the partitioner takes 2 or 3).
    pub dim: usize,
    /// Interleaved coordinates, `n·dim` values.
    pub coords: Vec<f64>,
    /// One weight per point, if the file has weights.
    pub weights: Option<Vec<f64>>,
}

impl PointSet {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.coords.len() / self.dim.max(1)
    }
    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.coords.is_empty()
    }
}

fn os(path: &Path) -> impl FnOnce(std::io::Error) -> IoError + '_ {
    move |error| IoError::Os {
        path: path.to_path_buf(),
        error,
    }
}

/// Writes `path` whole or not at all (`part_api::file::write_atomic`).
fn atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), IoError> {
    part_api::file::write_atomic(path, write).map_err(|e| IoError::Os {
        path: e.path,
        error: e.source,
    })
}

fn os_at(path: &Path, offset: u64) -> impl FnOnce(std::io::Error) -> IoError + '_ {
    move |error| IoError::OsAt {
        path: path.to_path_buf(),
        offset,
        error,
    }
}

fn format_err(path: &Path, offset: u64, message: impl Into<String>) -> IoError {
    IoError::Format {
        path: path.to_path_buf(),
        offset,
        message: message.into(),
    }
}

const HEADER: u64 = 24;

/// What a `ZPT1` header says, checked against the file's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointHeader {
    /// Coordinates per point (1, 2 or 3).
    pub dim: usize,
    /// Whether the file holds one weight per point after the coordinates.
    pub has_weights: bool,
    /// Number of points in the file.
    pub n: u64,
}

impl PointHeader {
    /// Byte offset of point `i`'s first coordinate.
    fn coord_offset(&self, i: u64) -> u64 {
        HEADER + i * self.dim as u64 * 8
    }
    /// Byte offset of point `i`'s weight (if the file has weights).
    fn weight_offset(&self, i: u64) -> u64 {
        self.coord_offset(self.n) + i * 8
    }
}

/// Reads a `ZPT1` point file.
pub fn read_points(path: impl AsRef<Path>) -> Result<PointSet, IoError> {
    let path = path.as_ref();
    let (mut f, head) = open_points(path)?;
    read_range(path, &mut f, &head, 0..head.n)
}

/// Reads and checks the header of a `ZPT1` point file (magic, fields, and that the file's
/// length matches the point count), without reading the points.
pub fn read_point_header(path: impl AsRef<Path>) -> Result<PointHeader, IoError> {
    let path = path.as_ref();
    open_points(path).map(|(_, head)| head)
}

/// Reads points `range` (indices `start..end` of the file's `n`) of a `ZPT1` point file,
/// seeking to them: a rank that holds a slice of the points reads only its slice (see
/// `part_api::block_range`). The header is checked as by [`read_points`]; a range beyond
/// the file's points is an error naming the file.
pub fn read_points_range(
    path: impl AsRef<Path>,
    range: std::ops::Range<u64>,
) -> Result<PointSet, IoError> {
    let path = path.as_ref();
    let (mut f, head) = open_points(path)?;
    if range.start > range.end || range.end > head.n {
        return Err(IoError::Range {
            path: path.to_path_buf(),
            start: range.start,
            end: range.end,
            n: head.n,
        });
    }
    read_range(path, &mut f, &head, range)
}

/// Opens a point file and checks its header against its length.
fn open_points(path: &Path) -> Result<(File, PointHeader), IoError> {
    let mut f = File::open(path).map_err(os(path))?;
    let mut head = [0u8; HEADER as usize];
    let got = read_full(&mut f, &mut head).map_err(os_at(path, 0))?;
    if got < 4 || &head[..4] != b"ZPT1" {
        return Err(format_err(
            path,
            0,
            format!("not a ZPT1 point file (magic {:?})", &head[..got.min(4)]),
        ));
    }
    if got < HEADER as usize {
        return Err(format_err(
            path,
            got as u64,
            format!("header truncated: {got} of {HEADER} bytes"),
        ));
    }
    let u32_at = |o: usize| u32::from_le_bytes(head[o..o + 4].try_into().expect("4 bytes"));
    let (dim, has_w, reserved) = (u32_at(4), u32_at(8), u32_at(12));
    let n = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
    if !(1..=3).contains(&dim) {
        return Err(format_err(
            path,
            4,
            format!("dim is {dim}, expected 1, 2 or 3"),
        ));
    }
    if has_w > 1 {
        return Err(format_err(
            path,
            8,
            format!("has_weights is {has_w}, expected 0 or 1"),
        ));
    }
    if reserved != 0 {
        return Err(format_err(
            path,
            12,
            format!("reserved field is {reserved}, expected 0"),
        ));
    }
    if n > MAX_POINTS {
        return Err(format_err(
            path,
            16,
            format!("{n} points: over the limit of {MAX_POINTS} points of a point file"),
        ));
    }
    let values = n
        .checked_mul(u64::from(dim) + u64::from(has_w))
        .filter(|v| v.checked_mul(8).is_some_and(|b| b <= isize::MAX as u64))
        .ok_or_else(|| format_err(path, 16, format!("point count {n} is too large")))?;
    let size = f.metadata().map_err(os(path))?.len();
    let expected = HEADER + values * 8;
    if size < expected {
        return Err(format_err(
            path,
            size,
            format!(
                "truncated: {n} points of dim {dim}{} need {expected} bytes, file has {size}",
                if has_w == 1 { " with weights" } else { "" }
            ),
        ));
    }
    if size > expected {
        return Err(format_err(
            path,
            expected,
            format!("{} unexpected bytes after the data", size - expected),
        ));
    }
    let head = PointHeader {
        dim: dim as usize,
        has_weights: has_w == 1,
        n,
    };
    Ok((f, head))
}

/// Reads points `range` (within `0..head.n`) of an opened, checked point file.
fn read_range(
    path: &Path,
    f: &mut File,
    head: &PointHeader,
    range: std::ops::Range<u64>,
) -> Result<PointSet, IoError> {
    let coords = read_f64s_at(
        path,
        f,
        head.coord_offset(range.start),
        (range.end - range.start) * head.dim as u64,
    )?;
    let weights = if head.has_weights {
        Some(read_f64s_at(
            path,
            f,
            head.weight_offset(range.start),
            range.end - range.start,
        )?)
    } else {
        None
    };
    Ok(PointSet {
        dim: head.dim,
        coords,
        weights,
    })
}

/// Reads `count` little-endian f64 starting at byte `offset`.
fn read_f64s_at(path: &Path, f: &mut File, offset: u64, count: u64) -> Result<Vec<f64>, IoError> {
    f.seek(SeekFrom::Start(offset))
        .map_err(os_at(path, offset))?;
    // The header check bounds count·8 by the file's length.
    let mut bytes = vec![0u8; (count * 8) as usize];
    let got = read_full(f, &mut bytes).map_err(os_at(path, offset))?;
    if got < bytes.len() {
        return Err(format_err(
            path,
            offset + got as u64,
            format!(
                "file shrank while reading: {} of {} bytes",
                got,
                bytes.len()
            ),
        ));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect())
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(m) => got += m,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Writes a `ZPT1` point file (`coords.len()` must be a multiple of `dim`, `weights` one per
/// point; a violation is a programming error and panics).
pub fn write_points(
    path: impl AsRef<Path>,
    dim: usize,
    coords: &[f64],
    weights: Option<&[f64]>,
) -> Result<(), IoError> {
    let path = path.as_ref();
    assert!(
        (1..=3).contains(&dim) && coords.len().is_multiple_of(dim),
        "write_points: bad dim or coords"
    );
    let n = coords.len() / dim;
    if let Some(w) = weights {
        assert_eq!(w.len(), n, "write_points: one weight per point");
    }
    let mut head = Vec::with_capacity(HEADER as usize);
    head.extend_from_slice(b"ZPT1");
    head.extend_from_slice(&(dim as u32).to_le_bytes());
    head.extend_from_slice(&u32::from(weights.is_some()).to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    head.extend_from_slice(&(n as u64).to_le_bytes());
    atomic(path, |out| {
        out.write_all(&head)?;
        for v in coords.iter().chain(weights.unwrap_or(&[])) {
            out.write_all(&v.to_le_bytes())?;
        }
        Ok(())
    })
}

/// Reads a sizes file: one finite, non-negative relative size per line; at most
/// [`MAX_PARTS`] sizes in at most [`MAX_SIZES_FILE_BYTES`].
pub fn read_sizes(path: impl AsRef<Path>) -> Result<Vec<f64>, IoError> {
    let path = path.as_ref();
    let bytes = part_api::file::read_bounded(path, MAX_SIZES_FILE_BYTES, "a sizes file")
        .map_err(os(path))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to() as u64;
        format_err(path, at, "not UTF-8 text")
    })?;
    let mut sizes = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |message: String| IoError::Line {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let v: f64 = line
            .parse()
            .map_err(|_| err(format!("`{line}` is not a number")))?;
        if !(v.is_finite() && v >= 0.0) {
            return Err(err(format!("size {v} must be finite and >= 0")));
        }
        if sizes.len() == MAX_PARTS {
            return Err(err(format!("more than the limit of {MAX_PARTS} parts")));
        }
        sizes.push(v);
    }
    if sizes.is_empty() {
        return Err(IoError::Line {
            path: path.to_path_buf(),
            line: 1,
            message: "no sizes in file".into(),
        });
    }
    Ok(sizes)
}

/// Writes a sizes file, one size per line.
pub fn write_sizes(path: impl AsRef<Path>, sizes: &[f64]) -> Result<(), IoError> {
    let path = path.as_ref();
    let text: String = sizes.iter().map(|s| format!("{s:?}\n")).collect();
    atomic(path, |w| w.write_all(text.as_bytes()))
}

/// Reads a parts file (one little-endian `u32` per point).
pub fn read_parts(path: impl AsRef<Path>) -> Result<Vec<u32>, IoError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(os(path))?;
    if bytes.len() % 4 != 0 {
        let at = (bytes.len() / 4 * 4) as u64;
        return Err(format_err(
            path,
            at,
            format!("length {} is not a multiple of 4", bytes.len()),
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect())
}

/// Writes a parts file.
pub fn write_parts(path: impl AsRef<Path>, parts: &[u32]) -> Result<(), IoError> {
    let path = path.as_ref();
    atomic(path, |w| {
        for p in parts {
            w.write_all(&p.to_le_bytes())?;
        }
        Ok(())
    })
}
