//! Running a workload on a real, mounted file system: each op through std::fs/libc, its
//! data stamped from the model, and the inode number of every node the model knows
//! recorded in [`Observed`] so that the checks can identify files by inode.

use crate::model::{ModelError, ModelState, ROOT_ID};
use crate::op::Op;
use crate::stamp::{self, DRAIN_OP, SETUP_OP};
use crate::tree::Observed;
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Which list of a workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Setup,
    Workload,
    Drain,
}

/// Reported around each op; `index` is the op's position in its phase's list.
#[derive(Clone, Copy, Debug)]
pub enum OpEvent<'a> {
    Begin { index: usize, op: &'a Op },
    End { index: usize, op: &'a Op },
}

/// Why a workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{phase:?} op {index} ({op}): {path}: {source}")]
    Io { phase: Phase, index: usize, op: String, path: PathBuf, source: std::io::Error },
    #[error("{phase:?} op {index}: the model rejects it: {source}")]
    Model { phase: Phase, index: usize, source: ModelError },
    #[error("{phase:?} op {index} ({op}): {path} has size {size}, expected {expected}")]
    UnexpectedSize {
        phase: Phase,
        index: usize,
        op: String,
        path: String,
        size: u64,
        expected: u64,
    },
    #[error("the workload's earlier phases do not model cleanly: {0}")]
    Earlier(ModelError),
}

