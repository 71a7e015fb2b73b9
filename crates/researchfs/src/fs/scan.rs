//! NoFS' background scan, which rediscovers allocation after mount while the file
//! system stays usable, and waiting for it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Action, Detection, Fs, FREE, UNKNOWN, USED};
use crate::layout::{BackLink, Kind};
use crate::ErrorKind;

impl Fs {
    /// entries), reclaim orphans, mark the blocks whose backpointers agree with a live
    /// inode, then declare every other block free. Each step takes the lock briefly.
    pub(super) fn scan(&self) {
        let n = self.lock().sb.inodes;
        let mut cands: Vec<(u32, u32, Vec<BackLink>)> = Vec::new();
        for start in (2..n).step_by(64) {
            if self.stop.load(Ordering::Relaxed) {
                return;
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
        let mut parents: HashMap<u32, Vec<u32>> = HashMap::new();
        for (ino, gen, bl) in &cands {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let mut c = self.lock();
            let vp =
                bl.iter().filter(|l| l.dir < n && c.names_in(**l, *ino, *gen) > 0).map(|l| l.dir);
            let vp = vp.collect();
            parents.insert(*ino, vp);
        }
        {
            let mut c = self.lock();
            let mut live: HashSet<u32> = (1..n).filter(|&i| c.ialloc[i as usize] == USED).collect();
            loop {
                let before = live.len();
                for (ino, vp) in &parents {
                    if !live.contains(ino) && vp.iter().any(|p| live.contains(p)) {
                        live.insert(*ino);
                    }
                }
                if live.len() == before {
                    break;
                }
            }
            for (ino, _, _) in &cands {
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
        for ino in 1..n {
            if self.stop.load(Ordering::Relaxed) {
                return;
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
        let (start, end) = {
            let c = self.lock();
            (c.sb.data_start, c.sb.blocks)
        };
        let mut b = start;
        while b < end {
            if self.stop.load(Ordering::Relaxed) {
                return;
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
        let mut c = self.lock();
        c.scanning = false;
        c.bhint = start;
        c.ihint = 2;
        drop(c);
        self.scan_cv.notify_all();
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
