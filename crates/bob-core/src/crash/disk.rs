//! The simulated disk a crash state is legal for: its atomic write unit and what a FUA
//! write means. Every report states the model it used, because the same trace gives
//! other crash states under another disk.
//!
//! * Atomic write unit: a write persists any subset of the aligned units it touches; a
//!   unit it covers only in part persists wholly or not at all. 512 B is a 512n disk (the
//!   BOB study's model); 4096 B a 4Kn or 512e disk, or an NVMe drive whose atomic write
//!   unit covers a block. Units are aligned to the disk's addresses, not to the request.
//! * FUA: `real`, as a disk does it: a FUA write is durable when it completes and makes
//!   nothing else durable, so it does not end an epoch; a crash after it completed keeps
//!   it, whatever else of the epoch is lost. `barrier` treats it as write + flush (what
//!   CrashMonkey does, and what bob did before): it ends the epoch, which loses the
//!   states in which earlier writes of the epoch are missing after the FUA write.
//!
//! On a loop device (bob's default recorder) FUA never reaches the trace: the loop queue
//! has none, so the block layer sends write + flush. The FUA model matters for traces that
//! mark FUA: imported dm-log-writes logs and the project's own file systems.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::trace::SECTOR_SIZE;

/// How the simulated disk treats a FUA write.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum FuaModel {
    /// Durable on completion, alone; not an epoch boundary.
    #[default]
    Real,
    /// Write + flush: ends the epoch (the older, conservative model).
    Barrier,
}

impl FuaModel {
    /// `real` or `barrier`.
    pub fn name(self) -> &'static str {
        match self {
            FuaModel::Real => "real",
            FuaModel::Barrier => "barrier",
        }
    }
}

impl FromStr for FuaModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "real" => Ok(FuaModel::Real),
            "barrier" => Ok(FuaModel::Barrier),
            other => Err(format!("unknown FUA model {other:?}; expected real or barrier")),
        }
    }
}

/// The disk model of a crash state, a cell or a witness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DiskModel {
    /// Bytes a write persists all or nothing of: a power of two from 512 up to the file
    /// system's block size.
    pub atomic_write_unit: u64,
    /// What a FUA write means.
    pub fua: FuaModel,
}

impl Default for DiskModel {
    /// 4096-byte atomic units and real FUA: today's common disk.
    fn default() -> Self {
        DiskModel { atomic_write_unit: 4096, fua: FuaModel::Real }
    }
}

impl DiskModel {
    /// The BOB study's disk: 512-byte sectors tear apart, FUA is a barrier. (bob's model
    /// before disk models were chosen; traces and tests of that time use it.)
    pub const STUDY: DiskModel = DiskModel { atomic_write_unit: 512, fua: FuaModel::Barrier };

    /// [`DiskModel::STUDY`], for serde defaults of documents written before disk models.
    pub(crate) fn study() -> DiskModel {
        DiskModel::STUDY
    }

    /// A model with `atomic_write_unit` bytes, checked: a power of two, at least 512 and at
    /// most `block_size`.
    pub fn new(atomic_write_unit: u64, fua: FuaModel, block_size: u64) -> Result<Self, String> {
        if !atomic_write_unit.is_power_of_two()
            || atomic_write_unit < SECTOR_SIZE
            || atomic_write_unit > block_size
        {
            return Err(format!(
                "atomic write unit {atomic_write_unit}: expected a power of two from 512 up to \
                 the file system's block size ({block_size})"
            ));
        }
        Ok(DiskModel { atomic_write_unit, fua })
    }

    /// One model per unit of `units`, each checked against `block_size`, in the order
    /// given.
    pub fn list(
        units: &AtomicWriteUnits,
        fua: FuaModel,
        block_size: u64,
    ) -> Result<Vec<DiskModel>, String> {
        units.0.iter().map(|&bytes| DiskModel::new(bytes, fua, block_size)).collect()
    }

    /// 512-byte sectors per atomic unit.
    pub(crate) fn unit_sectors(&self) -> u64 {
        (self.atomic_write_unit / SECTOR_SIZE).max(1)
    }

