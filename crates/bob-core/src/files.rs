//! Whole image files, sparse: a copy that keeps holes and a digest that skips reading them.
//!
//! Below every stage (it imports nothing of bob's), as the recorders,
//! the views, witnesses and pipelines all copy and digest base images.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Calls `each(offset, len)` for every data extent of `file` (of `len` bytes), in order,
/// found with SEEK_DATA/SEEK_HOLE; a file system without them reports one extent.
fn data_extents(
    file: &File,
    len: u64,
    mut each: impl FnMut(u64, u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use nix::unistd::{lseek, Whence};
    use std::os::fd::AsFd;
    let mut pos: i64 = 0;
    while (pos as u64) < len {
        let data = match lseek(file.as_fd(), pos, Whence::SeekData) {
            Ok(d) => d,
            Err(nix::errno::Errno::ENXIO) => break,
            Err(nix::errno::Errno::EINVAL) if pos == 0 => return each(0, len),
            Err(e) => return Err(e.into()),
        };
        let hole = lseek(file.as_fd(), data, Whence::SeekHole).map_err(std::io::Error::from)?;
        each(data as u64, (hole - data) as u64)?;
        pos = hole;
    }
    Ok(())
}

/// Copies `from` to `to` keeping holes, so a mostly empty image costs only its data.
/// Each data extent is copied in the kernel (`copy_file_range(2)`, which shares the
/// extents where the file system can reflink, as `cp` does), else through a buffer.
pub fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<()> {
    let src = File::open(from)?;
    let len = src.metadata()?.len();
    let dst = File::create(to)?;
    dst.set_len(len)?;
    let mut buf = Vec::new();
    let mut in_kernel = true;
    data_extents(&src, len, |mut off, n| {
        let end = off + n;
        while in_kernel && off < end {
            let (mut from_off, mut to_off) = (off as i64, off as i64);
            let want = ((end - off) as usize).min(1 << 30);
            match nix::fcntl::copy_file_range(
                &src,
                Some(&mut from_off),
                &dst,
                Some(&mut to_off),
                want,
            ) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(copied) => off += copied as u64,
                // Not between these files (another file system, an old kernel, a file
                // system without it): copy through memory from here on.
                Err(
                    nix::errno::Errno::EXDEV
                    | nix::errno::Errno::ENOSYS
                    | nix::errno::Errno::EOPNOTSUPP
                    | nix::errno::Errno::EINVAL,
                ) => in_kernel = false,
                Err(e) => return Err(e.into()),
            }
        }
        if off < end && buf.is_empty() {
            buf = vec![0u8; 1 << 20];
        }
        while off < end {
            let n = ((end - off) as usize).min(buf.len());
            src.read_exact_at(&mut buf[..n], off)?;
            dst.write_all_at(&buf[..n], off)?;
            off += n as u64;
        }
        Ok(())
    })
}

/// blake3 of a whole file, lowercase hex. Holes are hashed as the zeros they read as,
/// without reading them: reading a hole makes the kernel zero page-cache pages for it,
/// which cost more than the hashing itself on a mostly empty image (measured: 18% of a
/// `bob run` on xfs went to that zeroing before).
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
    let f = File::open(path)?;
    let len = f.metadata()?.len();
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut hashed = 0u64;
    let zeros_until = |hasher: &mut blake3::Hasher, hashed: &mut u64, to: u64| {
        while *hashed < to {
            let n = ((to - *hashed) as usize).min(ZEROS.len());
            hasher.update(&ZEROS[..n]);
            *hashed += n as u64;
        }
    };
    data_extents(&f, len, |off, n| {
        zeros_until(&mut hasher, &mut hashed, off);
        let end = off + n;
        while hashed < end {
            let n = ((end - hashed) as usize).min(buf.len());
            f.read_exact_at(&mut buf[..n], hashed)?;
            hasher.update(&buf[..n]);
            hashed += n as u64;
        }
        Ok(())
    })?;
    zeros_until(&mut hasher, &mut hashed, len);
    Ok(hasher.finalize().to_hex().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sparse walk hashes exactly the bytes the file reads as: holes before, between
    /// and after data, and data that is itself zero.
    #[test]
    fn file_digest_equals_blake3_of_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse.img");
        let f = File::create(&path).unwrap();
        let len = 8 << 20;
        f.set_len(len).unwrap();
        f.write_all_at(&[7u8; 5000], 1 << 20).unwrap();
        f.write_all_at(&[0u8; 4096], 3 << 20).unwrap();
        f.write_all_at(&[9u8; 100], (5 << 20) + 123).unwrap();
        drop(f);
        let content = std::fs::read(&path).unwrap();
        assert_eq!(content.len() as u64, len);
        assert_eq!(file_digest(&path).unwrap(), blake3::hash(&content).to_hex().to_string());
        let copy = dir.path().join("copy.img");
        copy_sparse(&path, &copy).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), content);
        // Onto another file system the kernel will not copy (EXDEV): through memory.
        if let Ok(other) = tempfile::tempdir_in("/dev/shm") {
            let copy = other.path().join("copy.img");
            copy_sparse(&path, &copy).unwrap();
            assert_eq!(std::fs::read(&copy).unwrap(), content);
        }
    }
}
