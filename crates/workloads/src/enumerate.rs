//! Bounded workload generation, after CrashMonkey's Ace: every sequence of `seq` core
//! operations over a small fixed set of files and directories, each followed by a
//! persistence point (fsync or fdatasync of a file or directory it touched, sync, or
//! none; never none after the last), with the files each op needs made before it: by
//! default in the setup (the base image, synced before recording), or, with
//! [`Bounds::deps_in_ops`], as Ace places its dependency ops: recorded with the core ops,
//! unsynced, just before the op that needs them (so a file or directory an op needs is
//! new in the crash states, as in Ace's workloads).
//!
//! The space is a mixed-radix number: each position picks one of the bounds' concrete
//! core ops and one of [`SLOTS`] persistence slots, so a workload is a pure function of
//! its index ([`Bounds::workload_at`]). Enumeration is then a counter (lazy: nothing is
//! held but the index, so millions stream), resuming is remembering an index, sampling
//! is drawing indices with a seed, and a shard is a residue class of indices. Indices
//! that do not make a valid workload (an op whose file an earlier op removed, a
//! persistence slot that repeats another or names nothing) are skipped, never renumbered.
//!
//! Differences from Ace, all forced by bob's sector stamps (the oracle classifies data
//! by 512-byte sector): "unaligned" ranges and sizes are 512-byte aligned but not
//! 4096-byte aligned (inside a block, crossing a block boundary); `remove` is not a
//! separate op (remove(3) of a file is unlink(2)). setxattr and removexattr act on the
//! first files with one attribute name, [`XATTR_NAME`]; a setxattr's value names its op
//! (`op3`), the setup's is `setup`, so a crash state tells which op's value persisted.

use crate::op::{FallocMode, Op, RenameHow};
use crate::rng::SplitMix64;
use crate::tree::NodeKind;
use crate::workload::{drain_ops, Guarantee, Params, Workload, DRAIN_FILE};
use crate::{model::parent, ModelState};
use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::str::FromStr;

/// The size of a file an op needs, as the setup writes it (old data): 16 KiB, Ace's.
pub const FILE_BYTES: u64 = 16384;

/// The extended attribute generated workloads set and remove (Ace's `user.xattr1`).
pub const XATTR_NAME: &str = "user.xattr1";

/// Persistence slots per position: fsync of each of up to four targets (the op's paths,
/// then their parents), fdatasync of each, sync, none.
pub const SLOTS: u64 = 10;
const TARGETS: usize = 4;

/// A core operation kind of the generator (Ace's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CoreOp {
    Creat,
    Mkdir,
    Falloc,
    Write,
    Dwrite,
    Mmapwrite,
    Link,
    Symlink,
    Unlink,
    Rename,
    Truncate,
    Setxattr,
    Removexattr,
    RenameExchange,
    RenameNoreplace,
    RenameWhiteout,
    Chmod,
    Chown,
    Utimes,
    Tmpfile,
    Clone,
    CloneRange,
    CopyRange,
    DedupeRange,
}

/// The mode chmod sets (files are made 0644).
pub const CHMOD_MODE: u32 = 0o600;
/// The owner chown sets (files are made by root).
pub const CHOWN_TO: (u32, u32) = (1001, 1002);
/// The time utimensat sets: 2001-09-09, far from any clock a workload runs under.
pub const UTIMES_TO: i64 = 1_000_000_000;
/// The bytes an O_TMPFILE file gets before it is linked: one block.
pub const TMPFILE_BYTES: u64 = 4096;

impl CoreOp {
    /// Ace's operation set, in its order (without remove: see the module doc).
    pub const ACE: &'static [CoreOp] = &[
        CoreOp::Creat,
        CoreOp::Mkdir,
        CoreOp::Falloc,
        CoreOp::Write,
        CoreOp::Dwrite,
        CoreOp::Mmapwrite,
        CoreOp::Link,
        CoreOp::Symlink,
        CoreOp::Unlink,
        CoreOp::Rename,
        CoreOp::Truncate,
        CoreOp::Setxattr,
        CoreOp::Removexattr,
    ];

    /// The operations beyond Ace's, where crash bugs of the last decade cluster: reflink,
    /// copy and dedupe, renameat2's flags, O_TMPFILE + linkat, and metadata-only changes.
    /// (fallocate's collapse, insert and unshare are modes of [`CoreOp::Falloc`]:
    /// [`FallocMode::BEYOND_ACE`].)
    pub const BEYOND_ACE: &'static [CoreOp] = &[
        CoreOp::Clone,
        CoreOp::CloneRange,
        CoreOp::CopyRange,
        CoreOp::DedupeRange,
        CoreOp::RenameExchange,
        CoreOp::RenameNoreplace,
        CoreOp::RenameWhiteout,
        CoreOp::Tmpfile,
        CoreOp::Chmod,
        CoreOp::Chown,
        CoreOp::Utimes,
    ];

    /// Ace's operations, then those beyond them.
    pub fn all() -> Vec<CoreOp> {
        [CoreOp::ACE, CoreOp::BEYOND_ACE].concat()
    }

    /// The core operation kind `op` is an instance of (setup ops included: the setup's
    /// writes are writes, its setxattr a setxattr), if it is one.
    pub fn of(op: &Op) -> Option<CoreOp> {
        Some(match op {
            Op::Creat { .. } => CoreOp::Creat,
            Op::Mkdir { .. } => CoreOp::Mkdir,
            Op::Falloc { .. } => CoreOp::Falloc,
            Op::Write { .. } | Op::Append { .. } => CoreOp::Write,
            Op::DirectWrite { .. } => CoreOp::Dwrite,
            Op::MmapWrite { .. } => CoreOp::Mmapwrite,
            Op::Link { .. } => CoreOp::Link,
            Op::Symlink { .. } => CoreOp::Symlink,
            Op::Unlink { .. } => CoreOp::Unlink,
            Op::Rename { .. } => CoreOp::Rename,
            Op::Truncate { .. } => CoreOp::Truncate,
            Op::Setxattr { .. } => CoreOp::Setxattr,
            Op::Removexattr { .. } => CoreOp::Removexattr,
            Op::Rename2 { how: RenameHow::Exchange, .. } => CoreOp::RenameExchange,
            Op::Rename2 { how: RenameHow::Noreplace, .. } => CoreOp::RenameNoreplace,
            Op::Rename2 { how: RenameHow::Whiteout, .. } => CoreOp::RenameWhiteout,
            Op::Chmod { .. } => CoreOp::Chmod,
            Op::Chown { .. } => CoreOp::Chown,
            Op::Utimes { .. } => CoreOp::Utimes,
            Op::TmpfileLink { .. } => CoreOp::Tmpfile,
            Op::Clone { .. } => CoreOp::Clone,
            Op::CloneRange { .. } => CoreOp::CloneRange,
            Op::CopyRange { .. } => CoreOp::CopyRange,
            Op::DedupeRange { .. } => CoreOp::DedupeRange,
            _ => return None,
        })
    }

    /// The name flags use.
    pub fn name(self) -> &'static str {
        match self {
            CoreOp::Creat => "creat",
            CoreOp::Mkdir => "mkdir",
            CoreOp::Falloc => "falloc",
            CoreOp::Write => "write",
            CoreOp::Dwrite => "dwrite",
            CoreOp::Mmapwrite => "mmapwrite",
            CoreOp::Link => "link",
            CoreOp::Symlink => "symlink",
            CoreOp::Unlink => "unlink",
            CoreOp::Rename => "rename",
            CoreOp::Truncate => "truncate",
            CoreOp::Setxattr => "setxattr",
            CoreOp::Removexattr => "removexattr",
            CoreOp::RenameExchange => "rename-exchange",
            CoreOp::RenameNoreplace => "rename-noreplace",
            CoreOp::RenameWhiteout => "rename-whiteout",
            CoreOp::Chmod => "chmod",
            CoreOp::Chown => "chown",
            CoreOp::Utimes => "utimes",
            CoreOp::Tmpfile => "tmpfile",
            CoreOp::Clone => "clone",
            CoreOp::CloneRange => "clone-range",
            CoreOp::CopyRange => "copy-range",
            CoreOp::DedupeRange => "dedupe-range",
        }
    }
}

