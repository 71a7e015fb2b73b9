//! The made file system that the recordings of one run share: mkfs runs once per
//! configuration into a content-addressed cache in the run's scratch directory, and every
//! recording starts from a private copy of that image (reflinked where the scratch file
//! system can, else copied sparsely), never from the cached file itself.
//!
//! Only mkfs is shared. The workload's setup phase differs per property: each property
//! adds its own files (`/A/log`, `/B/mbo`, `/A/dst`, or the detection layout) and every
//! sector it writes is stamped with the workload's generation, a hash of the property's
//! name, so the image after setup is a different one per property. What is the same
//! across the drain schedules of one cell is also what follows mkfs while the file system
//! stays mounted (setup, then recording without an unmount between), which a cached
//! image cannot carry over.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::device::loopdev::LoopDevice;
use crate::fs::{FsConfig, Timeouts};

use super::Error;

/// How long asking a mkfs program for its version may take.
const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// mkfs'd images of one run, keyed by what decides their content.
#[derive(Debug)]
pub struct SetupCache {
    dir: PathBuf,
    /// Each mkfs program's version (`-V`), asked once per run; held while an image is
    /// made, so that two recordings never make the same one.
    versions: Mutex<HashMap<&'static str, String>>,
}

/// Where a recording's file system came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupSource {
    /// mkfs ran for this recording (on its own disk, or into the cache first).
    Made,
    /// A copy of an image this run had already made.
    Reused,
}

impl SetupCache {
    /// A cache in `dir` (created when the first image is made).
    pub fn new(dir: PathBuf) -> SetupCache {
        SetupCache { dir, versions: Mutex::new(HashMap::new()) }
    }

    /// Writes a fresh mkfs'd image of `config` to `to` (replacing it): a copy of the
    /// cached one, made first if this cache does not hold it yet, with a file system
    /// UUID of its own ([`FsConfig::fresh_uuid`]).
    pub(crate) fn copy_made(
        &self,
        config: &FsConfig,
        to: &Path,
        timeouts: Timeouts,
    ) -> Result<SetupSource, Error> {
        let (image, source) = {
            let mut versions = self.versions.lock().unwrap_or_else(|p| p.into_inner());
            let program = config.mkfs.first().copied().unwrap_or_default();
            let version = versions.entry(program).or_insert_with(|| mkfs_version(program));
            let image = self.dir.join(format!("{}.img", cache_key(config, version)));
            if image.exists() {
                (image, SetupSource::Reused)
            } else {
                make_image(config, &image, timeouts)?;
                (image, SetupSource::Made)
            }
        };
        copy_private(&image, to).map_err(|source| Error::Io { path: to.to_owned(), source })?;
        // Each copy a UUID of its own: recordings of one configuration never share one.
        config.fresh_uuid(to, timeouts.mkfs)?;
        Ok(source)
    }
}

/// What `program -V` prints (empty when it cannot say).
fn mkfs_version(program: &str) -> String {
    crate::device::cmd::run(program, &["-V"], VERSION_TIMEOUT)
        .map(|out| format!("{}{}", out.stdout.trim(), out.stderr.trim()))
        .unwrap_or_default()
}

/// What decides a made image's content, hashed: the configuration's name, its mkfs
/// program and arguments, the image size, the mkfs program's version and bob's.
fn cache_key(config: &FsConfig, mkfs_version: &str) -> String {
    let text = format!(
        "{}\0{}\0{}\0{mkfs_version}\0{}",
        config.name,
        config.mkfs.join("\u{1}"),
        config.image_bytes,
        env!("CARGO_PKG_VERSION")
    );
    blake3::hash(text.as_bytes()).to_hex()[..32].to_owned()
}

/// Makes the file system into `image` through a loop device, as the recording disk's
/// loop device would have it (the same 512-byte logical sectors); the file appears only
/// once mkfs has succeeded.
fn make_image(config: &FsConfig, image: &Path, timeouts: Timeouts) -> Result<(), Error> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    if let Some(dir) = image.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let partial = image.with_extension("partial");
    let file = std::fs::File::create(&partial).map_err(io(&partial))?;
    file.set_len(config.image_bytes).map_err(io(&partial))?;
    drop(file);
    let dev = LoopDevice::attach_free(&partial)?;
    let made = config.mkfs_on(dev.path(), timeouts.mkfs);
    dev.detach()?;
    made?;
    std::fs::rename(&partial, image).map_err(io(image))
}

