//! The researchfs core: block and inode allocation, the inode table, directories, file
//! data with direct, single- and double-indirect blocks, [`mkfs`], recovery at mount, and
//! NoFS' checks and background scan. The [`Design`] decides where flushes go, whether
//! bitmaps reach the disk, and whether backpointers are written and checked.
//!
//! The core writes through: every operation sends its blocks to the [`BlockDevice`] before
//! it returns, in dependency order (data and bitmaps, then indirect blocks, then the inode
//! that points to them; frees after the pointer is gone), with [`Design::ordered`]
//! inserting a flush at each of those points. There is no block cache, so what a crash can
//! lose is exactly what the device's volatile cache can lose, which is what bob explores.
//!
//! One mutex guards the state; the NoFS scan thread takes it one step at a time so the file
//! system stays usable while allocation is being rediscovered.
//!
//! Simplifications, each chosen to keep the designs comparable rather than fast: a file
//! unlinked while open loses its data at once; directory mtimes change only when their
//! size does; a rename is not atomic in any design (the new name is added before the old
//! one is removed, as the thesis defines NoFS' rename).
//!
//! Here: the types, the [`Fs`] handle (mount with recovery, shutdown, the public
//! operations) and the state's basic block I/O. One file per job of the state
//! (`impl Core` in each): `inode.rs` (the inode table), `alloc.rs` (blocks, inodes,
//! bitmaps), `bmap.rs` (the block map: direct and indirect pointers), `data.rs` (file
//! data), `dir.rs` (directories), `ops.rs` (namespace operations); `scan.rs` is NoFS'
//! background scan, `mkfs.rs` makes a file system. Two designs put something between the
//! core's writes and the device: `journal.rs` (the journaling designs' running
//! transaction) and `soft.rs` (the soft-updates designs' write-back cache, where a
//! barrier becomes a dependency instead of a flush).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::design::{Design, Options};
use crate::device::{BlockDevice, Role, WriteInfo};
use crate::layout::{Inode, Kind, Superblock, BLOCK, NAME_MAX, ROOT};
use crate::{Error, ErrorKind, Result};

mod alloc;
mod bmap;
mod data;
mod dir;
mod inode;
mod journal;
mod mkfs;
mod ops;
mod scan;
mod soft;
#[cfg(test)]
mod tests;
mod valor;

pub use journal::{crc32, JournalStats, JOURNAL_BLOCKS};
pub use mkfs::mkfs;
pub use soft::{SoftStats, SYNC_DIRTY_BLOCKS};
pub use valor::{ValorStats, VALOR_LOG_BLOCKS};

const UNKNOWN: u8 = 0;
const FREE: u8 = 1;
const USED: u8 = 2;

/// Attributes of an inode as the file system reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: u32,
    /// File or directory (a free inode reached through a stale entry reads as a file).
    pub kind: Kind,
    /// Size in bytes.
    pub size: u64,
    /// Link count.
    pub nlink: u32,
    /// 4 KiB blocks allocated (data, directory and indirect).
    pub blocks: u64,
    /// Modification time.
    pub mtime: SystemTime,
}

/// Space accounting as statfs reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Blocks of the data region.
    pub blocks: u64,
    /// Of which known free.
    pub bfree: u64,
    /// Usable inode slots.
    pub files: u64,
    /// Of which known free.
    pub ffree: u64,
}

/// What the file system did about an inconsistency it noticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Returned EIO to the caller.
    ErrorReturned,
    /// Corrected the object (link count, block count) on access.
    Repaired,
    /// Reclaimed an orphan inode or block during the scan.
    Reclaimed,
}

/// One inconsistency the file system itself noticed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detection {
    /// The thesis' kind, when one fits.
    pub kind: Option<ErrorKind>,
    /// What was done.
    pub action: Action,
    /// Which object and what disagreed.
    pub what: String,
}

/// Blocks an operation touched in the pointer tree, written at commit.
#[derive(Default)]
struct Tx {
    /// Indirect blocks read or created during the operation (full block contents).
    ind: BTreeMap<u32, Vec<u8>>,
    /// Of those, the ones modified.
    dirty: BTreeSet<u32>,
    /// Blocks to free once nothing points to them.
    freed: Vec<u32>,
    /// A block was allocated (so bitmaps must precede pointers).
    allocated: bool,
}