/// A persistence point kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Persist {
    Fsync,
    Fdatasync,
    Sync,
    None,
}

impl Persist {
    /// All of them.
    pub const ALL: &'static [Persist] =
        &[Persist::Fsync, Persist::Fdatasync, Persist::Sync, Persist::None];

    /// The name flags use.
    pub fn name(self) -> &'static str {
        match self {
            Persist::Fsync => "fsync",
            Persist::Fdatasync => "fdatasync",
            Persist::Sync => "sync",
            Persist::None => "none",
        }
    }
}

/// A byte range of a data op, relative to the setup's [`FILE_BYTES`] of old data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Range {
    /// 16 KiB + 4 KiB: past the end, aligned.
    Append,
    /// 7680 + 4096: inside the file, not block-aligned, across a block boundary.
    OverlapUnaligned,
    /// 14848 + 4096: across the end of the file, not block-aligned.
    OverlapExtend,
    /// 8192 + 4096: inside the file, block-aligned.
    OverlapAligned,
}

impl Range {
    /// Every range.
    pub const ALL: &'static [Range] =
        &[Range::Append, Range::OverlapUnaligned, Range::OverlapExtend, Range::OverlapAligned];

    /// The name flags use.
    pub fn name(self) -> &'static str {
        match self {
            Range::Append => "append",
            Range::OverlapUnaligned => "overlap-unaligned",
            Range::OverlapExtend => "overlap-extend",
            Range::OverlapAligned => "overlap-aligned",
        }
    }

    /// (offset, length).
    pub fn bytes(self) -> (u64, u64) {
        match self {
            Range::Append => (FILE_BYTES, 4096),
            Range::OverlapUnaligned => (7680, 4096),
            Range::OverlapExtend => (FILE_BYTES - 1536, 4096),
            Range::OverlapAligned => (8192, 4096),
        }
    }
}

/// A truncate target size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TruncateTo {
    /// 8192: a block boundary.
    Aligned,
    /// 7680: inside a block.
    Unaligned,
}

impl TruncateTo {
    /// Both.
    pub const ALL: &'static [TruncateTo] = &[TruncateTo::Aligned, TruncateTo::Unaligned];

    /// The name flags use.
    pub fn name(self) -> &'static str {
        match self {
            TruncateTo::Aligned => "aligned",
            TruncateTo::Unaligned => "unaligned",
        }
    }

    /// The size.
    pub fn size(self) -> u64 {
        match self {
            TruncateTo::Aligned => 8192,
            TruncateTo::Unaligned => 7680,
        }
    }
}

macro_rules! from_name {
    ($t:ty, $all:expr, $what:literal) => {
        impl FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $all.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $all.iter().map(|v| v.name()).collect();
                    format!(concat!("unknown ", $what, " {:?} (known: {})"), s, names.join(", "))
                })
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
from_name!(CoreOp, CoreOp::all(), "operation");
from_name!(Persist, Persist::ALL, "persistence point");
from_name!(Range, Range::ALL, "write range");
from_name!(TruncateTo, TruncateTo::ALL, "truncate size");

