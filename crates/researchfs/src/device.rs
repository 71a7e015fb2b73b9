//! The block device every researchfs design stores its image on, and the role each
//! write carries.
//!
//! [`BlockDevice`] is the seam between a file system and bob: bob's recorder implements it
//! over its recording disk (logging every write in process, in order, with its [`Role`])
//! and over its crash-state views. Here live the implementations the crate itself needs:
//! [`MemDevice`] (tests, the reliability experiment), [`FileDevice`] (an image file, the
//! benchmark) and [`RecordingDevice`] (a write log over another device, used to build
//! "drop exactly these writes" crash states).
//!
//! The device models a disk with a volatile cache: a write is visible to later reads at
//! once, but only [`BlockDevice::flush`] (or a FUA write) makes it durable. The file systems
//! write whole, block-aligned 4 KiB blocks, so a write is also the unit a crash keeps or
//! loses.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

/// What a block write holds; carried in bob's trace so crash states can target roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The superblock.
    Superblock,
    /// A block of the inode table.
    Inode,
    /// A directory block.
    Directory,
    /// A file data block.
    Data,
    /// An indirect (pointer) block.
    Indirect,
    /// An allocation bitmap block.
    Bitmap,
    /// A journal block (no design here journals yet).
    Journal,
    /// Anything else (mkfs zeroing, for instance).
    Other,
}

impl Role {
    /// Every role, in declaration order.
    pub const ALL: [Role; 8] = [
        Role::Superblock,
        Role::Inode,
        Role::Directory,
        Role::Data,
        Role::Indirect,
        Role::Bitmap,
        Role::Journal,
        Role::Other,
    ];

    /// The kebab-case name (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Role::Superblock => "superblock",
            Role::Inode => "inode",
            Role::Directory => "directory",
            Role::Data => "data",
            Role::Indirect => "indirect",
            Role::Bitmap => "bitmap",
            Role::Journal => "journal",
            Role::Other => "other",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| format!("unknown block role `{s}` (expected one of: superblock, inode, directory, data, indirect, bitmap, journal, other)"))
    }
}

/// Annotation of one block write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct WriteInfo {
    /// What the written bytes are.
    pub role: Role,
    /// Forced unit access: durable when the write completes.
    pub fua: bool,
}

impl WriteInfo {
    /// A normal (cached) write of `role`.
    pub fn new(role: Role) -> WriteInfo {
        WriteInfo { role, fua: false }
    }
}

/// What a disk with asynchronous durability notifications (ADN, OptFS §6.2.1) has told
/// the file system: of the write requests (writes and discards) it received since it was
/// made, how many are durable. Writes are durable in the order received, so "the first
/// `durable` writes" names them; a flush makes all of them durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Durability {
    /// Write requests received so far: the sequence number of the last one.
    pub received: u64,
    /// The first `durable` of them are durable.
    pub durable: u64,
}