/// Runs `phase` of `w` under `root` (the mount point). The model is replayed over the
/// earlier phases first, so phases may run in separate calls. Before the phase, every
/// node the model knows and `observed` lacks is lstat'ed; after each creat/mkdir the new
/// node is. `on_op` gets Begin before and End after each op.
pub fn execute(
    w: &Workload,
    phase: Phase,
    root: &Path,
    observed: &mut Observed,
    on_op: &mut dyn FnMut(OpEvent<'_>),
) -> Result<(), ExecError> {
    let mut model = ModelState::new();
    let (earlier, list): (Vec<(&Op, u32)>, &[Op]) = match phase {
        Phase::Setup => (vec![], &w.setup),
        Phase::Workload => (w.setup.iter().map(|o| (o, SETUP_OP)).collect(), &w.ops),
        Phase::Drain => (
            w.setup
                .iter()
                .map(|o| (o, SETUP_OP))
                .chain(w.ops.iter().enumerate().map(|(k, o)| (o, k as u32)))
                .collect(),
            &w.drain,
        ),
    };
    for (op, stamp_op) in earlier {
        model.apply(op, stamp_op).map_err(ExecError::Earlier)?;
    }
    // Descriptors live in one phase: those of earlier phases were closed with their call.
    model.handles.clear();
    let mut fds = Descriptors::new();
    fill_observed(&model, root, observed);
    observed
        .inos
        .entry(ROOT_ID)
        .or_insert_with(|| std::fs::symlink_metadata(root).map(|m| m.ino()).unwrap_or(0));
    let gen = w.gen();
    for (index, op) in list.iter().enumerate() {
        let stamp_op = match phase {
            Phase::Setup => SETUP_OP,
            Phase::Workload => index as u32,
            Phase::Drain => DRAIN_OP,
        };
        let mut next = model.clone();
        let id =
            next.apply(op, stamp_op).map_err(|source| ExecError::Model { phase, index, source })?;
        on_op(OpEvent::Begin { index, op });
        let midway = phase == Phase::Workload && w.commit_midway.contains(&index);
        let ran = match op {
            Op::Open { .. }
            | Op::Close { .. }
            | Op::FdFsync { .. }
            | Op::FdFdatasync { .. }
            | Op::FdWrite { .. } => run_fd_op(op, root, &mut fds, id.unwrap_or(0), stamp_op, gen),
            _ => run_op(op, root, id.unwrap_or(0), stamp_op, gen, midway),
        };
        ran.map_err(|e| match e {
            RunError::Io(path, source) => {
                ExecError::Io { phase, index, op: op.to_string(), path, source }
            }
            RunError::Size(path, size, expected) => {
                ExecError::UnexpectedSize { phase, index, op: op.to_string(), path, size, expected }
            }
        })?;
        on_op(OpEvent::End { index, op });
        // Every node the op brought into being (a new name's file, directory or symlink,
        // a whiteout left behind): its inode number, while it is there to see.
        for path in op.paths() {
            let Some(new) = next.id(path).filter(|i| !model.nodes.contains_key(i)) else {
                continue;
            };
            let p = host_path(root, path);
            let md = std::fs::symlink_metadata(&p).map_err(|source| ExecError::Io {
                phase,
                index,
                op: op.to_string(),
                path: p.clone(),
                source,
            })?;
            observed.inos.insert(new, md.ino());
        }
        model = next;
    }
    fill_observed(&model, root, observed);
    Ok(())
}

/// The descriptors a phase keeps open, by the workload's names for them; dropped (closed)
/// when the phase ends.
type Descriptors = std::collections::BTreeMap<String, File>;

/// The ops that act through a kept descriptor (open, close, and the `fd-*` ops).
fn run_fd_op(
    op: &Op,
    root: &Path,
    fds: &mut Descriptors,
    id: u32,
    stamp_op: u32,
    gen: u32,
) -> Result<(), RunError> {
    // A descriptor's name stands in for a path in errors.
    let name = |fd: &str| PathBuf::from(format!("descriptor {fd}"));
    // The model checked that the descriptor is open in this phase.
    let fd_of = |fds: &Descriptors, fd: &str| -> Result<File, RunError> {
        let f = fds.get(fd).ok_or_else(|| {
            let e = std::io::Error::new(std::io::ErrorKind::NotFound, "descriptor not open");
            RunError::Io(name(fd), e)
        })?;
        // A second descriptor of the same open file (dup(2)): what it syncs and writes is
        // the kept one's.
        f.try_clone().map_err(io(&name(fd)))
    };
    match op {
        Op::Open { path, fd } => {
            let p = host_path(root, path);
            let is_dir = std::fs::symlink_metadata(&p).map_err(io(&p))?.is_dir();
            let f = if is_dir {
                File::open(&p)
            } else {
                OpenOptions::new().read(true).write(true).open(&p)
            }
            .map_err(io(&p))?;
            fds.insert(fd.clone(), f);
            Ok(())
        }
        Op::Close { fd } => {
            drop(fds.remove(fd));
            Ok(())
        }
        Op::FdFsync { fd } => fd_of(fds, fd)?.sync_all().map_err(io(&name(fd))),
        Op::FdFdatasync { fd } => fd_of(fds, fd)?.sync_data().map_err(io(&name(fd))),
        Op::FdWrite { fd, offset, len } => fd_of(fds, fd)?
            .write_all_at(&stamped(id, *offset, *len, stamp_op, gen), *offset)
            .map_err(io(&name(fd))),
        _ => Ok(()),
    }
}

fn fill_observed(model: &ModelState, root: &Path, observed: &mut Observed) {
    for (path, &id) in &model.names {
        if let std::collections::btree_map::Entry::Vacant(v) = observed.inos.entry(id) {
            if let Ok(md) = std::fs::symlink_metadata(host_path(root, path)) {
                v.insert(md.ino());
            }
        }
    }
}

/// An I/O error's conversion into a [`RunError`] naming `p`.
fn io(p: &Path) -> impl FnOnce(std::io::Error) -> RunError {
    let p = p.to_path_buf();
    move |e| RunError::Io(p, e)
}

/// `len` bytes of data stamped for file `id` at `offset` by op `stamp_op`.
fn stamped(id: u32, offset: u64, len: u64, stamp_op: u32, gen: u32) -> Vec<u8> {
    let mut buf = vec![0u8; len as usize];
    stamp::fill(&mut buf, id, offset, stamp_op, gen);
    buf
}

/// The host path of a model path; model paths are validated (absolute, no "." or "..")
/// before any op runs, so the result stays inside `root`.
fn host_path(root: &Path, path: &str) -> PathBuf {
    if path == "/" {
        root.to_path_buf()
    } else {
        root.join(path.trim_start_matches('/'))
    }
}

enum RunError {
    Io(PathBuf, std::io::Error),
    Size(String, u64, u64),
}

fn run_op(
    op: &Op,
    root: &Path,
    id: u32,
    stamp_op: u32,
    gen: u32,
    commit_midway: bool,
) -> Result<(), RunError> {
    let hp = |p: &str| host_path(root, p);
    let stamped = |offset: u64, len: u64| stamped(id, offset, len, stamp_op, gen);
    match op {
        Op::Mkdir { path } => std::fs::create_dir(hp(path)).map_err(io(&hp(path))),
        Op::Rmdir { path } => std::fs::remove_dir(hp(path)).map_err(io(&hp(path))),
        Op::Creat { path, sync } => run_creat(root, &hp(path), *sync),
        Op::Write { path, offset, len } | Op::Append { path, offset, len } => {
            let append = matches!(op, Op::Append { .. });
            run_write(&hp(path), path, (*offset, *len), append, commit_midway, &stamped)
        }
        Op::OtruncWrite { path, len, chunk } => {
            let p = hp(path);
            let f = OpenOptions::new().write(true).truncate(true).open(&p).map_err(io(&p))?;
            let mut off = 0;
            while off < *len {
                f.write_all_at(&stamped(off, *chunk), off).map_err(io(&p))?;
                off += chunk;
            }
            drop(f); // the close the property is about
            Ok(())
        }
        Op::Link { from, to } => std::fs::hard_link(hp(from), hp(to)).map_err(io(&hp(to))),
        Op::Unlink { path } => std::fs::remove_file(hp(path)).map_err(io(&hp(path))),
        Op::Rename { from, to } => std::fs::rename(hp(from), hp(to)).map_err(io(&hp(from))),
        Op::Fsync { path } => {
            File::open(hp(path)).and_then(|f| f.sync_all()).map_err(io(&hp(path)))
        }
        Op::Fdatasync { path } => {
            File::open(hp(path)).and_then(|f| f.sync_data()).map_err(io(&hp(path)))
        }
        Op::Sync => {
            // sync(2), as the spec's workloads say. (syncfs(2) on the mount changes
            // ext4's writeback order: with it, ext4-ordered commits an append's new size
            // with a still-unwritten extent before the conversion, so an append reads as
            // zeros in some crash states. bob's results document was measured with sync.)
            // A killed bob's wedged FUSE disk would block sync(2): every bob start
            // reclaims those first (device::registry aborts their connections).
            // SAFETY: sync(2) takes no arguments and cannot fail.
            unsafe { libc::sync() };
            Ok(())
        }
        Op::Syncfs => {
            // syncfs(2) on the mount: this file system only (the `syncfs` drain schedule).
            let f = File::open(root).map_err(io(root))?;
            // SAFETY: a valid open descriptor, owned by `f` for the call.
            check_rc(unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) }, root)
        }
        Op::DropCaches => {
            // 2: slab objects (dentries and inodes) only, as fstests evicts an inode; the
            // page cache (1) is left alone, as dropping it would not evict a dirty inode
            // and would only slow the workload.
            let p = Path::new("/proc/sys/vm/drop_caches");
            std::fs::write(p, b"2").map_err(io(p))
        }
        Op::Osync | Op::Dsync | Op::TxnBegin | Op::TxnCommit { .. } | Op::TxnAbort | Op::Output => {
            run_control_write(op, root)
        }
        Op::Falloc { path, .. }
        | Op::DirectWrite { path, .. }
        | Op::SyncWrite { path, .. }
        | Op::MmapWrite { path, .. } => run_write_call(op, &hp(path), &stamped),
        Op::Symlink { target, path } => {
            std::os::unix::fs::symlink(target, hp(path)).map_err(io(&hp(path)))
        }
        Op::Truncate { path, size } => {
            let p = hp(path);
            let f = OpenOptions::new().write(true).open(&p).map_err(io(&p))?;
            f.set_len(*size).map_err(io(&p))
        }
        // lsetxattr(2)/lremovexattr(2): the xattr crate's path functions do not follow
        // symlinks.
        Op::Setxattr { path, name, value } => {
            xattr::set(hp(path), name, value.as_bytes()).map_err(io(&hp(path)))
        }
        Op::Removexattr { path, name } => xattr::remove(hp(path), name).map_err(io(&hp(path))),
        Op::Rename2 { .. }
        | Op::Chmod { .. }
        | Op::Chown { .. }
        | Op::Utimes { .. }
        | Op::TmpfileLink { .. }
        | Op::Clone { .. }
        | Op::CloneRange { .. }
        | Op::CopyRange { .. }
        | Op::DedupeRange { .. } => run_beyond_ace(op, root, id, stamp_op, gen),
        // Run through the phase's descriptors (`run_fd_op`).
        Op::Open { .. }
        | Op::Close { .. }
        | Op::FdFsync { .. }
        | Op::FdFdatasync { .. }
        | Op::FdWrite { .. } => Ok(()),
        Op::WritebackStart { path } => {
            // Starts writeback of the whole file and returns without waiting for it or
            // for any metadata: the `writeback-commit` drain schedule's first step.
            let p = hp(path);
            let f = File::open(&p).map_err(io(&p))?;
            // SAFETY: a valid open descriptor; offset 0 and length 0 mean the whole file.
            let rc = unsafe {
                libc::sync_file_range(
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    0,
                    0,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            check_rc(rc, &p)
        }
    }
}

/// The writes made by a call of their own on the file `p`: fallocate, an O_DIRECT write,
/// an O_SYNC or O_DSYNC write, a write through a shared mapping.
fn run_write_call(
    op: &Op,
    p: &Path,
    stamped: &dyn Fn(u64, u64) -> Vec<u8>,
) -> Result<(), RunError> {
    match op {
        Op::Falloc { mode, offset, len, .. } => {
            let f = OpenOptions::new().write(true).open(p).map_err(io(p))?;
            // SAFETY: a valid open descriptor; the kernel checks the mode and range.
            let rc = unsafe {
                libc::fallocate(
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    mode.bits(),
                    *offset as libc::off_t,
                    *len as libc::off_t,
                )
            };
            check_rc(rc, p)
        }
        Op::DirectWrite { offset, len, .. } => {
            let f = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(p)
                .map_err(io(p))?;
            let mut buf = AlignedBuf::new(*len as usize);
            buf.as_mut().copy_from_slice(&stamped(*offset, *len));
            f.write_all_at(buf.as_mut(), *offset).map_err(io(p))
        }
        Op::SyncWrite { offset, len, flag, direct, .. } => {
            // The flag on the descriptor, not a fsync after it: the write itself returns
            // only once durable (generic_write_sync), which is the path this op tests.
            let bits = flag.bits() | if *direct { libc::O_DIRECT } else { 0 };
            let f = OpenOptions::new().write(true).custom_flags(bits).open(p).map_err(io(p))?;
            // Page-aligned, as O_DIRECT needs (the buffer has at least one byte).
            let mut buf = AlignedBuf::new(*len as usize);
            let data = &mut buf.as_mut()[..*len as usize];
            data.copy_from_slice(&stamped(*offset, *len));
            f.write_all_at(data, *offset).map_err(io(p))
        }
        Op::MmapWrite { offset, len, .. } => {
            let f = OpenOptions::new().read(true).write(true).open(p).map_err(io(p))?;
            let end = offset + len;
            if f.metadata().map_err(io(p))?.len() < end {
                f.set_len(end).map_err(io(p))?;
            }
            mmap_write(&f, *offset, &stamped(*offset, *len))
                .map_err(|e| RunError::Io(p.to_path_buf(), e))
        }
        _ => Ok(()),
    }
}

/// `creat`, and with `sync` an O_SYNC create whose file and directory entry are synced
/// before it returns.
fn run_creat(root: &Path, p: &Path, sync: bool) -> Result<(), RunError> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true).mode(0o644);
    if sync {
        o.custom_flags(libc::O_SYNC);
    }
    let f = o.open(p).map_err(io(p))?;
    if sync {
        f.sync_all().map_err(io(p))?;
        drop(f);
        let dir = p.parent().unwrap_or(root).to_path_buf();
        File::open(&dir).and_then(|d| d.sync_all()).map_err(io(&dir))?;
    }
    Ok(())
}