/// The bounds of an exploration. [`Bounds::ace`] gives Ace's defaults; every field can be
/// narrowed or widened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Core ops per workload.
    pub seq: usize,
    /// The core operation kinds.
    pub ops: Vec<CoreOp>,
    /// The persistence points.
    pub persist: Vec<Persist>,
    /// First files (an op's only or first argument): Ace's `foo`, `A/foo`.
    pub files: Vec<String>,
    /// Second files (link, symlink and rename targets, also unlinked): `bar`, `A/bar`.
    pub second_files: Vec<String>,
    /// Directories made and renamed: `A`.
    pub dirs: Vec<String>,
    /// Directory rename targets: `B`.
    pub second_dirs: Vec<String>,
    /// Ranges of buffered writes and fallocate.
    pub ranges: Vec<Range>,
    /// Ranges of O_DIRECT and mmap writes.
    pub direct_ranges: Vec<Range>,
    /// fallocate modes.
    pub falloc_modes: Vec<FallocMode>,
    /// truncate sizes.
    pub truncate: Vec<TruncateTo>,
    /// Promises beyond POSIX the oracle holds every workload to.
    pub guarantees: Vec<Guarantee>,
    /// What workload names start with (`ace`, `beyond`, `all`): the operation set the
    /// index counts in, so that two sets' workloads of one index never share a name.
    pub name_prefix: &'static str,
    /// Whether the files and directories an op needs are made among the recorded ops,
    /// unsynced, just before it (Ace's placement; names get `-deps`), instead of in the
    /// synced setup (bob's default: each crash state then starts from durable files).
    pub deps_in_ops: bool,
}

impl Bounds {
    /// Ace's default bounds for `seq` core ops.
    pub fn ace(seq: usize) -> Bounds {
        let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        Bounds {
            seq,
            ops: CoreOp::ACE.to_vec(),
            persist: Persist::ALL.to_vec(),
            files: s(&["/foo", "/A/foo"]),
            second_files: s(&["/bar", "/A/bar"]),
            dirs: s(&["/A"]),
            second_dirs: s(&["/B"]),
            ranges: vec![Range::Append, Range::OverlapUnaligned, Range::OverlapExtend],
            direct_ranges: vec![Range::Append, Range::OverlapAligned],
            falloc_modes: FallocMode::ACE.to_vec(),
            truncate: TruncateTo::ALL.to_vec(),
            guarantees: Vec::new(),
            name_prefix: "ace",
            deps_in_ops: false,
        }
    }

    /// The operations beyond Ace's ([`CoreOp::BEYOND_ACE`], and fallocate with only its
    /// modes beyond Ace's) over Ace's files, ranges and persistence points.
    pub fn beyond_ace(seq: usize) -> Bounds {
        let mut b = Bounds::ace(seq);
        b.ops = CoreOp::BEYOND_ACE.to_vec();
        b.ops.push(CoreOp::Falloc);
        b.falloc_modes = FallocMode::BEYOND_ACE.to_vec();
        b.name_prefix = "beyond";
        b
    }

    /// Ace's operations and those beyond them, every fallocate mode.
    pub fn all_ops(seq: usize) -> Bounds {
        let mut b = Bounds::ace(seq);
        b.ops = CoreOp::all();
        b.falloc_modes = FallocMode::all();
        b.name_prefix = "all";
        b
    }

