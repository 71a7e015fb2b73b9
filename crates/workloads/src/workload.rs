//! The workload of each property: the base layout every workload starts from, the
//! property's own setup, the ops under test and the drain.
//!
//! Base layout (setup of every workload; it is the base image, so its data is "old"):
//! directories `/A`, `/B`, `/C`; ten empty files `/A/f0`..`/A/f4`, `/B/f5`..`/B/f9`;
//! four large files `/big0`..`/big3` of `params.large_file_bytes`, filled with stamped
//! setup data; and the scratch drain file [`DRAIN_FILE`] (empty).
//!
//! Drain (after the ops): an append of one block to the drain file, fsync of it (this
//! commits the running journal transaction without forcing the workload files' data in
//! data=writeback), then `sync`. The checks ignore the drain file.
//!
//! Inode numbers identify files in the checks, so no workload creates a file or
//! directory after an op that frees an inode (unlink, rename over an existing file):
//! the freed number could be reused.

use crate::op::Op;
use crate::property::Property;
use crate::rng::mix;
use serde::{Deserialize, Serialize};

/// The scratch file the drain ops write.
pub const DRAIN_FILE: &str = "/drain";

/// Sizes and the seed of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Params {
    /// File-system block size: "single block" ops write one aligned block of this size.
    pub block_size: u64,
    /// Size of each of the four large files of the base layout.
    pub large_file_bytes: u64,
    /// Size of the multi-block append/overwrite: must exceed one journal transaction
    /// of the configuration under test (ext4 commits at most a quarter of the journal).
    pub multi_block_bytes: u64,
    /// Seed of the random overwrite offsets.
    pub seed: u64,
    /// Whether the multi-block ops meet a commit while in flight: their data is written
    /// in two halves with a sync(2) between them (see [`Workload::commit_midway`]).
    /// Needed wherever the journal does not carry file data (ext data=ordered/writeback,
    /// ext2, xfs, btrfs): there a single large write's data reaches the disk in one epoch
    /// whatever the journal's size, and the op never crosses a commit.
    #[serde(default)]
    pub commit_midway: bool,
}

impl Default for Params {
    /// 4096-byte blocks, 4 MiB large files, 2 MiB multi-block runs (a 4 MiB ext4
    /// journal commits at most 1 MiB per transaction), a fixed seed.
    fn default() -> Self {
        Params {
            block_size: 4096,
            large_file_bytes: 4 << 20,
            multi_block_bytes: 2 << 20,
            seed: 0x0b0b_2014,
            commit_midway: false,
        }
    }
}

/// A workload: setup (run before recording), ops (recorded, judged) and drain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub property: Option<Property>,
    pub setup: Vec<Op>,
    pub ops: Vec<Op>,
    pub drain: Vec<Op>,
    /// Indices of data ops (write, append) whose data is written in two halves with a
    /// sync(2) between them, inside the op: the commit a large write may meet while it is
    /// in flight (writeback under memory pressure, another process's sync), made
    /// deterministic. The op is still one op to the model and the checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commit_midway: Vec<usize>,
    /// Promises beyond POSIX the durability checks hold the file system to (a file
    /// system's documented stronger guarantees, named); empty: POSIX only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guarantees: Vec<Guarantee>,
}

/// A durability promise beyond POSIX, as a named option of the oracle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// fsync of a file also persists the names it has at the call (its directory entries
    /// and their parents), without a fsync of the directory: ext4's and btrfs's behaviour
    /// (a fsync commits the journal transaction or log tree holding the new entry).
    FsyncPersistsName,
    /// After recovery the file system still accepts new files and directories where the
    /// workload's were: the check mounts the recovered state again once it has judged it
    /// and creates names ([`crate::create_after_recovery`]); one that cannot be made is a
    /// violation (`not-creatable`). Not POSIX, but what every file system means by
    /// recovering: the btrfs log replay that left the highest inode number stale made
    /// every later creat fail with EEXIST. Costs a second mount per crash state.
    CreatableAfterRecovery,
}

