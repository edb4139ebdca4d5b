//! Output files that are whole or absent: [`write_atomic`] writes a file beside its target
//! and renames it into place, so a reader (or a crash, a full disk, `ulimit -f`) never sees a
//! half-written file under the target's name; [`check_writable`] tries a path before a long
//! run, so a bad output path fails in the first second rather than at the end;
//! [`read_bounded`] reads an input file whole up to a documented limit, so that `/dev/zero`
//! or a runaway file given as input is refused instead of filling memory.
//!
//! ```
//! use std::io::Write;
//! let dir = std::env::temp_dir().join(format!("part-api-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let target = dir.join("parts.txt");
//! part_api::file::check_writable(&target)?;
//! part_api::file::write_atomic(&target, |w| w.write_all(b"0\n1\n"))?;
//! assert_eq!(std::fs::read_to_string(&target).unwrap(), "0\n1\n");
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), part_api::file::WriteError>(())
//! ```

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writing an output file failed; names the file the caller asked for.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct WriteError {
    /// The target file.
    pub path: PathBuf,
    /// What the system said.
    #[source]
    pub source: std::io::Error,
}

impl WriteError {
    fn at(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
        move |source| WriteError {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Writes `path` whole or not at all: `write` fills a temporary file in the same directory
/// (`.NAME.tmp.PID.N`), which is flushed, synced and renamed onto `path`. On any error
/// (from `write` or from the system) the temporary file is removed, `path` is left as it was,
/// and the error names `path`. A file that is replaced keeps its permissions (mode bits).
///
/// A target that exists and is not a regular file (`/dev/stdout`, `/dev/null`, a FIFO) is
/// written in place: there is nothing to rename onto. A symbolic link is followed, and its
/// target replaced.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let err = WriteError::at(path);
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let mut w = BufWriter::new(OpenOptions::new().write(true).open(path).map_err(err)?);
        return write(&mut w)
            .and_then(|()| w.flush())
            .map_err(WriteError::at(path));
    }
    let real = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(err)?,
        _ => path.to_path_buf(),
    };
    let (tmp, file) = create_beside(&real).map_err(WriteError::at(path))?;
    let filled = std::fs::metadata(&real)
        .map_or(Ok(()), |old| file.set_permissions(old.permissions()))
        .and_then(|()| fill(file, write))
        .and_then(|()| std::fs::rename(&tmp, &real));
    if let Err(e) = filled {
        let _ = std::fs::remove_file(&tmp);
        return Err(WriteError::at(path)(e));
    }
    // The rename is durable once the directory is synced; a failure here loses nothing
    // that a reader could see, so it is not an error.
    if let Ok(d) = File::open(parent(&real)) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `bytes` to `path` with [`write_atomic`].
pub fn write_atomic_bytes(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), WriteError> {
    write_atomic(path, |w| w.write_all(bytes.as_ref()))
}

/// Checks that `path` can be written, without touching it: its directory exists and a file
/// can be created there (one is created and removed), or, for a path that exists and is
/// not a regular file (`/dev/null`), that it opens for writing. A directory is refused.
pub fn check_writable(path: &Path) -> Result<(), WriteError> {
    let err = WriteError::at(path);
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(err(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "it is a directory",
        ))),
        Ok(m) if !m.is_file() => OpenOptions::new()
            .write(true)
            .open(path)
            .map(drop)
            .map_err(err),
        _ => {
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            let (tmp, file) = create_beside(&real).map_err(err)?;
            drop(file);
            std::fs::remove_file(&tmp).map_err(WriteError::at(path))
        }
    }
}

/// Reads the whole file `path` if it holds at most `limit` bytes; a larger file (or an endless
/// one: `/dev/zero`, a FIFO) is refused after reading `limit + 1` bytes, with an error of kind
/// `InvalidData` saying `larger than the limit of N bytes for WHAT` (`what`: "a machine
/// file", "a sizes file"...). The caller's error names the path. Nothing is allocated beyond
/// `min(limit, file length) + 1` bytes.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("part-api-read-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let f = dir.join("sizes.txt");
/// std::fs::write(&f, "1\n2\n").unwrap();
/// assert_eq!(part_api::file::read_bounded(&f, 4, "a sizes file").unwrap(), b"1\n2\n");
/// let e = part_api::file::read_bounded(&f, 3, "a sizes file").unwrap_err();
/// assert_eq!(e.to_string(), "larger than the limit of 3 bytes for a sizes file");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = File::open(path)?;
    let hint = file.metadata().map_or(0, |m| m.len()).min(limit);
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than the limit of {limit} bytes for {what}"),
        ));
    }
    Ok(bytes)
}