    /// The ranges of `self.ranges` and `self.direct_ranges` that start inside a file of
    /// [`FILE_BYTES`] (and, with `aligned`, are block-aligned and end before its end): what
    /// copies, clones, dedupes and fallocate's shifts can act on.
    fn inside_ranges(&self, aligned: bool) -> Vec<Range> {
        let mut out: Vec<Range> = self
            .ranges
            .iter()
            .chain(&self.direct_ranges)
            .copied()
            .filter(|r| {
                let (offset, len) = r.bytes();
                offset < FILE_BYTES
                    && (!aligned
                        || (offset % 4096 == 0 && len % 4096 == 0 && offset + len < FILE_BYTES))
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Ace's nested file set (`-n True`): a directory `A/C` with files `A/C/foo` and
    /// `A/C/bar` added.
    pub fn nested(mut self) -> Bounds {
        self.files.push("/A/C/foo".into());
        self.second_files.push("/A/C/bar".into());
        self.dirs.push("/A/C".into());
        self
    }

    /// Every concrete core op the bounds allow, in a fixed order.
    pub fn core_ops(&self) -> Vec<Op> {
        let mut out = Vec::new();
        let s = |p: &String| p.clone();
        let both: Vec<&String> = self.files.iter().chain(&self.second_files).collect();
        for &kind in &self.ops {
            match kind {
                CoreOp::Creat => {
                    out.extend(self.files.iter().map(|p| Op::Creat { path: s(p), sync: false }))
                }
                CoreOp::Mkdir => out.extend(self.dirs.iter().map(|p| Op::Mkdir { path: s(p) })),
                CoreOp::Falloc => {
                    for p in &self.files {
                        for &mode in &self.falloc_modes {
                            let ranges = if mode.shifts() {
                                self.inside_ranges(true)
                            } else {
                                self.ranges.clone()
                            };
                            for r in &ranges {
                                let (offset, len) = r.bytes();
                                out.push(Op::Falloc { path: s(p), mode, offset, len });
                            }
                        }
                    }
                }
                CoreOp::Write => {
                    for p in &self.files {
                        for r in &self.ranges {
                            let (offset, len) = r.bytes();
                            out.push(Op::Write { path: s(p), offset, len });
                        }
                    }
                }
                CoreOp::Dwrite | CoreOp::Mmapwrite => {
                    for p in &self.files {
                        for r in &self.direct_ranges {
                            let (offset, len) = r.bytes();
                            out.push(if kind == CoreOp::Dwrite {
                                Op::DirectWrite { path: s(p), offset, len }
                            } else {
                                Op::MmapWrite { path: s(p), offset, len }
                            });
                        }
                    }
                }
                CoreOp::Link | CoreOp::Symlink | CoreOp::Rename => {
                    for from in &both {
                        for to in &self.second_files {
                            if *from == to {
                                continue;
                            }
                            out.push(match kind {
                                CoreOp::Link => Op::Link { from: s(from), to: s(to) },
                                CoreOp::Symlink => Op::Symlink { target: s(from), path: s(to) },
                                _ => Op::Rename { from: s(from), to: s(to) },
                            });
                        }
                    }
                    if kind == CoreOp::Rename {
                        for from in self.dirs.iter().chain(&self.second_dirs) {
                            for to in &self.second_dirs {
                                if from != to {
                                    out.push(Op::Rename { from: s(from), to: s(to) });
                                }
                            }
                        }
                    }
                }
                CoreOp::Unlink => out.extend(both.iter().map(|p| Op::Unlink { path: s(p) })),
                CoreOp::Truncate => {
                    for p in &self.files {
                        for t in &self.truncate {
                            out.push(Op::Truncate { path: s(p), size: t.size() });
                        }
                    }
                }
                CoreOp::Setxattr => out.extend(self.files.iter().map(|p| Op::Setxattr {
                    path: s(p),
                    name: XATTR_NAME.into(),
                    // Replaced by the op's own index in `workload_at`.
                    value: String::new(),
                })),
                CoreOp::Clone
                | CoreOp::CloneRange
                | CoreOp::CopyRange
                | CoreOp::DedupeRange
                | CoreOp::RenameExchange
                | CoreOp::RenameNoreplace
                | CoreOp::RenameWhiteout
                | CoreOp::Chmod
                | CoreOp::Chown
                | CoreOp::Utimes
                | CoreOp::Tmpfile => self.beyond_ace_ops(kind, &mut out),
                CoreOp::Removexattr => out.extend(
                    self.files
                        .iter()
                        .map(|p| Op::Removexattr { path: s(p), name: XATTR_NAME.into() }),
                ),
            }
        }
        out
    }

    /// The concrete ops of an operation beyond Ace's, appended to `out`.
    fn beyond_ace_ops(&self, kind: CoreOp, out: &mut Vec<Op>) {
        let s = |p: &String| p.clone();
        let both: Vec<&String> = self.files.iter().chain(&self.second_files).collect();
        match kind {
            CoreOp::Clone | CoreOp::CloneRange | CoreOp::CopyRange | CoreOp::DedupeRange => {
                let ranges = match kind {
                    CoreOp::Clone => vec![None],
                    CoreOp::CopyRange => self.inside_ranges(false).into_iter().map(Some).collect(),
                    _ => self.inside_ranges(true).into_iter().map(Some).collect(),
                };
                for from in &self.files {
                    for to in &self.second_files {
                        for r in &ranges {
                            let (from, to) = (s(from), s(to));
                            let (offset, len) = r.map(Range::bytes).unwrap_or((0, 0));
                            out.push(match kind {
                                CoreOp::Clone => Op::Clone { from, to },
                                CoreOp::CloneRange => Op::CloneRange { from, to, offset, len },
                                CoreOp::CopyRange => Op::CopyRange { from, to, offset, len },
                                _ => Op::DedupeRange { from, to, offset, len },
                            });
                        }
                    }
                }
            }
            CoreOp::RenameExchange | CoreOp::RenameNoreplace | CoreOp::RenameWhiteout => {
                let how = match kind {
                    CoreOp::RenameExchange => RenameHow::Exchange,
                    CoreOp::RenameNoreplace => RenameHow::Noreplace,
                    _ => RenameHow::Whiteout,
                };
                for from in &both {
                    for to in self.second_files.iter().filter(|t| t != from) {
                        out.push(Op::Rename2 { from: s(from), to: s(to), how });
                    }
                }
                if how != RenameHow::Whiteout {
                    for from in self.dirs.iter().chain(&self.second_dirs) {
                        for to in self.second_dirs.iter().filter(|t| *t != from) {
                            out.push(Op::Rename2 { from: s(from), to: s(to), how });
                        }
                    }
                }
            }
            CoreOp::Chmod => {
                out.extend(self.files.iter().map(|p| Op::Chmod { path: s(p), mode: CHMOD_MODE }))
            }
            CoreOp::Chown => out.extend(self.files.iter().map(|p| Op::Chown {
                path: s(p),
                uid: CHOWN_TO.0,
                gid: CHOWN_TO.1,
            })),
            CoreOp::Utimes => {
                out.extend(self.files.iter().map(|p| Op::Utimes { path: s(p), mtime: UTIMES_TO }))
            }
            CoreOp::Tmpfile => out.extend(
                self.files.iter().map(|p| Op::TmpfileLink { path: s(p), len: TMPFILE_BYTES }),
            ),
            _ => {}
        }
    }

    /// A generator over these bounds (the core ops computed once).
    pub fn generator(&self) -> Generator {
        Generator { bounds: self.clone(), core: self.core_ops() }
    }
}

/// Workloads of one [`Bounds`], by index.
#[derive(Clone, Debug)]
pub struct Generator {
    bounds: Bounds,
    core: Vec<Op>,
}

/// What the dependency pass needs a path to be before an op.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    /// A directory.
    Dir,
    /// A file with [`FILE_BYTES`] of old data.
    File,
    /// Nothing there (its parent a directory).
    Absent,
    /// A file (as [`Need::File`]) with the attribute [`XATTR_NAME`] set.
    FileWithXattr,
}

impl Generator {
    /// The bounds.
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// The number of indices (valid workloads and skipped ones): (core ops x [`SLOTS`])
    /// to the power `seq`; saturates at `u64::MAX`.
    pub fn indices(&self) -> u64 {
        let radix = self.core.len() as u64 * SLOTS;
        (0..self.bounds.seq).try_fold(1u64, |acc, _| acc.checked_mul(radix)).unwrap_or(u64::MAX)
    }

    /// Valid workloads from index `from` on, in index order, lazily.
    pub fn iter_from(&self, from: u64) -> impl Iterator<Item = (u64, Workload)> + '_ {
        (from..self.indices()).filter_map(move |i| self.workload_at(i).map(|w| (i, w)))
    }

    /// `k` distinct valid workloads drawn with `seed`, in drawing order (deterministic;
    /// fewer if the space holds fewer, found within a bounded number of draws).
    pub fn sample(&self, k: usize, seed: u64) -> impl Iterator<Item = (u64, Workload)> + '_ {
        let mut rng = SplitMix64::new(seed);
        let mut seen = HashSet::new();
        let total = self.indices();
        let mut found = 0usize;
        let mut draws = 0u64;
        let max_draws = (k as u64).saturating_mul(200).max(10_000);
        std::iter::from_fn(move || {
            while found < k && draws < max_draws && total > 0 {
                draws += 1;
                let i = rng.below(total);
                if !seen.insert(i) {
                    continue;
                }
                if let Some(w) = self.workload_at(i) {
                    found += 1;
                    return Some((i, w));
                }
            }
            None
        })
    }