/// A write (or with `append`, an append that must start at the size) of `(offset, len)`
/// to `p` (`path` in the workload), one pwrite, or with `commit_midway` two halves with a
/// sync(2) between them.
fn run_write(
    p: &Path,
    path: &str,
    (offset, len): (u64, u64),
    append: bool,
    commit_midway: bool,
    stamped: &dyn Fn(u64, u64) -> Vec<u8>,
) -> Result<(), RunError> {
    let f = OpenOptions::new().write(true).open(p).map_err(io(p))?;
    if append {
        let size = f.metadata().map_err(io(p))?.len();
        if size != offset {
            return Err(RunError::Size(path.to_owned(), size, offset));
        }
    }
    if commit_midway && len >= 1024 {
        // Two halves (the first a whole number of blocks where it can be), and a sync(2)
        // between them: the commit meets the op in flight.
        let half = match (len / 2) / 4096 * 4096 {
            0 => (len / 2) / 512 * 512,
            h => h,
        };
        f.write_all_at(&stamped(offset, half), offset).map_err(io(p))?;
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let rest = offset + half;
        return f.write_all_at(&stamped(rest, len - half), rest).map_err(io(p));
    }
    // One pwrite for the whole range (write_all_at only loops on a short write).
    f.write_all_at(&stamped(offset, len), offset).map_err(io(p))
}