/// The directory of `path` (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Creates a new, uniquely named temporary file beside `path`.
fn create_beside(path: &Path) -> std::io::Result<(PathBuf, File)> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name in the path")
    })?;
    let n = SERIAL.fetch_add(1, Ordering::Relaxed);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp.{}.{n}", std::process::id()));
    let tmp = parent(path).join(tmp_name);
    let file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    Ok((tmp, file))
}

/// Runs `write` on a buffered `file`, then flushes and syncs it.
fn fill(
    file: File,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut w = BufWriter::new(file);
    write(&mut w)?;
    let file = w
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("part-api-file-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failing_writer_leaves_the_target_untouched_and_no_temporary_file() {
        let d = scratch("fail");
        let target = d.join("parts.bin");
        std::fs::write(&target, "old whole content").unwrap();
        let e = write_atomic(&target, |w| {
            w.write_all(&[7u8; 100_000])?;
            Err(std::io::Error::other("disk full midway"))
        })
        .unwrap_err();
        assert_eq!(e.path, target);
        assert!(e.to_string().contains("parts.bin"), "{e}");
        assert_eq!(e.source.to_string(), "disk full midway");
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "old whole content"
        );
        assert_eq!(entries(&d), ["parts.bin"]);
        // A new target stays absent.
        let fresh = d.join("fresh.json");
        write_atomic(&fresh, |_| Err(std::io::Error::other("no"))).unwrap_err();
        assert!(!fresh.exists());
        assert_eq!(entries(&d), ["parts.bin"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_successful_write_replaces_the_target_and_leaves_nothing_else() {
        let d = scratch("ok");
        let target = d.join("out.svg");
        std::fs::write(&target, "a much longer old content than the new one").unwrap();
        write_atomic_bytes(&target, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(entries(&d), ["out.svg"]);
        // Through a symbolic link: the link stays, its target is replaced.
        let link = d.join("link.svg");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomic_bytes(&link, "via link").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "via link");
        assert_eq!(entries(&d), ["link.svg", "out.svg"]);
        // A rewritten file keeps its mode.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic_bytes(&target, "mode kept").unwrap();
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn read_bounded_refuses_endless_and_oversized_files() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, "a machine file").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            e.to_string().contains("1048576 bytes for a machine file"),
            "{e}"
        );
        let e = read_bounded(Path::new("/no/such/file"), 10, "x").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(
            read_bounded(Path::new("/dev/null"), 0, "x")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn devices_are_written_in_place() {
        write_atomic_bytes(Path::new("/dev/null"), "gone").unwrap();
        check_writable(Path::new("/dev/null")).unwrap();
        let e = write_atomic_bytes(Path::new("/dev/full"), vec![1u8; 1 << 16]).unwrap_err();
        assert_eq!(e.to_string(), "cannot write /dev/full");
        assert_eq!(e.source.kind(), std::io::ErrorKind::StorageFull);
    }

    #[test]
    fn check_writable_refuses_missing_directories_and_directories_and_leaves_nothing() {
        let d = scratch("check");
        let missing = d.join("no/such/dir/x.json");
        let e = check_writable(&missing).unwrap_err();
        assert_eq!(e.path, missing);
        assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound);
        let e = check_writable(&d).unwrap_err();
        assert!(e.source.to_string().contains("directory"), "{e}");
        check_writable(&d.join("x.json")).unwrap();
        assert!(!d.join("x.json").exists());
        std::fs::write(d.join("y.json"), "kept").unwrap();
        check_writable(&d.join("y.json")).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("y.json")).unwrap(), "kept");
        assert_eq!(entries(&d), ["y.json"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