impl Guarantee {
    /// Every guarantee.
    pub const ALL: &'static [Guarantee] =
        &[Guarantee::FsyncPersistsName, Guarantee::CreatableAfterRecovery];

    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Guarantee::FsyncPersistsName => "fsync-persists-name",
            Guarantee::CreatableAfterRecovery => "creatable-after-recovery",
        }
    }
}

impl std::str::FromStr for Guarantee {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Guarantee::ALL.iter().copied().find(|g| g.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Guarantee::ALL.iter().map(|g| g.name()).collect();
            format!("unknown guarantee {s:?} (known: posix, {})", names.join(", "))
        })
    }
}

impl Workload {
    /// Generation number stamped into every sector this workload writes.
    pub fn gen(&self) -> u32 {
        crate::stamp::fnv32(&self.name)
    }
}

/// The setup data of an append target: 40960 bytes (ten blocks).
pub const APPEND_BASE_BYTES: u64 = 40960;

fn s(p: &str) -> String {
    p.to_string()
}

fn creat(p: &str) -> Op {
    Op::Creat { path: s(p), sync: false }
}
fn write(p: &str, offset: u64, len: u64) -> Op {
    Op::Write { path: s(p), offset, len }
}
fn append(p: &str, offset: u64, len: u64) -> Op {
    Op::Append { path: s(p), offset, len }
}
fn link(a: &str, b: &str) -> Op {
    Op::Link { from: s(a), to: s(b) }
}
fn rename(a: &str, b: &str) -> Op {
    Op::Rename { from: s(a), to: s(b) }
}
fn unlink(p: &str) -> Op {
    Op::Unlink { path: s(p) }
}
fn mkdir(p: &str) -> Op {
    Op::Mkdir { path: s(p) }
}
fn fsync(p: &str) -> Op {
    Op::Fsync { path: s(p) }
}

/// The base layout's setup ops.
pub fn base_setup(params: &Params) -> Vec<Op> {
    let mut v = vec![mkdir("/A"), mkdir("/B"), mkdir("/C")];
    for i in 0..10 {
        v.push(creat(&format!("/{}/f{i}", if i < 5 { 'A' } else { 'B' })));
    }
    for i in 0..4 {
        let p = format!("/big{i}");
        v.push(creat(&p));
        v.push(write(&p, 0, params.large_file_bytes));
    }
    v.push(creat(DRAIN_FILE));
    v
}

/// The drain ops.
pub fn drain_ops(params: &Params) -> Vec<Op> {
    vec![append(DRAIN_FILE, 0, params.block_size), fsync(DRAIN_FILE), Op::Sync]
}

/// A seeded aligned offset for a `unit`-byte write inside a large file.
fn random_offset(params: &Params, p: Property, salt: u64, unit: u64) -> u64 {
    let slots = (params.large_file_bytes / unit).max(1);
    let h = mix(params.seed ^ mix(crate::stamp::fnv32(p.name()) as u64 ^ salt));
    (h % slots) * unit
}