    /// The workload at `index`, or `None` where the index makes none (see the module doc).
    pub fn workload_at(&self, index: u64) -> Option<Workload> {
        let seq = self.bounds.seq;
        if seq == 0 || self.core.is_empty() || index >= self.indices() {
            return None;
        }
        let radix = self.core.len() as u64 * SLOTS;
        let mut digits = vec![0u64; seq];
        let mut rest = index;
        for d in digits.iter_mut().rev() {
            *d = rest % radix;
            rest /= radix;
        }
        let mut setup_model = ModelState::new();
        let mut setup = vec![Op::Creat { path: DRAIN_FILE.into(), sync: false }];
        setup_model.apply(&setup[0], crate::stamp::SETUP_OP).ok()?;
        let mut now = setup_model.clone();
        // With deps in the ops, what they made so far (the setup's model stays the
        // drain file's alone).
        let mut deps_model = setup_model.clone();
        let mut touched: BTreeSet<String> = BTreeSet::new();
        let mut xattr_touched: BTreeSet<String> = BTreeSet::new();
        let mut ops = Vec::new();
        for (pos, digit) in digits.iter().enumerate() {
            let mut core = self.core[(digit / SLOTS) as usize].clone();
            if let Op::Setxattr { value, .. } = &mut core {
                *value = format!("op{}", ops.len());
            }
            let core = &core;
            let slot = digit % SLOTS;
            for (path, need) in needs(core) {
                let (into, model) = match self.bounds.deps_in_ops {
                    true => (Place::Ops(&mut ops), &mut deps_model),
                    false => (Place::Setup(&mut setup), &mut setup_model),
                };
                satisfy(&path, need, into, model, &mut now, &touched, &xattr_touched)?;
            }
            now.apply(core, ops.len() as u32).ok()?;
            touched.extend(core.paths().into_iter().map(str::to_owned));
            if core.is_xattr() {
                xattr_touched.extend(core.paths().into_iter().map(str::to_owned));
            }
            ops.push(core.clone());
            let persist = self.persist_op(core, slot, &now, pos + 1 == seq)?;
            if let Some(p) = persist {
                now.apply(&p, ops.len() as u32).ok()?;
                ops.push(p);
            }
        }
        let params = Params::default();
        let w = Workload {
            name: format!(
                "{}{}-s{seq}-{index}",
                self.bounds.name_prefix,
                if self.bounds.deps_in_ops { "-deps" } else { "" }
            ),
            property: None,
            setup,
            ops,
            drain: drain_ops(&params),
            commit_midway: Vec::new(),
            guarantees: self.bounds.guarantees.clone(),
        };
        // The whole workload must model (setup, ops and drain), as the recorder checks.
        (crate::model::model_states(&w).len() == w.ops.len() + 1).then_some(w)
    }

    /// The persistence op of `slot` after `core` (state `now`): `Some(None)` for none,
    /// `None` where the slot makes no workload (not in the bounds, no such target, a
    /// repeat of an earlier slot, none after the last op).
    fn persist_op(&self, core: &Op, slot: u64, now: &ModelState, last: bool) -> Option<Option<Op>> {
        let allowed = |p: Persist| self.bounds.persist.contains(&p);
        let targets = targets(core, now);
        let kind_of = |p: &str| now.node(p).map(|n| n.kind);
        let make = |slot: u64| -> Option<Option<Op>> {
            let t = slot as usize;
            match slot {
                0..=3 if allowed(Persist::Fsync) => {
                    let path = targets.get(t)?;
                    Some(Some(Op::Fsync { path: path.clone() }))
                }
                4..=7 if allowed(Persist::Fdatasync) => {
                    let path = targets.get(t - TARGETS)?;
                    (kind_of(path) == Some(NodeKind::File))
                        .then(|| Some(Op::Fdatasync { path: path.clone() }))
                }
                8 if allowed(Persist::Sync) => Some(Some(Op::Sync)),
                9 if allowed(Persist::None) && !last => Some(None),
                _ => None,
            }
        };
        let op = make(slot)?;
        // Canonical: no earlier slot gives the same op.
        if (0..slot).any(|s| make(s).as_ref() == Some(&op)) {
            return None;
        }
        Some(op)
    }
}

/// The persistence targets after `core`: its paths, then their parents, each once, only
/// those that exist in `now` as files or directories.
fn targets(core: &Op, now: &ModelState) -> Vec<String> {
    let paths: Vec<String> = core.paths().into_iter().map(str::to_owned).collect();
    let mut out: Vec<String> = Vec::new();
    for p in paths.iter().cloned().chain(paths.iter().map(|p| parent(p).to_owned())) {
        let ok = p == "/"
            || now.node(&p).is_some_and(|n| matches!(n.kind, NodeKind::File | NodeKind::Dir));
        if ok && !out.contains(&p) {
            out.push(p);
        }
    }
    out.truncate(TARGETS);
    out
}