/// A byte-addressed disk with a volatile write cache.
pub trait BlockDevice: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Fills `buf` from `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `data` at `offset`; `info` says what it is.
    fn write_at(&self, offset: u64, data: &[u8], info: WriteInfo) -> io::Result<()>;
    /// Makes every completed write durable (a cache flush).
    fn flush(&self) -> io::Result<()>;
    /// Discards `len` bytes at `offset` (they read back as zeros).
    fn discard(&self, offset: u64, len: u64) -> io::Result<()>;
    /// The disk's asynchronous durability notifications so far; `None` for a disk that
    /// sends none (then only a flush or a FUA write makes anything durable). A file
    /// system polls it: a write whose sequence number ([`Durability::received`] right after
    /// it) is at most [`Durability::durable`] has reached the media.
    fn durability(&self) -> Option<Durability> {
        None
    }
    /// The file system finished one operation: a device that commits per operation
    /// ([`crate::conquest::ConquestDevice`]) commits it now. Nothing for a disk.
    fn end_op(&self) -> io::Result<()> {
        Ok(())
    }
    /// The writes that follow (until called again with `false`) are a file's data above
    /// the design's small-file threshold ([`crate::conquest::PM_THRESHOLD`]). Nothing for
    /// a disk.
    fn hint_large_file(&self, _large: bool) {}
    /// The file system releases a program's output (xsyncfs: what was written to
    /// [`crate::fuse::OUTPUT_FILE`], once it may leave the machine). bob's recorder logs
    /// it as a mark in the trace, between the disk requests it follows and precedes; a
    /// disk that keeps no log ignores it.
    fn release_output(&self, _text: &str) {}
}

fn check_range(size: u64, offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range {offset}+{len} is past the device end ({size} bytes)"),
        )),
    }
}

/// A disk in memory. Flushes are counted (they have nothing to do). Made
/// [`MemDevice::with_adn`], it also sends durability notifications on the same
/// request-counting clock as bob's recording disk.
pub struct MemDevice {
    data: RwLock<Vec<u8>>,
    flushes: AtomicU64,
    /// T_D in write requests, when the disk notifies.
    adn: Option<u64>,
    /// (received, durable) write requests.
    clock: Mutex<Durability>,
}

impl MemDevice {
    /// A zero-filled disk of `size` bytes.
    pub fn new(size: u64) -> MemDevice {
        MemDevice::from_bytes(vec![0; size as usize])
    }

    /// A disk holding `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> MemDevice {
        MemDevice {
            data: RwLock::new(bytes),
            flushes: AtomicU64::new(0),
            adn: None,
            clock: Mutex::new(Durability::default()),
        }
    }

    /// A zero-filled disk of `size` bytes that notifies durability every `t_d` write
    /// requests (everything received so far becomes durable then).
    pub fn with_adn(size: u64, t_d: u64) -> MemDevice {
        MemDevice { adn: Some(t_d.max(1)), ..MemDevice::new(size) }
    }

    fn tick(&self) {
        if let Ok(mut c) = self.clock.lock() {
            c.received += 1;
            if self.adn.is_some_and(|t| c.received % t == 0) {
                c.durable = c.received;
            }
        }
    }

    /// A copy of the whole disk.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().map(|d| d.clone()).unwrap_or_default()
    }

    /// How many flushes were issued.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }
}