/// The workload of property `p`. Each property's sizes and their reasons:
///
/// * `single-sector-overwrite`: one aligned 512 B pwrite at a seeded random sector of
///   `/big0` (512 B = the disk's atomic unit).
/// * `single-sector-append`: 512 B appended to `/A/log` (40960 B of setup data, ten blocks).
/// * `single-block-overwrite`: one aligned 4096 B pwrite at a seeded random block of `/big0`.
/// * `single-block-append`: 4096 B appended to `/A/log` (40960 B).
/// * `multi-block-append`: `multi_block_bytes` appended to `/A/log` in one pwrite, and
///   (separately judged) `multi_block_bytes` overwritten in `/B/mbo` (a setup file of
///   that size); the size exceeds one journal transaction.
/// * `multi-block-prefix-append`: the same append alone; old content + a prefix is legal.
/// * `dir-op-atomic`: mkdir, creat, link, rename in a directory, rename across two
///   directories, rename over an existing file, unlink; each judged on its own names.
/// * `overwrite-then-any`: a 4096 B overwrite of `/big0`, then an append to another
///   file, creat, link, rename, unlink.
/// * `append-then-rename`: 4096 B appended to the empty `/A/f0`, renamed over
///   `/A/dst` (4096 B of old data): replace-via-rename; then an append, link, rename.
/// * `otrunc-append-then-close`: open(`/big1`, O_TRUNC), ten 4096 B writes, close; then
///   an append, creat, link, rename.
/// * `append-then-append`: ten 4096 B appends to the empty `/A/f0`.
/// * `append-then-dir-op`: 4096 B appended to the empty `/A/f0`, then link, mkdir and
///   a synchronous creat (O_SYNC + fsync of file and parent).
/// * `dir-op-then-any`: creat, link, rename in `/A`, a 4096 B overwrite and a 4096 B
///   append of `/big2`, then link and rename in `/B` and `/C`, a rename in the root,
///   unlinks.
/// * `fsync-durable`: 8192 B append + fsync, 4096 B overwrite of `/big0` + fsync, then
///   an append after the fsync and an unsynced append elsewhere.
/// * `fdatasync-durable`: the same with fdatasync.
/// * `sync-durable`: creat+append, overwrite, link, rename, mkdir, unlink, then sync,
///   then one more append.
/// * `dir-fsync-durable`: creat + append + fsync(file) + fsync(/A); rename in `/A` +
///   fsync(/A); rename across `/A`->`/B` + fsync(/B); creat + fsync(/B).
/// * `metadata-op-durable`: creat, mkdir, link, rename and unlink on names no later op
///   touches, no fsync.
/// * `output-durable`: an append and output, a creat and a block overwrite and output,
///   then an append no output follows (configurations with an output file only).
/// * `detects-inconsistency`: the eight operations of the NoFS thesis' reliability table
///   (see [`DETECTION_SCENARIOS`]) on a small layout of its own: `/A`, `/B`, `/C`, files
///   `/A/f0`..`/B/f9` of one stamped block each, `/B/t` of four blocks, the drain file.
pub fn workload_for(p: Property, params: &Params) -> Workload {
    use Property::*;
    let mut setup = base_setup(params);
    let ops = match p {
        DetectsInconsistency => return detection_workload(params),
        TxnAtomic | TxnDurable => return txn_workload(p, setup, params),
        SingleSectorOverwrite
        | SingleSectorAppend
        | SingleBlockOverwrite
        | SingleBlockAppend
        | MultiBlockAppend
        | MultiBlockPrefixAppend
        | DirOpAtomic
        | OverwriteThenAny
        | AppendThenRename
        | OtruncAppendThenClose
        | AppendThenAppend
        | AppendThenDirOp
        | DirOpThenAny => study_ops(p, params, &mut setup),
        FsyncDurable | FdatasyncDurable | SyncDurable | DirFsyncDurable | OsyncPrefix
        | DsyncDurable | MetadataOpDurable | OutputDurable => durability_ops(p, params, &mut setup),
    };
    let commit_midway =
        if params.commit_midway && matches!(p, MultiBlockAppend | MultiBlockPrefixAppend) {
            (0..ops.len()).filter(|&k| ops[k].data_range().is_some()).collect()
        } else {
            Vec::new()
        };
    Workload {
        name: p.name().to_string(),
        property: Some(p),
        setup,
        ops,
        drain: drain_ops(params),
        commit_midway,
        guarantees: Vec::new(),
    }
}