/// What `op` needs of each path it names before it runs.
fn needs(op: &Op) -> Vec<(String, Need)> {
    let s = |p: &String| p.clone();
    match op {
        Op::Creat { path, .. } | Op::Mkdir { path } | Op::Symlink { path, .. } => {
            vec![(parent(path).to_owned(), Need::Dir), (s(path), Need::Absent)]
        }
        Op::Link { from, to } => {
            vec![(s(from), Need::File), (parent(to).to_owned(), Need::Dir), (s(to), Need::Absent)]
        }
        Op::Rename { from, to } | Op::Rename2 { from, to, .. } => {
            // A directory of the bounds is renamed as one; everything else is a file.
            let dir = !from.contains("foo") && !from.contains("bar");
            let kind = if dir { Need::Dir } else { Need::File };
            // An exchange needs both names; the others need the target free.
            let exchange = matches!(op, Op::Rename2 { how: RenameHow::Exchange, .. });
            vec![
                (s(from), kind),
                (parent(to).to_owned(), Need::Dir),
                (s(to), if exchange { kind } else { Need::Absent }),
            ]
        }
        Op::TmpfileLink { path, .. } => {
            vec![(parent(path).to_owned(), Need::Dir), (s(path), Need::Absent)]
        }
        Op::Clone { from, to }
        | Op::CloneRange { from, to, .. }
        | Op::CopyRange { from, to, .. }
        | Op::DedupeRange { from, to, .. } => vec![(s(from), Need::File), (s(to), Need::File)],
        Op::Chmod { path, .. } | Op::Chown { path, .. } | Op::Utimes { path, .. } => {
            vec![(s(path), Need::File)]
        }
        Op::Write { path, .. }
        | Op::DirectWrite { path, .. }
        | Op::MmapWrite { path, .. }
        | Op::Falloc { path, .. }
        | Op::Truncate { path, .. }
        | Op::Setxattr { path, .. }
        | Op::Unlink { path } => vec![(s(path), Need::File)],
        Op::Removexattr { path, .. } => vec![(s(path), Need::FileWithXattr)],
        _ => Vec::new(),
    }
}

/// Where [`satisfy`] puts the ops it makes.
enum Place<'a> {
    /// The setup, stamped as the setup's.
    Setup(&'a mut Vec<Op>),
    /// The recorded ops, each stamped with its own index.
    Ops(&'a mut Vec<Op>),
}

impl Place<'_> {
    /// The stamp of the next op put here.
    fn next_stamp(&self) -> u32 {
        match self {
            Place::Setup(_) => crate::stamp::SETUP_OP,
            Place::Ops(ops) => ops.len() as u32,
        }
    }

    fn push(&mut self, op: Op) {
        match self {
            Place::Setup(v) | Place::Ops(v) => v.push(op),
        }
    }

    fn reborrow(&mut self) -> Place<'_> {
        match self {
            Place::Setup(v) => Place::Setup(v),
            Place::Ops(v) => Place::Ops(v),
        }
    }
}

/// Makes `path` what `need` says (in the setup, or among the ops: `into`), if no core op
/// touched it yet; `setup_model` is what was made so far. `None` where that cannot be
/// (the workload is then skipped).
fn satisfy(
    path: &str,
    need: Need,
    mut into: Place<'_>,
    setup_model: &mut ModelState,
    now: &mut ModelState,
    touched: &BTreeSet<String>,
    xattr_touched: &BTreeSet<String>,
) -> Option<()> {
    let kind = now.node(path).map(|n| n.kind);
    let ok = match need {
        Need::Dir => path == "/" || kind == Some(NodeKind::Dir),
        Need::File => kind == Some(NodeKind::File),
        Need::FileWithXattr => {
            kind == Some(NodeKind::File)
                && now.node(path).is_some_and(|n| n.xattrs.contains_key(XATTR_NAME))
        }
        Need::Absent => kind.is_none() && path != "/",
    };
    if ok {
        return Some(());
    }
    // A file the setup made and no core op has replaced, whose attribute no core op has
    // set or removed: the setup sets it too.
    if need == Need::FileWithXattr && kind == Some(NodeKind::File) {
        let same_file = setup_model.id(path).is_some() && setup_model.id(path) == now.id(path);
        let setup_node = setup_model.node(path)?;
        if !same_file || setup_node.xattrs.contains_key(XATTR_NAME) || xattr_touched.contains(path)
        {
            return None;
        }
        let op = Op::Setxattr { path: path.into(), name: XATTR_NAME.into(), value: "setup".into() };
        let stamp = into.next_stamp();
        setup_model.apply(&op, stamp).ok()?;
        now.apply(&op, stamp).ok()?;
        into.push(op);
        return Some(());
    }
    // Only what no core op has touched (nor any directory above it) may come from setup.
    let untouched = |p: &str| {
        !touched.iter().any(|t| p == t || p.starts_with(&format!("{t}/")))
            && setup_model.id(p).is_none()
    };
    if need == Need::Absent || kind.is_some() || !untouched(path) {
        return None;
    }
    if parent(path) != "/" {
        let parent_into = into.reborrow();
        satisfy(parent(path), Need::Dir, parent_into, setup_model, now, touched, xattr_touched)?;
    }
    let mut add = |op: Op| -> Option<()> {
        let stamp = into.next_stamp();
        setup_model.apply(&op, stamp).ok()?;
        now.apply(&op, stamp).ok()?;
        into.push(op);
        Some(())
    };
    match need {
        Need::Dir => add(Op::Mkdir { path: path.into() }),
        Need::File | Need::FileWithXattr => {
            add(Op::Creat { path: path.into(), sync: false })?;
            add(Op::Write { path: path.into(), offset: 0, len: FILE_BYTES })?;
            if need == Need::FileWithXattr {
                add(Op::Setxattr {
                    path: path.into(),
                    name: XATTR_NAME.into(),
                    value: "setup".into(),
                })?;
            }
            Some(())
        }
        Need::Absent => None,
    }
}

/// `w` without op `k`, renamed `name`, if the model still runs it and it still has a
/// persistence point (a workload without one promises nothing).
pub fn without(w: &Workload, k: usize, name: &str) -> Option<Workload> {
    let mut c = w.clone();
    if k >= c.ops.len() {
        return None;
    }
    c.ops.remove(k);
    c.name = name.to_owned();
    let ok = !c.ops.is_empty()
        && c.ops.iter().any(|o| o.is_persistence_point())
        && crate::model::model_states(&c).len() == c.ops.len() + 1;
    ok.then_some(c)
}