/// (logical block, block) data pointers and (block, position) indirect blocks of an inode.
type Tree = (Vec<(u64, u32)>, Vec<(u32, u32)>);

/// Where the pointer for a logical block lives.
#[derive(Clone, Copy)]
enum Slot {
    Direct(usize),
    In(u32, usize),
}

struct Core {
    design: Design,
    opts: Options,
    dev: Arc<dyn BlockDevice>,
    sb: Superblock,
    inodes: HashMap<u32, Inode>,
    balloc: Vec<u8>,
    ialloc: Vec<u8>,
    bfree: u64,
    ifree: u64,
    bhint: u64,
    ihint: u32,
    bbitmap: Vec<u8>,
    ibitmap: Vec<u8>,
    dirty_bitmaps: BTreeSet<u64>,
    /// NoFS: inodes whose link and block counts were checked since mount.
    verified: HashSet<u32>,
    /// NoFS: inodes whose blocks the scan (or allocation) has marked used.
    accounted: HashSet<u32>,
    scanning: bool,
    events: Vec<Detection>,
    /// The journaling designs' journal: every core write goes through it. A `RefCell`
    /// because the core's block I/O takes `&self`; the core itself is behind the `Fs`
    /// mutex, so the cell is never shared between threads.
    jnl: Option<RefCell<journal::Journal>>,
    /// The soft-updates designs' write-back cache and its dependencies: every core read
    /// and write goes through it. A `RefCell` for the same reason as `jnl`.
    soft: Option<RefCell<soft::SoftDeps>>,
    /// Soft updates: a write-back pass is releasing frees (they happen now, not later).
    soft_releasing: bool,
    /// Valor's undo log and open transaction.
    valor: Option<valor::Log>,
    /// xsyncfs: output written to the output file and not released yet, in order.
    held: Vec<String>,
    /// xsyncfs: output is waiting on a commit; the next request commits (the paper's
    /// output-triggered commit, run where the commit thread would: before the file
    /// system serves anything else, so that recordings replay).
    output_trigger: bool,
}

/// A mounted-in-process researchfs file system (no FUSE needed).
pub struct Fs {
    design: Design,
    core: Mutex<Core>,
    scan_cv: Condvar,
    stop: AtomicBool,
    closed: AtomicBool,
    scan: Mutex<Option<JoinHandle<()>>>,
}

fn now() -> (i64, u32) {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, d.subsec_nanos())
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty()
        || name.len() > NAME_MAX
        || name.contains(&b'/')
        || name.contains(&0)
        || name == b"."
        || name == b".."
    {
        return Err(Error::BadName);
    }
    Ok(())
}

fn io_err(block: u64) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { block, source }
}

impl Core {
    fn pl(&self) -> usize {
        self.design.payload()
    }
    fn hdr(&self) -> usize {
        self.design.header()
    }
    fn ptrs(&self) -> usize {
        self.design.ptrs_per_block()
    }

    fn read_block(&self, b: u64) -> Result<Vec<u8>> {
        if let Some(s) = &self.soft {
            return s.borrow_mut().read(self.dev.as_ref(), b);
        }
        if let Some(j) = &self.jnl {
            if let Some(d) = j.borrow().lookup(b) {
                return Ok(d.to_vec());
            }
        }
        let mut buf = vec![0u8; BLOCK];
        self.dev.read_at(b * BLOCK as u64, &mut buf).map_err(io_err(b))?;
        Ok(buf)
    }

    fn write_block(&self, b: u64, data: &[u8], role: Role) -> Result<()> {
        if let Some(s) = &self.soft {
            // A run of contiguous data blocks is one update per block.
            let mut s = s.borrow_mut();
            for (i, blk) in data.chunks(BLOCK).enumerate() {
                s.write(b + i as u64, blk, role);
            }
            return Ok(());
        }
        if let Some(j) = &self.jnl {
            j.borrow_mut().stage(b, data, role);
            return Ok(());
        }
        self.dev.write_at(b * BLOCK as u64, data, WriteInfo::new(role)).map_err(io_err(b))
    }

    fn barrier(&self) -> Result<()> {
        if let Some(s) = &self.soft {
            s.borrow_mut().barrier();
        }
        if self.design.ordered() {
            self.dev.flush().map_err(io_err(0))?;
        }
        Ok(())
    }

    fn detect(&mut self, kind: Option<ErrorKind>, action: Action, what: String) -> Error {
        self.events.push(Detection { kind, action, what: what.clone() });
        Error::Inconsistent { kind, what }
    }

