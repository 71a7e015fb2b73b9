//! Generated workloads: random op sequences for soundness checks of bob itself.
//!
//! [`random_synced`] makes a workload whose every op is followed by the fsyncs that make
//! it durable (the file for data ops, the parent directories for name ops). On a correct
//! file system no crash state can then show a later op persisted and an earlier one not,
//! so any ordering violation bob reports on it is bob's own bug: the permuter, the
//! snapshot or the oracle. The ops never free an inode (no unlink, no rename over an
//! existing name), because the checks identify files by inode number, and never undo an
//! earlier op's visible effect: only base files are renamed, each at most once (renaming
//! a created, linked or renamed name away would make that earlier op read as lost).

use crate::op::Op;
use crate::property::Property;
use crate::rng::SplitMix64;
use crate::workload::{workload_for, Params, Workload};

fn parent(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => path[..i].into(),
    }
}

/// `n_ops` random ops, each followed by the fsyncs that make it durable, on the standard
/// base layout. Judged as an ordering workload (plus durability of every fsync).
pub fn random_synced(seed: u64, n_ops: usize, params: &Params) -> Workload {
    let base = workload_for(Property::AppendThenAppend, params);
    let mut rng = SplitMix64::new(seed);
    let dirs = ["/A", "/B", "/C"];
    // Files that exist: current name, size, and whether that name may still be renamed
    // (a base file's original name, never an op's own effect).
    let mut files: Vec<(String, u64, bool)> = (0..5)
        .map(|i| (format!("/A/f{i}"), 0, true))
        .chain((5..10).map(|i| (format!("/B/f{i}"), 0, true)))
        .collect();
    let mut fresh = 0u32;
    let mut new_name = |dir: &str| {
        fresh += 1;
        format!("{dir}/g{fresh}")
    };
    let mut ops = Vec::new();
    let block = params.block_size;
    for _ in 0..n_ops {
        match rng.below(6) {
            0 => {
                let d = dirs[rng.below(3) as usize];
                let path = new_name(d);
                ops.push(Op::Creat { path: path.clone(), sync: false });
                ops.push(Op::Fsync { path: path.clone() });
                ops.push(Op::Fsync { path: d.into() });
                files.push((path, 0, false));
            }
            1 | 2 => {
                let i = rng.below(files.len() as u64) as usize;
                let (path, size, _) = files[i].clone();
                let len = block * (1 + rng.below(3));
                ops.push(Op::Append { path: path.clone(), offset: size, len });
                ops.push(Op::Fsync { path: path.clone() });
                files[i].1 = size + len;
            }
            3 => {
                let big = format!("/big{}", rng.below(4));
                let blocks = params.large_file_bytes / block;
                let offset = rng.below(blocks) * block;
                ops.push(Op::Write { path: big.clone(), offset, len: block });
                ops.push(Op::Fsync { path: big });
            }
            4 => {
                let i = rng.below(files.len() as u64) as usize;
                let from = files[i].0.clone();
                let d = dirs[rng.below(3) as usize];
                let to = new_name(d);
                ops.push(Op::Link { from, to: to.clone() });
                ops.push(Op::Fsync { path: d.into() });
            }
            _ => {
                let renamable: Vec<usize> = (0..files.len()).filter(|&i| files[i].2).collect();
                let Some(&i) = renamable.get(rng.below(renamable.len() as u64) as usize) else {
                    continue;
                };
                let from = files[i].0.clone();
                let d = dirs[rng.below(3) as usize];
                let to = new_name(d);
                let from_dir = parent(&from);
                ops.push(Op::Rename { from: from.clone(), to: to.clone() });
                ops.push(Op::Fsync { path: d.into() });
                if from_dir != d {
                    ops.push(Op::Fsync { path: from_dir });
                }
                files[i].0 = to;
                files[i].2 = false;
            }
        }
    }
    Workload {
        name: format!("random-synced-{seed}-{n_ops}"),
        // Judged by the ordering checks (and durability of every fsync).
        property: Some(Property::AppendThenAppend),
        setup: base.setup,
        ops,
        drain: base.drain,
        commit_midway: Vec::new(),
        guarantees: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_workloads_model_and_are_deterministic() {
        for seed in 0..50 {
            let w = random_synced(seed, 12, &Params::default());
            assert_eq!(w, random_synced(seed, 12, &Params::default()));
            let states = crate::model_states(&w);
            assert_eq!(states.len(), w.ops.len() + 1, "seed {seed} must model");
            assert!(w.ops.iter().any(|o| o.is_persistence_point()));
        }
    }
}