/// Shrinks a failing workload: drops ops one at a time, from the last to the first, and
/// keeps each drop after which `fails` still says the failure reproduces; candidates are
/// named `NAME-minN` (N counts the attempts, so each run has a directory of its own).
/// Returns the smallest workload found (`w` itself if no op could go).
pub fn shrink<E>(
    w: &Workload,
    mut fails: impl FnMut(&Workload) -> Result<bool, E>,
) -> Result<Workload, E> {
    let mut best = w.clone();
    let mut attempt = 0;
    let mut k = best.ops.len();
    while k > 0 {
        k -= 1;
        attempt += 1;
        let Some(candidate) = without(&best, k, &format!("{}-min{attempt}", w.name)) else {
            continue;
        };
        if fails(&candidate)? {
            best = candidate;
            k = k.min(best.ops.len());
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrinking_drops_every_op_the_failure_does_not_need() {
        // A seq-3 workload; the "failure" needs the creat of /A/foo and a fsync of it.
        let g = Bounds::ace(3).generator();
        let needs = |w: &Workload| {
            w.ops.contains(&Op::Creat { path: "/A/foo".into(), sync: false })
                && w.ops.contains(&Op::Fsync { path: "/A/foo".into() })
        };
        let (_, w) = g
            .iter_from(0)
            .find(|(_, w)| needs(w) && w.ops.len() >= 5)
            .expect("such a workload exists");
        let mut runs = 0;
        let min = shrink(&w, |c| {
            runs += 1;
            Ok::<bool, ()>(needs(c))
        })
        .unwrap();
        assert_eq!(
            min.ops,
            vec![
                Op::Creat { path: "/A/foo".into(), sync: false },
                Op::Fsync { path: "/A/foo".into() }
            ],
            "from {:?}",
            w.ops
        );
        assert!(min.name.starts_with(&format!("{}-min", w.name)));
        assert!(runs >= w.ops.len() - 2);
        // A failure that needs everything keeps everything.
        assert_eq!(shrink(&w, |c| Ok::<bool, ()>(c.ops.len() == w.ops.len())).unwrap(), w);
        // Errors stop it.
        assert_eq!(shrink(&w, |_| Err::<bool, &str>("bob failed")), Err("bob failed"));
    }

    /// The oracle judges the generated ops: for every seq-1 workload ending in a fsync,
    /// fdatasync or sync that promises something about the op (a data op's file, a new
    /// name under a sync), the tree as it was before the op fails the promise and the
    /// tree after it holds.
    #[test]
    fn every_generated_op_kind_can_fail_its_promise() {
        let mut b = Bounds::ace(1);
        b.guarantees = vec![Guarantee::FsyncPersistsName];
        let g = b.generator();
        let mut failed_kinds = BTreeSet::new();
        for (i, w) in g.iter_from(0) {
            let states = crate::model_states(&w);
            let observed = crate::Observed::default();
            let ctx = crate::CrashContext { durable_ops: vec![w.ops.len() - 1] };
            let after = states.last().unwrap().to_snapshot(&observed);
            let held = crate::check_all(&w, &observed, &after, &ctx);
            assert!(held.is_empty(), "{i} {:?}: the tree after the ops fails: {held:?}", w.ops);
            let before = states[0].to_snapshot(&observed);
            if !crate::check_all(&w, &observed, &before, &ctx).is_empty() {
                failed_kinds.insert(w.ops[0].kind().name());
            }
        }
        for kind in [
            "creat",
            "mkdir",
            "falloc",
            "overwrite",
            "direct-write",
            "mmap-write",
            "link",
            "symlink",
            "unlink",
            "rename",
            "truncate",
        ] {
            assert!(failed_kinds.contains(kind), "no {kind} promise ever failed: {failed_kinds:?}");
        }
    }

    /// The operations beyond Ace's, judged as Ace's are: for every seq-1 workload the
    /// tree after the ops holds, and every kind that changes what a reader sees can fail
    /// its promise (the tree before the op, with attributes other than the ones set).
    #[test]
    fn every_operation_beyond_ace_can_fail_its_promise() {
        let mut b = Bounds::beyond_ace(1);
        b.guarantees = vec![Guarantee::FsyncPersistsName];
        let g = b.generator();
        let mut failed_kinds = BTreeSet::new();
        let mut kinds = BTreeSet::new();
        for (i, w) in g.iter_from(0) {
            assert!(w.name.starts_with("beyond-s1-"), "{}", w.name);
            kinds.insert(w.ops[0].kind().name());
            let states = crate::model_states(&w);
            assert_eq!(states.len(), w.ops.len() + 1, "{i}: models");
            // Every node its own inode number (as `to_snapshot` gives them), so that a
            // name holding another file is seen to.
            let last = states.last().unwrap();
            let observed = crate::Observed {
                inos: (0..last.next_id).map(|id| (id, 1_000_000 + u64::from(id))).collect(),
            };
            let ctx = crate::CrashContext { durable_ops: vec![w.ops.len() - 1] };
            let after = states.last().unwrap().to_snapshot(&observed);
            let held = crate::check_all(&w, &observed, &after, &ctx);
            assert!(held.is_empty(), "{i} {:?}: the tree after the ops fails: {held:?}", w.ops);
            let mut before = states[0].to_snapshot(&observed);
            for node in before.entries.values_mut() {
                node.meta = Some(crate::InodeMeta {
                    mode: Some(0o644),
                    owner: Some((0, 0)),
                    mtime: Some(1_700_000_000),
                });
            }
            if !crate::check_all(&w, &observed, &before, &ctx).is_empty() {
                failed_kinds.insert(w.ops[0].kind().name());
            }
        }
        for kind in [
            "clone",
            "clone-range",
            "copy-range",
            "rename-exchange",
            "rename-noreplace",
            "rename-whiteout",
            "tmpfile-link",
            "chmod",
            "chown",
            "utimes",
            "falloc",
        ] {
            assert!(failed_kinds.contains(kind), "no {kind} promise ever failed: {failed_kinds:?}");
        }
        // A dedupe changes nothing a reader sees: nothing to fail, but it is generated.
        assert!(kinds.contains("dedupe-range") && !failed_kinds.contains("dedupe-range"));
    }

    fn count(b: &Bounds) -> usize {
        b.generator().iter_from(0).count()
    }

    #[test]
    fn deps_in_ops_are_recorded_unsynced_before_the_op_that_needs_them() {
        let mut b = Bounds::ace(1);
        b.ops = vec![CoreOp::Creat, CoreOp::Write, CoreOp::Link];
        b.files = vec!["/A/foo".into()];
        b.second_files = vec!["/A/bar".into()];
        let in_setup: Vec<Workload> = b.generator().iter_from(0).map(|(_, w)| w).collect();
        b.deps_in_ops = true;
        let in_ops: Vec<Workload> = b.generator().iter_from(0).map(|(_, w)| w).collect();
        // The same workloads, one for one: only where the dependencies are differs.
        assert_eq!(in_setup.len(), in_ops.len());
        for (s, o) in in_setup.iter().zip(&in_ops) {
            assert!(o.name.starts_with("ace-deps-s1-"), "{}", o.name);
            assert_eq!(o.setup, s.setup[..1], "only the drain file is made in the setup");
            assert_eq!(o.ops[o.ops.len() - s.ops.len()..], s.ops[..], "{}", o.name);
            assert_eq!(o.ops[..o.ops.len() - s.ops.len()], s.setup[1..], "{}", o.name);
            // Every op of it models, stamped with its own index.
            assert_eq!(crate::model::model_states(o).len(), o.ops.len() + 1, "{}", o.name);
        }
        // link /A/foo /A/bar: /A and /A/foo with its 16 KiB are made first, unsynced.
        let link = in_ops.iter().find(|w| matches!(w.ops.get(3), Some(Op::Link { .. }))).unwrap();
        assert_eq!(link.ops[0], Op::Mkdir { path: "/A".into() });
        assert_eq!(link.ops[1], Op::Creat { path: "/A/foo".into(), sync: false });
        assert_eq!(link.ops[2], Op::Write { path: "/A/foo".into(), offset: 0, len: FILE_BYTES });
    }

    #[test]
    fn small_bounds_count_exactly() {
        // creat /A/foo: setup makes /A; persistence: fsync /A/foo, fsync /A, fdatasync
        // /A/foo, sync (none is not allowed last): 4.
        let mut b = Bounds::ace(1);
        b.ops = vec![CoreOp::Creat];
        b.files = vec!["/A/foo".into()];
        assert_eq!(count(&b), 4);
        let all: Vec<Workload> = b.generator().iter_from(0).map(|(_, w)| w).collect();
        assert_eq!(all[0].setup[1], Op::Mkdir { path: "/A".into() });
        assert_eq!(all[0].ops[1], Op::Fsync { path: "/A/foo".into() });
        // /foo: its parent is the root; fsync /foo, fsync /, fdatasync /foo, sync.
        b.files = vec!["/foo".into()];
        assert_eq!(count(&b), 4);
        // Two files, only fsync: 2 x 2.
        b.files = vec!["/foo".into(), "/A/foo".into()];
        b.persist = vec![Persist::Fsync];
        assert_eq!(count(&b), 4);
        // seq 2, creat only over the two files, fsync and none: first op 2 files x (2
        // fsyncs + none), second the other file (creat of the same name twice is
        // invalid) x 2 fsyncs. 2 * 3 * 1 * 2 = 12.
        b.persist = vec![Persist::Fsync, Persist::None];
        b.seq = 2;
        assert_eq!(count(&b), 12);
        // Rename over the default files: 6 file renames + 1 directory rename.
        let mut r = Bounds::ace(1);
        r.ops = vec![CoreOp::Rename];
        assert_eq!(r.core_ops().len(), 7);
    }

    #[test]
    fn ace_seq1_is_a_few_hundred_and_every_workload_models() {
        let g = Bounds::ace(1).generator();
        let all: Vec<(u64, Workload)> = g.iter_from(0).collect();
        assert!((250..=600).contains(&all.len()), "{}", all.len());
        for (i, w) in &all {
            assert_eq!(crate::model_states(w).len(), w.ops.len() + 1, "{i}");
            assert!(w.ops.last().unwrap().is_persistence_point(), "{i}: ends persisted");
            assert_eq!(g.workload_at(*i).as_ref(), Some(w), "a pure function of the index");
        }
        let names: HashSet<&str> = all.iter().map(|(_, w)| w.name.as_str()).collect();
        assert_eq!(names.len(), all.len());
        let bodies: HashSet<(&Vec<Op>, &Vec<Op>)> =
            all.iter().map(|(_, w)| (&w.setup, &w.ops)).collect();
        assert_eq!(bodies.len(), all.len(), "no two indices make the same workload");
    }

    #[test]
    fn resuming_continues_exactly_and_sampling_is_deterministic() {
        let g = Bounds::ace(2).generator();
        let first: Vec<u64> = g.iter_from(0).take(40).map(|(i, _)| i).collect();
        let resumed: Vec<u64> = g.iter_from(first[19] + 1).take(20).map(|(i, _)| i).collect();
        assert_eq!(resumed, first[20..]);
        let a: Vec<u64> = g.sample(25, 7).map(|(i, _)| i).collect();
        let b: Vec<u64> = g.sample(25, 7).map(|(i, _)| i).collect();
        let c: Vec<u64> = g.sample(25, 8).map(|(i, _)| i).collect();
        assert_eq!(a.len(), 25);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.iter().collect::<HashSet<_>>().len(), 25, "distinct");
    }

    #[test]
    fn names_parse() {
        assert_eq!("mmapwrite".parse::<CoreOp>(), Ok(CoreOp::Mmapwrite));
        assert!("remove".parse::<CoreOp>().unwrap_err().contains("known: creat"));
        assert_eq!("none".parse::<Persist>(), Ok(Persist::None));
        assert_eq!("overlap-extend".parse::<Range>(), Ok(Range::OverlapExtend));
        assert_eq!("punch-hole".parse::<FallocMode>(), Ok(FallocMode::PunchHole));
    }
}