/// Copies `from` to `to` so that writing `to` never changes `from`: a reflink where the
/// file system shares extents (btrfs, xfs), else a sparse copy (holes stay holes).
fn copy_private(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let src = std::fs::File::open(from)?;
    let dst = std::fs::File::create(to)?;
    // SAFETY: FICLONE takes the source descriptor; both descriptors are open for the call.
    let cloned = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) } == 0;
    if cloned {
        return Ok(());
    }
    drop(dst);
    crate::files::copy_sparse(from, to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_follows_what_mkfs_makes() {
        let ext4 = crate::fs::by_name("ext4-ordered").unwrap();
        let same_mkfs = crate::fs::by_name("ext4-writeback").unwrap();
        assert_eq!(cache_key(&ext4, "1.47"), cache_key(&ext4, "1.47"));
        // Another configuration name is another entry, even with the same mkfs.
        assert_ne!(cache_key(&ext4, "1.47"), cache_key(&same_mkfs, "1.47"));
        let bigger = FsConfig { image_bytes: ext4.image_bytes * 2, ..ext4.clone() };
        assert_ne!(cache_key(&ext4, "1.47"), cache_key(&bigger, "1.47"));
        let other_args = FsConfig { mkfs: &["mke2fs", "-q", "-F", "-t", "ext2"], ..ext4.clone() };
        assert_ne!(cache_key(&ext4, "1.47"), cache_key(&other_args, "1.47"));
        assert_ne!(cache_key(&ext4, "1.47"), cache_key(&ext4, "1.48"));
    }

    #[test]
    fn a_private_copy_does_not_write_through_to_the_cache() {
        use std::os::unix::fs::FileExt;
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("made.img"), tmp.path().join("base.img"));
        let file = std::fs::File::create(&from).unwrap();
        file.set_len(1 << 20).unwrap();
        file.write_all_at(&[7; 4096], 8192).unwrap();
        drop(file);
        copy_private(&from, &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), std::fs::read(&from).unwrap());
        let copy = std::fs::OpenOptions::new().write(true).open(&to).unwrap();
        copy.write_all_at(&[9; 4096], 8192).unwrap();
        let cached = std::fs::read(&from).unwrap();
        assert_eq!(&cached[8192..12288], &[7; 4096][..]);
    }

    /// The file system UUID of an image: where each file system keeps it.
    fn uuid(config: &FsConfig, image: &Path) -> Vec<u8> {
        let bytes = std::fs::read(image).unwrap();
        let at = match config.fstype {
            "ext4" => 1024 + 0x68,     // s_uuid
            "xfs" => 32,               // sb_uuid
            "btrfs" => 0x10000 + 0x20, // the super block's fsid
            other => panic!("no UUID offset for {other}"),
        };
        bytes[at..at + 16].to_vec()
    }

    /// Two recordings that start from one made image get file systems with UUIDs of their
    /// own (a table records one cell while it mounts states of another), and the images
    /// still pass the read-only fsck.
    #[test]
    fn each_copy_of_a_made_image_has_a_uuid_of_its_own() {
        for name in ["ext4-ordered", "xfs", "btrfs"] {
            let config = crate::fs::by_name(name).unwrap();
            if config.availability().is_err() {
                continue;
            }
            let tmp = tempfile::tempdir().unwrap();
            let cache = SetupCache::new(tmp.path().join("setup"));
            let timeouts = Timeouts::default();
            let (a, b) = (tmp.path().join("a.img"), tmp.path().join("b.img"));
            assert_eq!(cache.copy_made(&config, &a, timeouts).unwrap(), SetupSource::Made);
            assert_eq!(cache.copy_made(&config, &b, timeouts).unwrap(), SetupSource::Reused);
            let made = std::fs::read_dir(tmp.path().join("setup"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.extension().is_some_and(|x| x == "img"))
                .unwrap();
            let (ua, ub, um) = (uuid(&config, &a), uuid(&config, &b), uuid(&config, &made));
            assert!(ua != ub && ua != um && ub != um, "{name}: {ua:?} {ub:?} {um:?}");
            for image in [&a, &b] {
                let dev = LoopDevice::attach_free(image).unwrap();
                let fsck = config.fsck_on(dev.path(), timeouts.fsck);
                dev.detach().unwrap();
                assert_eq!(fsck.unwrap(), None, "{name}: fsck of {}", image.display());
            }
        }
    }
}