/// The research designs' calls made through a control file of theirs, one write of the
/// call's name: osync and dsync, a transaction's begin, commit and abort, and an output
/// (one line, as a program writing to a terminal).
fn run_control_write(op: &Op, root: &Path) -> Result<(), RunError> {
    let (file, word): (&str, &[u8]) = match op {
        Op::Osync => (crate::SYNC_CONTROL, b"osync"),
        Op::Dsync => (crate::SYNC_CONTROL, b"dsync"),
        Op::TxnBegin => (crate::TXN_CONTROL, b"begin"),
        Op::TxnCommit { durable: false } => (crate::TXN_CONTROL, b"commit"),
        Op::TxnCommit { durable: true } => (crate::TXN_CONTROL, b"commit-durable"),
        Op::TxnAbort => (crate::TXN_CONTROL, b"abort"),
        _ => (crate::OUTPUT_FILE, b"output\n"),
    };
    let p = root.join(file);
    let mut f = std::fs::OpenOptions::new().write(true).open(&p).map_err(io(&p))?;
    std::io::Write::write_all(&mut f, word).map_err(io(&p))
}

/// The operations beyond Ace's (renameat2's flags, attribute changes, O_TMPFILE + linkat,
/// reflinks, copies and dedupes), as [`run_op`] runs the others.
fn run_beyond_ace(op: &Op, root: &Path, id: u32, stamp_op: u32, gen: u32) -> Result<(), RunError> {
    let hp = |p: &str| host_path(root, p);
    let stamped = |offset: u64, len: u64| stamped(id, offset, len, stamp_op, gen);
    match op {
        Op::Rename2 { from, to, how } => {
            let (f, t) = (c_path(&hp(from))?, c_path(&hp(to))?);
            // SAFETY: two NUL-terminated paths that live across the call.
            let rc = unsafe {
                libc::renameat2(libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), how.flag())
            };
            check_rc(rc, &hp(from))
        }
        Op::Chmod { path, mode } => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(hp(path), std::fs::Permissions::from_mode(*mode))
                .map_err(io(&hp(path)))
        }
        Op::Chown { path, uid, gid } => {
            std::os::unix::fs::lchown(hp(path), Some(*uid), Some(*gid)).map_err(io(&hp(path)))
        }
        Op::Utimes { path, mtime } => {
            let p = c_path(&hp(path))?;
            let t = libc::timespec { tv_sec: *mtime as libc::time_t, tv_nsec: 0 };
            let times = [t, t];
            // SAFETY: a NUL-terminated path and two timespecs that live across the call.
            let rc = unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    p.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            check_rc(rc, &hp(path))
        }
        Op::TmpfileLink { path, len } => {
            let p = hp(path);
            let dir = p.parent().unwrap_or(root).to_path_buf();
            let f = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_TMPFILE)
                .mode(0o644)
                .open(&dir)
                .map_err(io(&dir))?;
            f.write_all_at(&stamped(0, *len), 0).map_err(io(&p))?;
            let name = c_path(&p)?;
            let empty = c"";
            // SAFETY: a valid descriptor, an empty path (AT_EMPTY_PATH: the descriptor
            // itself) and a NUL-terminated target, all alive across the call.
            let rc = unsafe {
                libc::linkat(
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    empty.as_ptr(),
                    libc::AT_FDCWD,
                    name.as_ptr(),
                    libc::AT_EMPTY_PATH,
                )
            };
            check_rc(rc, &p)
        }
        Op::Clone { from, to }
        | Op::CloneRange { from, to, .. }
        | Op::CopyRange { from, to, .. }
        | Op::DedupeRange { from, to, .. } => {
            let src = File::open(hp(from)).map_err(io(&hp(from)))?;
            let dst =
                OpenOptions::new().read(true).write(true).open(hp(to)).map_err(io(&hp(to)))?;
            remap(op, &src, &dst).map_err(|e| RunError::Io(hp(to), e))
        }
        _ => Ok(()),
    }
}