    fn in_data(&self, b: u32) -> bool {
        u64::from(b) >= self.sb.data_start && u64::from(b) < self.sb.blocks
    }

    /// After a mutating operation: checkpoint what the disk says is durable, and end the
    /// running transaction if it grew too large.
    fn journal_tick(&mut self) -> Result<()> {
        let Some(j) = &self.jnl else { return Ok(()) };
        j.borrow_mut().after_op(self.dev.as_ref())?;
        self.release_held();
        Ok(())
    }

    /// xsyncfs: runs the commit that held output asked for (commit + flush), then
    /// releases the output it covers.
    fn pump_output(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.output_trigger) {
            return Ok(());
        }
        if let Some(j) = &self.jnl {
            let mut j = j.borrow_mut();
            if !j.all_durable() {
                // Pessimistic commits flush before and after the commit block; the dsync
                // flush is for a design whose commits do not.
                j.commit(self.dev.as_ref(), true)?;
            }
        }
        self.release_held();
        Ok(())
    }

    /// Releases every held output once every write before it is durable.
    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let durable = self.jnl.as_ref().is_none_or(|j| j.borrow().all_durable());
        if durable {
            for text in std::mem::take(&mut self.held) {
                self.dev.release_output(&text);
            }
        }
    }

    /// Ends the running transaction (osync), with a flush after it (dsync).
    fn journal_commit(&mut self, dsync: bool) -> Result<()> {
        match &self.jnl {
            Some(j) => j.borrow_mut().commit(self.dev.as_ref(), dsync),
            None => Err(Error::NotSupported),
        }
    }
}

/// The superblock of `dev`, checked to be one of `design`'s on a device large enough for
/// it (and for the journal or undo log after it).
fn read_superblock(design: Design, dev: &dyn BlockDevice) -> Result<Superblock> {
    let bad = |reason: String| Error::BadImage { design, reason };
    if dev.size() < BLOCK as u64 {
        return Err(bad(format!("device of {} bytes holds no superblock", dev.size())));
    }
    let mut blk = vec![0u8; BLOCK];
    dev.read_at(0, &mut blk).map_err(io_err(0))?;
    let sb = Superblock::decode(&blk).map_err(bad)?;
    if sb.design != design.id() {
        let found = Design::from_id(sb.design).map_or("unknown".to_string(), |d| d.to_string());
        return Err(bad(format!("the image was made for design {found}")));
    }
    let journal_blocks = if design.journal().is_some() {
        JOURNAL_BLOCKS
    } else if design.valor().is_some() {
        VALOR_LOG_BLOCKS
    } else {
        0
    };
    if (sb.blocks + journal_blocks) * BLOCK as u64 > dev.size() {
        return Err(bad(format!("superblock says {} blocks, device is smaller", sb.blocks)));
    }
    Ok(sb)
}

/// A journaling design's journal after its recovery at mount (its commit timer from
/// `opts` where the design has one); `None` for a design without a journal.
fn recover_journal(
    design: Design,
    dev: &dyn BlockDevice,
    sb: &Superblock,
    opts: &Options,
) -> Result<Option<RefCell<journal::Journal>>> {
    let Some(mut mode) = design.journal() else { return Ok(None) };
    if mode.commit_every_ops.is_some() && opts.commit_timer_ops.is_some() {
        mode.commit_every_ops = opts.commit_timer_ops;
    }
    let rec = journal::recover(dev, sb.blocks, mode)?;
    Ok(Some(RefCell::new(journal::Journal::new(mode, sb.blocks, rec.next_seq, rec.replayed))))
}