/// The ops of one of the BOB study's thirteen properties (setup additions in `setup`).
fn study_ops(p: Property, params: &Params, setup: &mut Vec<Op>) -> Vec<Op> {
    use Property::*;
    let b = params.block_size;
    let m = params.multi_block_bytes;
    let n = APPEND_BASE_BYTES;
    let log_setup = [creat("/A/log"), write("/A/log", 0, n)];
    match p {
        SingleSectorOverwrite => vec![write("/big0", random_offset(params, p, 0, 512), 512)],
        SingleSectorAppend => {
            setup.extend(log_setup.clone());
            vec![append("/A/log", n, 512)]
        }
        SingleBlockOverwrite => vec![write("/big0", random_offset(params, p, 0, b), b)],
        SingleBlockAppend => {
            setup.extend(log_setup.clone());
            vec![append("/A/log", n, b)]
        }
        MultiBlockAppend => {
            setup.extend(log_setup.clone());
            setup.extend([creat("/B/mbo"), write("/B/mbo", 0, m)]);
            vec![append("/A/log", n, m), write("/B/mbo", 0, m)]
        }
        MultiBlockPrefixAppend => {
            setup.extend(log_setup.clone());
            vec![append("/A/log", n, m)]
        }
        DirOpAtomic => vec![
            mkdir("/C/d0"),
            creat("/A/c0"),
            link("/A/f1", "/A/l1"),
            rename("/A/f3", "/A/r3"),
            rename("/A/f4", "/B/r4"),
            rename("/B/f5", "/B/f6"),
            unlink("/A/f2"),
        ],
        OverwriteThenAny => vec![
            write("/big0", random_offset(params, p, 0, b), b),
            append("/A/f0", 0, b),
            creat("/B/c0"),
            link("/A/f1", "/B/l1"),
            rename("/A/f2", "/B/r2"),
            unlink("/A/f3"),
        ],
        AppendThenRename => {
            setup.extend([creat("/A/dst"), write("/A/dst", 0, b)]);
            vec![
                append("/A/f0", 0, b),
                rename("/A/f0", "/A/dst"),
                append("/B/f5", 0, b),
                link("/A/f1", "/B/l1"),
                rename("/A/f2", "/B/r2"),
            ]
        }
        OtruncAppendThenClose => vec![
            Op::OtruncWrite { path: s("/big1"), len: 10 * b, chunk: b },
            append("/A/f0", 0, b),
            creat("/B/c0"),
            link("/A/f1", "/B/l1"),
            rename("/A/f2", "/B/r2"),
        ],
        AppendThenAppend => (0..10).map(|i| append("/A/f0", i * b, b)).collect(),
        AppendThenDirOp => vec![
            append("/A/f0", 0, b),
            link("/A/f1", "/B/l1"),
            mkdir("/C/d0"),
            Op::Creat { path: s("/B/c0"), sync: true },
        ],
        DirOpThenAny => {
            let big = params.large_file_bytes;
            vec![
                creat("/A/c0"),
                link("/A/f0", "/A/l0"),
                rename("/A/f1", "/A/r1"),
                write("/big2", random_offset(params, p, 0, b).min(big.saturating_sub(b)), b),
                append("/big2", big, b),
                link("/B/f5", "/B/l5"),
                rename("/B/f6", "/C/r6"),
                rename("/big3", "/big3r"),
                unlink("/B/f7"),
                unlink("/A/f2"),
            ]
        }
        other => unreachable!("{} is not one of the study's properties", other.name()),
    }
}