/// A zeroed, page-aligned buffer: O_DIRECT needs the memory aligned as well as the range.
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .unwrap_or_else(|_| std::alloc::Layout::new::<u8>());
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `layout.size()` initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// Copies `data` into a shared mapping of `f` at `offset` (the file is at least that
/// long), msyncs the range synchronously and unmaps it.
fn mmap_write(f: &File, offset: u64, data: &[u8]) -> std::io::Result<()> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let start = offset / page * page;
    let map_len = (offset + data.len() as u64 - start) as usize;
    // SAFETY: a valid descriptor opened read-write, a page-aligned offset inside the
    // file; the mapping is checked and unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(f),
            start as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the mapping covers start..start + map_len, and offset - start + data.len()
    // == map_len.
    unsafe {
        std::ptr::copy_nonoverlapping(
            data.as_ptr(),
            (addr as *mut u8).add((offset - start) as usize),
            data.len(),
        );
    }
    // SAFETY: the mapping made above, its whole length.
    let synced = unsafe { libc::msync(addr, map_len, libc::MS_SYNC) };
    let err = (synced != 0).then(std::io::Error::last_os_error);
    // SAFETY: the mapping made above, unmapped once.
    unsafe { libc::munmap(addr, map_len) };
    err.map_or(Ok(()), Err)
}