impl Core {
    /// The in-memory state of a file system being mounted, before its allocation state is
    /// known: every block and inode unknown but the metadata area, inode 0 and the root.
    fn at_mount(
        design: Design,
        opts: Options,
        dev: Arc<dyn BlockDevice>,
        sb: &Superblock,
        jnl: Option<RefCell<journal::Journal>>,
        valor: Option<valor::Log>,
    ) -> Core {
        let nblocks = sb.blocks as usize;
        let ninodes = sb.inodes as usize;
        let mut core = Core {
            design,
            opts,
            dev,
            sb: sb.clone(),
            inodes: HashMap::new(),
            balloc: vec![UNKNOWN; nblocks],
            ialloc: vec![UNKNOWN; ninodes],
            bfree: 0,
            ifree: 0,
            bhint: sb.data_start,
            ihint: 2,
            bbitmap: Vec::new(),
            ibitmap: Vec::new(),
            dirty_bitmaps: BTreeSet::new(),
            verified: HashSet::new(),
            accounted: HashSet::new(),
            scanning: false,
            events: Vec::new(),
            jnl,
            soft: design.soft_updates().map(|m| RefCell::new(soft::SoftDeps::new(m))),
            soft_releasing: false,
            valor,
            held: Vec::new(),
            output_trigger: false,
        };
        core.balloc[..sb.data_start as usize].fill(USED);
        core.ialloc[0] = USED;
        core.ialloc[ROOT as usize] = USED;
        core
    }

    /// A design with persistent bitmaps: reads them (rebuilt from what is reachable after
    /// an unclean unmount of an ordered design) into the allocation state.
    fn load_bitmaps(&mut self, sb: &Superblock) -> Result<()> {
        let read = |start: u64, n: u64| -> Result<Vec<u8>> {
            let mut v = vec![0u8; n as usize * BLOCK];
            self.dev.read_at(start * BLOCK as u64, &mut v).map_err(io_err(start))?;
            Ok(v)
        };
        self.bbitmap = read(sb.bbitmap_start, sb.bbitmap_blocks)?;
        self.ibitmap = read(sb.ibitmap_start, sb.ibitmap_blocks)?;
        if !sb.clean && self.design.ordered() {
            self.rebuild_bitmaps(sb)?;
        }
        for b in sb.data_start..sb.blocks {
            let used = self.bbitmap[(b / 8) as usize] & (1 << (b % 8)) != 0;
            self.balloc[b as usize] = if used { USED } else { FREE };
            self.bfree += u64::from(!used);
        }
        for i in 2..sb.inodes {
            let used = self.ibitmap[(i / 8) as usize] & (1 << (i % 8)) != 0;
            self.ialloc[i as usize] = if used { USED } else { FREE };
            self.ifree += u64::from(!used);
        }
        Ok(())
    }

    /// Recovery: ordered writes leave at worst leaks and link counts too high (a rename or
    /// link raises the count before the new name); rebuild the bitmaps from what is
    /// reachable and lower those counts.
    fn rebuild_bitmaps(&mut self, sb: &Superblock) -> Result<()> {
        let walk = crate::fsck::walk(self.design, self.dev.as_ref(), sb)?;
        self.bbitmap.fill(0);
        self.ibitmap.fill(0);
        for i in 0..=sb.data_start {
            self.bbitmap[(i / 8) as usize] |= 1 << (i % 8);
        }
        for &b in walk.blocks.keys() {
            self.bbitmap[(b / 8) as usize] |= 1 << (b % 8);
        }
        self.ibitmap[0] |= 1;
        for &i in walk.names.keys().chain([&ROOT]) {
            self.ibitmap[(i / 8) as usize] |= 1 << (i % 8);
        }
        for b in sb.bbitmap_start..sb.data_start.min(sb.itable_start) {
            self.dirty_bitmaps.insert(b);
        }
        self.write_bitmaps()?;
        self.lower_link_counts(&walk.names)?;
        Ok(())
    }

    /// Clears the superblock's clean flag for the mount where the design keeps one (soft
    /// updates straight to the disk and durable, recovering after an unclean unmount).
    fn mark_mounted(&mut self, sb: &Superblock) -> Result<()> {
        if self.design.soft_updates().is_some() {
            // Soft updates: the superblock goes straight to the disk (the cache's updates
            // must not race with the clean flag), durable before anything else changes.
            let was_clean = sb.clean;
            let dirty = Superblock { clean: false, ..sb.clone() };
            self.dev
                .write_at(0, &dirty.encode(), WriteInfo::new(Role::Superblock))
                .map_err(io_err(0))?;
            self.dev.flush().map_err(io_err(0))?;
            if !was_clean {
                self.soft_recover()?;
            }
        } else if self.design.keeps_clean_flag() {
            let dirty = Superblock { clean: false, ..sb.clone() };
            self.write_block(0, &dirty.encode(), Role::Superblock)?;
            self.barrier()?;
        }
        Ok(())
    }
}