    /// A short label for paths and keys: `awu-4096` (and `-fua-barrier` when FUA is a
    /// barrier).
    pub(crate) fn slug(&self) -> String {
        match self.fua {
            FuaModel::Real => format!("awu-{}", self.atomic_write_unit),
            FuaModel::Barrier => format!("awu-{}-fua-barrier", self.atomic_write_unit),
        }
    }
}

/// One or more atomic write units in bytes (`512,4096`): each a power of two of at least
/// 512, duplicates dropped, in the order given. Whether each fits a file system's block
/// size is checked when its models are made ([`DiskModel::list`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtomicWriteUnits(Vec<u64>);

impl AtomicWriteUnits {
    /// The units, in bytes.
    pub fn bytes(&self) -> &[u64] {
        &self.0
    }
}

impl Default for AtomicWriteUnits {
    /// 4096 bytes, as 4Kn and 512e disks and NVMe write.
    fn default() -> Self {
        AtomicWriteUnits(vec![DiskModel::default().atomic_write_unit])
    }
}

impl FromStr for AtomicWriteUnits {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut units: Vec<u64> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bytes: u64 = part
                .parse()
                .map_err(|_| format!("atomic write unit {part:?}: expected a number of bytes"))?;
            if !bytes.is_power_of_two() || bytes < SECTOR_SIZE {
                return Err(format!(
                    "atomic write unit {bytes}: expected a power of two of at least 512"
                ));
            }
            if !units.contains(&bytes) {
                units.push(bytes);
            }
        }
        if units.is_empty() {
            return Err("no atomic write unit given".into());
        }
        Ok(AtomicWriteUnits(units))
    }
}

impl fmt::Display for AtomicWriteUnits {
    /// As parsed: `512,4096`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&units.join(","))
    }
}

impl fmt::Display for DiskModel {
    /// "4096 B atomic writes, real FUA".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} B atomic writes, {} FUA", self.atomic_write_unit, self.fua.name())
    }
}

/// The atomic units a request of `len` sectors at disk sector `start` touches, as
/// inclusive sector ranges within the request: the first and last may be partial.
pub(crate) fn request_units(start: u64, len: u64, unit_sectors: u64) -> Vec<(u64, u64)> {
    if len == 0 {
        return Vec::new();
    }
    let u = unit_sectors.max(1);
    let first = start / u;
    let last = (start + len - 1) / u;
    (first..=last)
        .map(|k| {
            let a = (k * u).max(start) - start;
            let b = ((k + 1) * u - 1).min(start + len - 1) - start;
            (a, b)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_aligned_to_the_disk_not_the_request() {
        // 8 sectors at sector 4 under 4096-byte units: two units of 4 sectors each.
        assert_eq!(request_units(4, 8, 8), vec![(0, 3), (4, 7)]);
        assert_eq!(request_units(8, 8, 8), vec![(0, 7)]);
        assert_eq!(request_units(8, 3, 1), vec![(0, 0), (1, 1), (2, 2)]);
        assert_eq!(request_units(8, 16, 8), vec![(0, 7), (8, 15)]);
        assert!(request_units(8, 0, 8).is_empty());
    }

    #[test]
    fn units_parse_and_are_checked() {
        let units: AtomicWriteUnits = "512, 4096,512".parse().unwrap();
        assert_eq!(units.to_string(), "512,4096");
        let m = DiskModel::list(&units, FuaModel::Real, 4096).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].to_string(), "512 B atomic writes, real FUA");
        assert_eq!(m[1].slug(), "awu-4096");
        for bad in ["1000", "256", "x", "", ","] {
            assert!(bad.parse::<AtomicWriteUnits>().is_err(), "{bad}");
        }
        let too_big: AtomicWriteUnits = "8192".parse().unwrap();
        let e = DiskModel::list(&too_big, FuaModel::Real, 4096).unwrap_err();
        assert!(e.contains("block size (4096)") && !e.contains("--"), "{e}");
        let j = serde_json::to_string(&DiskModel::default()).unwrap();
        assert_eq!(j, r#"{"atomic_write_unit":4096,"fua":"real"}"#);
    }
}