/// A path as the C string the raw calls take.
fn c_path(p: &Path) -> Result<std::ffi::CString, RunError> {
    std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str())).map_err(|_| {
        RunError::Io(p.to_path_buf(), std::io::Error::from(std::io::ErrorKind::InvalidInput))
    })
}

/// A raw call's return code as a result, naming `p`.
fn check_rc(rc: libc::c_int, p: &Path) -> Result<(), RunError> {
    if rc != 0 {
        return Err(RunError::Io(p.to_path_buf(), std::io::Error::last_os_error()));
    }
    Ok(())
}

/// linux/fs.h's `_IOW(0x94, 9, int)`; the libc crate does not export it.
const FICLONE: libc::c_ulong = 0x4004_9409;
/// `_IOW(0x94, 13, struct file_clone_range)`.
const FICLONERANGE: libc::c_ulong = 0x4020_940d;
/// `_IOWR(0x94, 54, struct file_dedupe_range)`.
const FIDEDUPERANGE: libc::c_ulong = 0xc018_9436;
/// `file_dedupe_range_info.status` when the two ranges' bytes differ (nothing shared).
const FILE_DEDUPE_RANGE_DIFFERS: i32 = 1;

/// struct file_clone_range.
#[repr(C)]
struct FileCloneRange {
    src_fd: i64,
    src_offset: u64,
    src_length: u64,
    dest_offset: u64,
}