impl Fs {
    /// Opens the file system of `design` on `dev`, runs the design's recovery, and (NoFS)
    /// starts the background scan. Fails if the image is not a `design` image.
    pub fn open(design: Design, dev: Arc<dyn BlockDevice>, opts: Options) -> Result<Arc<Fs>> {
        let sb = read_superblock(design, dev.as_ref())?;
        // Journal recovery first: what it replays is what the rest of the mount reads.
        let jnl = recover_journal(design, dev.as_ref(), &sb, &opts)?;
        // Valor's rollback likewise comes before anything reads the file system.
        let valor = match design.valor() {
            Some(mode) => Some(valor::recover(
                design,
                dev.as_ref(),
                sb.blocks,
                sb.data_start..sb.blocks,
                mode,
            )?),
            None => None,
        };
        let mut core = Core::at_mount(design, opts, dev.clone(), &sb, jnl, valor);
        if design.persistent_bitmaps() {
            core.load_bitmaps(&sb)?;
        } else {
            core.scanning = true;
        }
        core.mark_mounted(&sb)?;
        let fs = Arc::new(Fs {
            design,
            core: Mutex::new(core),
            scan_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            scan: Mutex::new(None),
        });
        if !design.persistent_bitmaps() {
            let f = fs.clone();
            let handle = std::thread::Builder::new()
                .name("researchfs-scan".into())
                .spawn(move || f.scan())
                .map_err(|source| Error::Io { block: 0, source })?;
            *fs.scan.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        }
        Ok(fs)
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic inside an operation leaves the state as consistent as a crash would;
        // keep serving rather than poisoning every later request.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The design.
    pub fn design(&self) -> Design {
        self.design
    }
    /// Clean shutdown: stops the scan, marks the superblock clean and flushes (NoFS writes
    /// nothing and flushes only when mounted durable).
    pub fn shutdown(&self) -> Result<()> {
        self.stop_scan();
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut c = self.lock();
        c.pump_output()?;
        if let Some(j) = &c.jnl {
            j.borrow_mut().shutdown(c.dev.as_ref())?;
            c.release_held();
            return Ok(());
        }
        if c.soft.is_some() {
            // Everything durable first, then the clean flag, straight to the disk.
            c.soft_fsync()?;
            let clean = Superblock { clean: true, ..c.sb.clone() };
            c.dev
                .write_at(0, &clean.encode(), WriteInfo::new(Role::Superblock))
                .map_err(io_err(0))?;
            return c.dev.flush().map_err(io_err(0));
        }
        let c = &mut *c;
        if let Some(log) = c.valor.as_mut() {
            // Unmount aborts a transaction still open (as the paper's umount does).
            if log.is_open() {
                log.abort(c.dev.as_ref())?;
            }
        }
        c.dev.end_op().map_err(io_err(0))?;
        if c.design.keeps_clean_flag() {
            c.write_block(
                0,
                &Superblock { clean: true, ..c.sb.clone() }.encode(),
                Role::Superblock,
            )?;
        }
        if c.design.persistent_bitmaps() || c.opts.durable {
            c.dev.flush().map_err(io_err(0))?;
        }
        Ok(())
    }

    /// Stops without writing anything more, as a crash would (the scan thread is stopped).
    pub fn crash(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.stop_scan();
    }

    /// The entry `name` of directory `parent` (NoFS: checks the child's back link).
    pub fn lookup(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<u32> {
        self.lock().lookup(parent, name.as_ref())
    }

    /// The inode of `path` ("a/b/c", relative to the root; "" is the root).
    pub fn resolve(&self, path: &str) -> Result<u32> {
        let mut c = self.lock();
        let mut ino = ROOT;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            ino = c.lookup(ino, part.as_bytes())?;
        }
        Ok(ino)
    }

    /// Attributes (NoFS: the first call after mount verifies and repairs the inode).
    pub fn getattr(&self, ino: u32) -> Result<Attr> {
        self.lock().getattr(ino)
    }

    /// Creates an empty file.
    pub fn create(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<u32> {
        self.mutate(|c| c.create(parent, name.as_ref()))
    }

    /// Creates a directory.
    pub fn mkdir(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<u32> {
        self.mutate(|c| c.mkdir(parent, name.as_ref()))
    }

    /// Adds the name `name` in `parent` for file `ino`.
    pub fn link(&self, ino: u32, parent: u32, name: impl AsRef<[u8]>) -> Result<()> {
        self.mutate(|c| c.link(ino, parent, name.as_ref()))
    }

    /// Removes a file name (and the file with its last name).
    pub fn unlink(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<()> {
        self.mutate(|c| c.unlink(parent, name.as_ref()))
    }

    /// Removes an empty directory.
    pub fn rmdir(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<()> {
        self.mutate(|c| c.rmdir(parent, name.as_ref()))
    }

    /// Renames (not atomic: the new name is added before the old one is removed).
    pub fn rename(
        &self,
        parent: u32,
        name: impl AsRef<[u8]>,
        newparent: u32,
        newname: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.mutate(|c| c.rename(parent, name.as_ref(), newparent, newname.as_ref()))
    }

    /// Up to `len` bytes from `off` (NoFS: EIO for a block whose backpointer disagrees).
    pub fn read(&self, ino: u32, off: u64, len: usize) -> Result<Vec<u8>> {
        self.lock().read(ino, off, len)
    }

    /// Writes `data` at `off`; returns the bytes written.
    pub fn write(&self, ino: u32, off: u64, data: &[u8]) -> Result<usize> {
        self.mutate(|c| c.write(ino, off, data))
    }

    /// Sets the size.
    pub fn truncate(&self, ino: u32, size: u64) -> Result<()> {
        self.mutate(|c| c.truncate(ino, size))
    }

    /// Runs a mutating operation, then lets the journal (if any) checkpoint and commit.
    fn mutate<T>(&self, op: impl FnOnce(&mut Core) -> Result<T>) -> Result<T> {
        let mut c = self.lock();
        c.pump_output()?;
        c.soft_begin();
        let r = op(&mut c);
        c.journal_tick()?;
        c.soft_tick()?;
        // A per-operation device (Conquest) commits what the operation wrote.
        c.dev.end_op().map_err(io_err(0))?;
        r
    }

    /// `osync()` (OptFS): ends the running transaction and returns once it is in the
    /// disk cache, without a flush: ordering, eventual durability. `NotSupported` on a
    /// design without a journal.
    pub fn osync(&self) -> Result<()> {
        let mut c = self.lock();
        c.pump_output()?;
        c.journal_commit(false)?;
        c.release_held();
        Ok(())
    }

    /// `dsync()` (OptFS): `osync()` then a flush: durable when it returns.
    pub fn dsync(&self) -> Result<()> {
        let mut c = self.lock();
        c.pump_output()?;
        c.journal_commit(true)?;
        c.release_held();
        Ok(())
    }

    /// A program's output (xsyncfs' output file, [`crate::fuse::OUTPUT_FILE`]): released
    /// to the disk's log ([`BlockDevice::release_output`]) at once, or held until every
    /// write before it is durable, as the design says ([`Design::output`]).
    /// `NotSupported` on a design without an output file.
    pub fn output(&self, text: &str) -> Result<()> {
        use crate::design::OutputRelease;
        let mut c = self.lock();
        let Some(mode) = c.design.output() else { return Err(Error::NotSupported) };
        // Outputs in a row wait for one commit (grouped): no pump here.
        let durable = c.jnl.as_ref().is_none_or(|j| j.borrow().all_durable());
        match mode {
            OutputRelease::Held => {
                c.held.push(text.to_owned());
                c.output_trigger |= !durable;
                c.release_held();
            }
            OutputRelease::EagerTriggered => {
                c.dev.release_output(text);
                c.output_trigger |= !durable;
            }
            OutputRelease::Eager => c.dev.release_output(text),
        }
        Ok(())
    }

    /// Output held and not yet released (xsyncfs).
    pub fn held_output(&self) -> Vec<String> {
        self.lock().held.clone()
    }

    /// What the soft-updates cache did since mount (`None` without soft updates).
    pub fn soft_stats(&self) -> Option<SoftStats> {
        self.lock().soft.as_ref().map(|s| s.borrow().stats)
    }

    /// Soft updates: writes every cached update back (with flushes in `softupdates`,
    /// none in `softupdates-completion`) and releases every waiting free, without the
    /// final flush fsync adds in completion mode. Nothing on other designs, which write
    /// through. What the syncer does when the cache fills, on demand (tests, and bob's
    /// recorder after a workload's setup so the base image holds it).
    pub fn writeback(&self) -> Result<()> {
        self.lock().soft_writeback()
    }

    /// Valor: begins a transaction; every `write` until commit or abort is part of it
    /// and must overwrite pages the file already has. Returns its id. `NotSupported` on
    /// a design without transactions; `Transaction` if one is open.
    pub fn txn_begin(&self) -> Result<u64> {
        let mut c = self.lock();
        let c = &mut *c;
        match c.valor.as_mut() {
            Some(log) => log.begin(c.dev.as_ref()),
            None => Err(Error::NotSupported),
        }
    }

    /// Valor: commits the open transaction (its data, then its commit record); with
    /// `durable` (the paper's Transaction Sync) it is on the disk when this returns.
    pub fn txn_commit(&self, durable: bool) -> Result<()> {
        let mut c = self.lock();
        let c = &mut *c;
        match c.valor.as_mut() {
            Some(log) => log.commit(c.dev.as_ref(), durable),
            None => Err(Error::NotSupported),
        }
    }

    /// Valor: aborts the open transaction, writing the old pages back.
    pub fn txn_abort(&self) -> Result<()> {
        let mut c = self.lock();
        let c = &mut *c;
        match c.valor.as_mut() {
            Some(log) => log.abort(c.dev.as_ref()),
            None => Err(Error::NotSupported),
        }
    }

    /// What Valor's log did since mount (`None` without transactions).
    pub fn valor_stats(&self) -> Option<ValorStats> {
        self.lock().valor.as_ref().map(|l| l.stats)
    }

    /// What the journal did since mount (`None` without a journal).
    pub fn journal_stats(&self) -> Option<JournalStats> {
        self.lock().jnl.as_ref().map(|j| j.borrow().stats)
    }

    /// Makes `ino` durable: a flush, except on NoFS mounted without durability; on a
    /// journaling design, `dsync()`.
    pub fn fsync(&self, _ino: u32) -> Result<()> {
        let mut c = self.lock();
        if c.design.fsync_returns_at_once() {
            // External synchrony: the commit is grouped with others; output waits for
            // it instead of the program.
            return c.pump_output();
        }
        if c.jnl.is_some() {
            return c.journal_commit(true);
        }
        if c.soft.is_some() {
            return c.soft_fsync();
        }
        if c.design.fsync_flushes(c.opts) {
            c.dev.flush().map_err(io_err(0))?;
        }
        Ok(())
    }

    /// sync(2) and syncfs(2) on the mount (the kernel's `FUSE_SYNCFS`, which reaches a
    /// fuseblk mount, [`crate::fuse::mount_on_block_device`]): what fsync does, for the
    /// whole file system. Every design's fsync already makes everything durable that it
    /// makes durable at all (a journal commits its one running transaction, soft updates
    /// write the whole cache back), so the two are one call: a flush where the design
    /// flushes on fsync, nothing durable where it does not (NoFS without `durable`;
    /// xsyncfs, whose sync returns at once and whose next output waits instead).
    pub fn sync(&self) -> Result<()> {
        self.fsync(crate::layout::ROOT)
    }

    /// The entries of a directory (without "." and "..") as (name, inode, kind).
    pub fn readdir(&self, ino: u32) -> Result<Vec<(Vec<u8>, u32, Kind)>> {
        Ok(self.lock().dir_list(ino)?.into_iter().map(|e| (e.name, e.ino, e.kind)).collect())
    }

    /// Space accounting (NoFS during its scan counts unexamined blocks as used).
    pub fn statfs(&self) -> Usage {
        self.lock().usage()
    }

    /// Every inconsistency the file system noticed since it was opened.
    pub fn detections(&self) -> Vec<Detection> {
        self.lock().events.clone()
    }

    /// The inode-table block holding `ino`.
    pub fn inode_block(&self, ino: u32) -> u64 {
        self.lock().sb.inode_location(ino).0
    }

    /// The blocks `ino` points to, each with its role (directory or data, and indirect).
    pub fn blocks_of(&self, ino: u32) -> Result<Vec<(Role, u64)>> {
        let mut c = self.lock();
        let inode = c.get_inode(ino)?;
        let (data, ind) = c.all_blocks(ino, &inode);
        let role = if inode.kind == Kind::Dir { Role::Directory } else { Role::Data };
        let mut out: Vec<(Role, u64)> =
            data.into_iter().map(|(_, b)| (role, u64::from(b))).collect();
        out.extend(ind.into_iter().map(|(b, _)| (Role::Indirect, u64::from(b))));
        Ok(out)
    }
}