/// The ops of a durability property: fsync, fdatasync, sync, a directory's fsync, the
/// research designs' osync and dsync, synchronous metadata and released output (setup
/// additions in `setup`).
fn durability_ops(p: Property, params: &Params, setup: &mut Vec<Op>) -> Vec<Op> {
    use Property::*;
    let b = params.block_size;
    match p {
        FsyncDurable | FdatasyncDurable => {
            let sync = |path: &str| {
                if p == FsyncDurable {
                    fsync(path)
                } else {
                    Op::Fdatasync { path: s(path) }
                }
            };
            vec![
                append("/A/f0", 0, 2 * b),
                sync("/A/f0"),
                write("/big0", random_offset(params, p, 0, b), b),
                sync("/big0"),
                append("/A/f0", 2 * b, b),
                append("/B/f5", 0, b),
            ]
        }
        SyncDurable => vec![
            creat("/A/c0"),
            append("/A/c0", 0, b),
            write("/big0", random_offset(params, p, 0, b), b),
            link("/A/f1", "/B/l1"),
            rename("/A/f2", "/B/r2"),
            mkdir("/C/d0"),
            unlink("/A/f3"),
            Op::Sync,
            append("/B/f5", 0, b),
        ],
        DirFsyncDurable => vec![
            creat("/A/c0"),
            append("/A/c0", 0, b),
            fsync("/A/c0"),
            fsync("/A"),
            rename("/A/f1", "/A/r1"),
            fsync("/A"),
            rename("/A/f2", "/B/r2"),
            fsync("/B"),
            creat("/B/c1"),
            fsync("/B"),
        ],
        OsyncPrefix => {
            // The thesis' reliability workloads (§6.4.1: appends with frequent osync;
            // overwrites with frequent osync) and its atomic-update case (Table 6.9,
            // gedit: write a temporary file, osync, rename it over the original).
            setup.extend([creat("/A/doc"), write("/A/doc", 0, b)]);
            vec![
                append("/A/f0", 0, b),
                Op::Osync,
                append("/A/f0", b, b),
                Op::Osync,
                append("/A/f0", 2 * b, b),
                Op::Osync,
                write("/big0", random_offset(params, p, 0, b), b),
                Op::Osync,
                write("/big1", random_offset(params, p, 1, b), b),
                Op::Osync,
                creat("/A/doc.tmp"),
                append("/A/doc.tmp", 0, b),
                Op::Osync,
                rename("/A/doc.tmp", "/A/doc"),
                Op::Osync,
                append("/B/f5", 0, b),
            ]
        }
        DsyncDurable => vec![
            append("/A/f0", 0, 2 * b),
            Op::Dsync,
            write("/big0", random_offset(params, p, 0, b), b),
            creat("/B/c0"),
            Op::Dsync,
            append("/A/f0", 2 * b, b),
            append("/B/f5", 0, b),
        ],
        // Synchronous metadata (journal-sync, `-o sync`): each op on names no later op
        // touches, no fsync anywhere.
        MetadataOpDurable => vec![
            creat("/A/c0"),
            mkdir("/C/d0"),
            link("/A/f1", "/B/l1"),
            rename("/A/f2", "/B/r2"),
            unlink("/A/f3"),
        ],
        // External synchrony: changes and output after them, twice, then a change no
        // output follows. No fsync: its own promise is fsync-durable's row (on xsyncfs it
        // returns at once and breaks it); here only what released output implies counts.
        OutputDurable => vec![
            append("/A/f0", 0, 2 * b),
            Op::Output,
            creat("/B/c0"),
            write("/big0", random_offset(params, p, 0, b), b),
            Op::Output,
            append("/B/f5", 0, b),
        ],
        other => unreachable!("{} is not a durability property", other.name()),
    }
}

/// The transactional workload of `txn-atomic` and `txn-durable` (Valor's).
fn txn_workload(p: Property, mut setup: Vec<Op>, params: &Params) -> Workload {
    let b = params.block_size;
    // The paper's transactional overwrite, across two files: a transaction
    // committed non-durably, one committed durably (Transaction Sync), one
    // aborted, one unfinished when the workload ends (it is still open at the
    // crash; unmount would abort it). Later transactions overwrite pages of
    // earlier ones, so a rollback that restores the wrong image shows.
    setup.extend([
        creat("/A/ta"),
        write("/A/ta", 0, 4 * b),
        creat("/B/tb"),
        write("/B/tb", 0, 4 * b),
    ]);
    let ops = vec![
        Op::TxnBegin,
        write("/A/ta", 0, 2 * b),
        write("/B/tb", 0, 2 * b),
        Op::TxnCommit { durable: false },
        Op::TxnBegin,
        write("/A/ta", 2 * b, b),
        write("/B/tb", 2 * b, b),
        Op::TxnCommit { durable: true },
        Op::TxnBegin,
        write("/A/ta", 3 * b, b),
        write("/B/tb", 0, b),
        Op::TxnAbort,
        Op::TxnBegin,
        write("/A/ta", 0, b),
        write("/B/tb", 3 * b, b),
    ];
    // The drain cannot append to the drain file inside the open transaction
    // (Valor's page log has no record for growth): sync only.
    Workload {
        name: p.name().to_string(),
        property: Some(p),
        setup,
        ops,
        drain: vec![Op::Sync],
        commit_midway: Vec::new(),
        guarantees: Vec::new(),
    }
}