impl BlockDevice for MemDevice {
    fn size(&self) -> u64 {
        self.data.read().map(|d| d.len() as u64).unwrap_or(0)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.data.read().map_err(|_| io::Error::other("poisoned"))?;
        check_range(data.len() as u64, offset, buf.len() as u64)?;
        buf.copy_from_slice(&data[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn write_at(&self, offset: u64, src: &[u8], _info: WriteInfo) -> io::Result<()> {
        let mut data = self.data.write().map_err(|_| io::Error::other("poisoned"))?;
        check_range(data.len() as u64, offset, src.len() as u64)?;
        data[offset as usize..offset as usize + src.len()].copy_from_slice(src);
        drop(data);
        self.tick();
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut c) = self.clock.lock() {
            c.durable = c.received;
        }
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut data = self.data.write().map_err(|_| io::Error::other("poisoned"))?;
        check_range(data.len() as u64, offset, len)?;
        data[offset as usize..(offset + len) as usize].fill(0);
        drop(data);
        self.tick();
        Ok(())
    }
    fn durability(&self) -> Option<Durability> {
        self.adn?;
        self.clock.lock().ok().map(|c| *c)
    }
}

/// A disk image file; flush is `fdatasync`, discard punches a hole.
pub struct FileDevice {
    file: File,
    size: u64,
}

impl FileDevice {
    /// Opens an existing image file read-write; its length is the disk size.
    pub fn open(path: &Path) -> io::Result<FileDevice> {
        let file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(FileDevice { file, size })
    }

    /// Creates (or truncates) `path` as a sparse image of `size` bytes.
    pub fn create(path: &Path, size: u64) -> io::Result<FileDevice> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.set_len(size)?;
        Ok(FileDevice { file, size })
    }
}

impl BlockDevice for FileDevice {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size, offset, buf.len() as u64)?;
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, offset: u64, data: &[u8], info: WriteInfo) -> io::Result<()> {
        check_range(self.size, offset, data.len() as u64)?;
        self.file.write_all_at(data, offset)?;
        if info.fua {
            self.file.sync_data()?;
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size, offset, len)?;
        // SAFETY: fallocate on a file descriptor we own, with plain integer arguments.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// One request seen by a [`RecordingDevice`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "op")]
pub enum Request {
    /// A write with its annotation and bytes.
    Write {
        /// Byte offset.
        offset: u64,
        /// Role and FUA.
        info: WriteInfo,
        /// The bytes written.
        #[serde(skip)]
        data: Vec<u8>,
    },
    /// A cache flush.
    Flush,
    /// A discard.
    Discard {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// Output the file system released (xsyncfs), in order with the disk requests.
    Output {
        /// What the program wrote.
        text: String,
    },
}

/// A device that passes everything to an inner device and logs each write, flush and
/// discard in order, the way bob's recorder does.
pub struct RecordingDevice {
    inner: Arc<dyn BlockDevice>,
    log: Mutex<Vec<Request>>,
}

impl RecordingDevice {
    /// Records requests sent to `inner`.
    pub fn new(inner: Arc<dyn BlockDevice>) -> RecordingDevice {
        RecordingDevice { inner, log: Mutex::new(Vec::new()) }
    }

    /// The requests so far.
    pub fn log(&self) -> Vec<Request> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Number of requests so far (a position to slice the log at).
    pub fn position(&self) -> usize {
        self.log.lock().map(|l| l.len()).unwrap_or(0)
    }

    fn push(&self, r: Request) {
        if let Ok(mut l) = self.log.lock() {
            l.push(r);
        }
    }
}

impl BlockDevice for RecordingDevice {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8], info: WriteInfo) -> io::Result<()> {
        self.inner.write_at(offset, data, info)?;
        self.push(Request::Write { offset, info, data: data.to_vec() });
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()?;
        self.push(Request::Flush);
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.discard(offset, len)?;
        self.push(Request::Discard { offset, len });
        Ok(())
    }
    fn durability(&self) -> Option<Durability> {
        self.inner.durability()
    }
    fn release_output(&self, text: &str) {
        self.inner.release_output(text);
        self.push(Request::Output { text: text.to_owned() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_round_trip_through_serde_and_fromstr() {
        for r in Role::ALL {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{r}\""));
            assert_eq!(r.to_string().parse::<Role>().unwrap(), r);
        }
        assert!("inodes".parse::<Role>().is_err());
    }

    #[test]
    fn mem_device_rejects_out_of_range_and_counts_flushes() {
        let d = MemDevice::new(8192);
        d.write_at(4096, &[7; 4096], WriteInfo::new(Role::Data)).unwrap();
        let mut b = [0u8; 4];
        d.read_at(4096, &mut b).unwrap();
        assert_eq!(b, [7; 4]);
        assert!(d.write_at(8000, &[0; 512], WriteInfo::new(Role::Data)).is_err());
        d.flush().unwrap();
        assert_eq!(d.flushes(), 1);
    }

    #[test]
    fn file_device_writes_reads_and_discards() {
        let dir = tempfile::tempdir().unwrap();
        let d = FileDevice::create(&dir.path().join("img"), 1 << 20).unwrap();
        d.write_at(8192, &[3; 4096], WriteInfo::new(Role::Inode)).unwrap();
        d.flush().unwrap();
        let mut b = vec![0u8; 4096];
        d.read_at(8192, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 3));
        d.discard(8192, 4096).unwrap();
        d.read_at(8192, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
    }
}