/// struct file_dedupe_range with one struct file_dedupe_range_info after it.
#[repr(C)]
struct FileDedupeRange {
    src_offset: u64,
    src_length: u64,
    dest_count: u16,
    reserved1: u16,
    reserved2: u32,
    dest_fd: i64,
    dest_offset: u64,
    bytes_deduped: u64,
    status: i32,
    reserved: u32,
}

/// The clone, copy or dedupe `op` from `src` into `dst` (same offsets).
fn remap(op: &Op, src: &File, dst: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (s, d) = (src.as_raw_fd(), dst.as_raw_fd());
    let rc = match op {
        // SAFETY: two valid descriptors; FICLONE takes the source descriptor by value.
        Op::Clone { .. } => unsafe { libc::ioctl(d, FICLONE as _, s) },
        Op::CloneRange { offset, len, .. } => {
            let arg = FileCloneRange {
                src_fd: i64::from(s),
                src_offset: *offset,
                src_length: *len,
                dest_offset: *offset,
            };
            // SAFETY: a valid descriptor and a struct of the layout the ioctl reads.
            unsafe { libc::ioctl(d, FICLONERANGE as _, &arg) }
        }
        Op::CopyRange { offset, len, .. } => {
            let (mut off_in, mut off_out) = (*offset as i64, *offset as i64);
            let mut left = *len as usize;
            while left > 0 {
                // SAFETY: valid descriptors and offsets owned by this frame.
                let n = unsafe { libc::copy_file_range(s, &mut off_in, d, &mut off_out, left, 0) };
                match n {
                    n if n < 0 => return Err(std::io::Error::last_os_error()),
                    0 => break, // the source's end
                    n => left -= n as usize,
                }
            }
            0
        }
        Op::DedupeRange { offset, len, .. } => {
            let mut arg = FileDedupeRange {
                src_offset: *offset,
                src_length: *len,
                dest_count: 1,
                reserved1: 0,
                reserved2: 0,
                dest_fd: i64::from(d),
                dest_offset: *offset,
                bytes_deduped: 0,
                status: 0,
                reserved: 0,
            };
            // SAFETY: a valid descriptor and a struct of the layout the ioctl reads and
            // writes (one destination).
            let rc = unsafe { libc::ioctl(s, FIDEDUPERANGE as _, &mut arg) };
            if rc == 0 && arg.status < 0 {
                return Err(std::io::Error::from_raw_os_error(-arg.status));
            }
            // Differing bytes are not an error: nothing is shared, nothing changes.
            debug_assert!(rc != 0 || arg.status == 0 || arg.status == FILE_DEDUPE_RANGE_DIFFERS);
            rc
        }
        _ => 0,
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