/// The scenarios of the thesis' reliability table as `(name, first op, op count)` within
/// the `detects-inconsistency` workload's ops, in the table's order.
pub const DETECTION_SCENARIOS: &[(&str, usize, usize)] = &[
    ("mkdir", 0, 1),
    ("link", 1, 1),
    ("unlink", 11, 1),
    ("rename", 2, 1),
    ("write", 3, 2),
    ("delete-create", 5, 3),
    ("truncate-write", 8, 3),
    ("unlink-link", 12, 2),
];

/// The scenario op `k` of the `detects-inconsistency` workload belongs to.
pub fn detection_scenario(k: usize) -> Option<&'static str> {
    DETECTION_SCENARIOS.iter().find(|(_, first, n)| (*first..first + n).contains(&k)).map(|s| s.0)
}

fn detection_workload(params: &Params) -> Workload {
    let b = params.block_size;
    let mut setup = vec![mkdir("/A"), mkdir("/B"), mkdir("/C")];
    for i in 0..10 {
        let p = format!("/{}/f{i}", if i < 5 { 'A' } else { 'B' });
        setup.extend([creat(&p), write(&p, 0, b)]);
    }
    setup.extend([creat("/B/t"), write("/B/t", 0, 4 * b), creat(DRAIN_FILE)]);
    // Inodes are freed only where a scenario means them to be reused (delete-create) or
    // after the last op that allocates one: the thesis runs each scenario alone, and a
    // chain of them must not add reuse the table does not have.
    let ops = vec![
        // mkdir: child inode, child directory block, parent directory block.
        mkdir("/C/d0"),
        // link: the file's inode (link count), the parent's directory block. The second
        // name is in the same directory, as in the thesis' fixture: only the name hash in
        // NoFS' back link tells the two entries apart (without it, a lost inode write
        // reads as one link: a silent HL that bob found; see docs/researchfs.md).
        link("/A/f0", "/A/l0"),
        // rename: old and new parents' directory blocks.
        rename("/A/f2", "/B/r2"),
        // write: past the twelve direct pointers, so data, indirect block and inode.
        creat("/C/w"),
        append("/C/w", 0, 16 * b),
        // delete-create: the freed inode and block go to the new file (in another
        // directory, as in the thesis).
        unlink("/B/f5"),
        creat("/C/n5"),
        append("/C/n5", 0, b),
        // truncate-write: /B/t's freed blocks go to /B/u.
        Op::OtruncWrite { path: s("/B/t"), len: 0, chunk: b },
        creat("/B/u"),
        append("/B/u", 0, 4 * b),
        // unlink: the inode, the old parent's directory block.
        unlink("/A/f1"),
        // unlink-link: a name goes, another comes.
        unlink("/A/f3"),
        link("/A/f4", "/C/l4"),
    ];
    Workload {
        name: Property::DetectsInconsistency.name().to_string(),
        property: Some(Property::DetectsInconsistency),
        setup,
        ops,
        drain: drain_ops(params),
        commit_midway: Vec::new(),
        guarantees: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_round_trips_through_json() {
        for &p in Property::EVERY {
            let w = workload_for(p, &Params::default());
            let j = serde_json::to_string(&w).unwrap();
            assert_eq!(serde_json::from_str::<Workload>(&j).unwrap(), w);
        }
    }
}
