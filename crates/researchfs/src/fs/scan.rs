//! NoFS' background scan, which rediscovers allocation after mount while the file
//! system stays usable, and waiting for it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Action, Detection, Fs, FREE, UNKNOWN, USED};
use crate::layout::{BackLink, Kind};
use crate::ErrorKind;

/// An inode the scan found in use but not yet confirmed: its number, generation and
/// back links (sorted, without repeats).
type Candidate = (u32, u32, Vec<BackLink>);

impl Fs {
    /// NoFS' background scan: find the inodes in use and confirm each through a directory
    /// that names it (back links checked against the directories' entries), reclaim
    /// orphans, mark the blocks whose backpointers agree with a live inode, then declare
    /// every other block free. Each step takes the lock briefly, and a stop request ends
    /// the scan between two of them.
    pub(super) fn scan(&self) {
        let n = self.lock().sb.inodes;
        let Some(cands) = self.scan_inodes(n) else { return };
        let Some(parents) = self.confirm_parents(n, &cands) else { return };
        self.settle_inodes(n, &cands, &parents);
        if self.account_blocks(n).is_none() {
            return;
        }
        let (start, end) = {
            let c = self.lock();
            (c.sb.data_start, c.sb.blocks)
        };
        if self.free_unowned_blocks(start, end).is_none() {
            return;
        }
        let mut c = self.lock();
        c.scanning = false;
        c.bhint = start;
        c.ihint = 2;
        drop(c);
        self.scan_cv.notify_all();
    }

    /// The inodes of unknown state that are in use, as candidates; the free ones are
    /// marked free. `None` if the scan was stopped.
    fn scan_inodes(&self, n: u32) -> Option<Vec<Candidate>> {
        let mut cands: Vec<Candidate> = Vec::new();
        for start in (2..n).step_by(64) {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            let mut c = self.lock();
            for ino in start..(start + 64).min(n) {
                if c.ialloc[ino as usize] != UNKNOWN {
                    continue;
                }
                match c.get_inode(ino) {
                    Ok(i) if i.kind != Kind::Free => {
                        let mut bl = i.backlinks.clone();
                        bl.sort_unstable();
                        bl.dedup();
                        cands.push((ino, i.generation, bl));
                    }
                    _ => {
                        c.ialloc[ino as usize] = FREE;
                        c.ifree += 1;
                    }
                }
            }
        }
        Some(cands)
    }

    /// Each candidate's parents that confirm it: the directories among its back links
    /// that hold a name for it. `None` if the scan was stopped.
    fn confirm_parents(&self, n: u32, cands: &[Candidate]) -> Option<HashMap<u32, Vec<u32>>> {
        let mut parents: HashMap<u32, Vec<u32>> = HashMap::new();
        for (ino, gen, bl) in cands {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            let mut c = self.lock();
            let vp =
                bl.iter().filter(|l| l.dir < n && c.names_in(**l, *ino, *gen) > 0).map(|l| l.dir);
            let vp = vp.collect();
            parents.insert(*ino, vp);
        }
        Some(parents)
    }

    /// Marks in use every candidate reachable from a live inode through confirming
    /// parents, and reclaims the others (each an `Oi` detection).
    fn settle_inodes(&self, n: u32, cands: &[Candidate], parents: &HashMap<u32, Vec<u32>>) {
        let mut c = self.lock();
        let mut live: HashSet<u32> = (1..n).filter(|&i| c.ialloc[i as usize] == USED).collect();
        loop {
            let before = live.len();
            for (ino, vp) in parents {
                if !live.contains(ino) && vp.iter().any(|p| live.contains(p)) {
                    live.insert(*ino);
                }
            }
            if live.len() == before {
                break;
            }
        }
        for (ino, _, _) in cands {
            if c.ialloc[*ino as usize] != UNKNOWN {
                continue;
            }
            if live.contains(ino) {
                c.ialloc[*ino as usize] = USED;
            } else {
                c.ialloc[*ino as usize] = FREE;
                c.ifree += 1;
                c.events.push(Detection {
                    kind: Some(ErrorKind::Oi),
                    action: Action::Reclaimed,
                    what: format!("inode {ino}: no directory confirms its back links"),
                });
            }
        }
    }

    /// Marks in use the blocks of every live inode not yet accounted for: its indirect
    /// blocks, and its data blocks whose backpointers agree. `None` if the scan was stopped.
    fn account_blocks(&self, n: u32) -> Option<()> {
        for ino in 1..n {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            let mut c = self.lock();
            if c.ialloc[ino as usize] != USED || c.accounted.contains(&ino) {
                continue;
            }
            let Ok(inode) = c.get_inode(ino) else { continue };
            let (data, ind) = c.all_blocks(ino, &inode);
            let dir = inode.kind == Kind::Dir;
            for (b, _) in ind {
                if c.balloc[b as usize] == UNKNOWN {
                    c.balloc[b as usize] = USED;
                }
            }
            for (l, b) in data {
                if c.owns(ino, inode.generation, l, b, dir).unwrap_or(false)
                    && c.balloc[b as usize] == UNKNOWN
                {
                    c.balloc[b as usize] = USED;
                }
            }
            c.accounted.insert(ino);
        }
        Some(())
    }

    /// Frees every data block from `start` to `end` still of unknown state, each orphan
    /// among them an `Ob` detection. `None` if the scan was stopped.
    fn free_unowned_blocks(&self, start: u64, end: u64) -> Option<()> {
        let mut b = start;
        while b < end {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            let mut c = self.lock();
            for x in b..(b + 1024).min(end) {
                if c.balloc[x as usize] != UNKNOWN {
                    continue;
                }
                // A block whose backpointer names a live inode that does not point to it
                // is an orphan (allocated by an update that never reached its inode).
                if c.maybe_owned(x).unwrap_or(false) {
                    c.events.push(Detection {
                        kind: Some(ErrorKind::Ob),
                        action: Action::Reclaimed,
                        what: format!("block {x}: its owner does not point to it"),
                    });
                }
                c.balloc[x as usize] = FREE;
                c.bfree += 1;
            }
            b += 1024;
        }
        Some(())
    }

    /// Whether allocation information is complete (always, except during NoFS' scan).
    pub fn scan_done(&self) -> bool {
        !self.lock().scanning
    }

    /// Blocks until NoFS' background scan has finished (returns at once otherwise).
    pub fn wait_scan(&self) {
        let mut c = self.lock();
        while c.scanning && !self.stop.load(Ordering::Relaxed) {
            c = self
                .scan_cv
                .wait_timeout(c, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    pub(super) fn stop_scan(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.scan.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}
