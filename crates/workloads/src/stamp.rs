//! Sector stamps: every 512-byte sector a workload writes (setup data included) is fully
//! determined by a small header, so that a recovered file's bytes classify as zeros,
//! data of a known file/offset/op, data that belongs elsewhere, or garbage.
//!
//! Layout of a stamped sector (little endian):
//! ```text
//!   0..8    magic  "BOBSTAMP"
//!   8..12   file   model file id (u32)
//!  12..16   op     op index in `Workload::ops`, or SETUP_OP / DRAIN_OP
//!  16..24   offset byte offset of this sector within the file
//!  24..28   gen    generation: FNV-1a of the workload's name (informational; not
//!                  used by classification, so a base image may be shared)
//!  28..32   zero
//!  32..40   checksum over bytes 0..32
//!  40..512  filler: splitmix64 words seeded by the checksum
//! ```
//! Classification ([`classify`]) verifies magic, checksum and filler; a sector with a
//! valid stamp whose offset differs from where it was found is `Foreign`. Whether the
//! stamp's *file* is the expected one is left to the checks (they know the file).

use crate::rng::mix;
use serde::{Deserialize, Serialize};

/// What one 512-byte sector of a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "kebab-case")]
pub enum SectorClass {
    /// All zeros (a hole, or an allocated block never written).
    Zero,
    /// A valid stamp for this offset: data of model file `file` written by op `op`
    /// (`None`: setup or drain data, i.e. "old" data). When `file` is not the file it
    /// was found in, the checks treat it as foreign data.
    Data { file: u32, op: Option<u32> },
    /// A valid stamp for another offset (of `file`, written by `op` as in `Data`): data
    /// that belongs elsewhere. (Moved by fallocate's collapse or insert, it may move back.)
    Foreign {
        file: u32,
        offset: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        op: Option<u32>,
    },
    /// Anything else.
    Garbage,
}

impl SectorClass {
    /// Short human name, for stories.
    pub fn describe(self) -> String {
        match self {
            SectorClass::Zero => "zeros".into(),
            SectorClass::Data { file, op: None } => format!("old data of file {file}"),
            SectorClass::Data { file, op: Some(op) } => format!("data of file {file} from op {op}"),
            SectorClass::Foreign { file, offset, .. } => {
                format!("foreign data (file {file} @{offset})")
            }
            SectorClass::Garbage => "garbage".into(),
        }
    }
}

/// Sector size in bytes.
pub const SECTOR: usize = 512;
/// The magic at the start of every stamped sector ("BOBSTAMP").
pub const MAGIC: u64 = u64::from_le_bytes(*b"BOBSTAMP");
/// Header length in bytes (magic..checksum).
pub const HEADER_LEN: usize = 40;
/// What the index of a filler word is multiplied by before it is mixed with the checksum.
const FILLER_STEP: u64 = 0xA24B_AED4_963E_E407;
/// `op` value of data written during setup (the base image): "old" data.
pub const SETUP_OP: u32 = u32::MAX;
/// `op` value of data written by the drain ops.
pub const DRAIN_OP: u32 = u32::MAX - 1;

/// What a stamp says about its sector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// Model file id.
    pub file: u32,
    /// Op index, or [`SETUP_OP`] / [`DRAIN_OP`].
    pub op: u32,
    /// Byte offset of the sector within the file (a multiple of 512).
    pub offset: u64,
    /// Generation (see module docs).
    pub gen: u32,
}

/// FNV-1a, 32 bits: the generation of a workload's stamps.
pub fn fnv32(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

impl Stamp {
    fn header(&self) -> [u8; 32] {
        let mut h = [0u8; 32];
        h[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        h[8..12].copy_from_slice(&self.file.to_le_bytes());
        h[12..16].copy_from_slice(&self.op.to_le_bytes());
        h[16..24].copy_from_slice(&self.offset.to_le_bytes());
        h[24..28].copy_from_slice(&self.gen.to_le_bytes());
        h
    }

    fn checksum_of(header: &[u8]) -> u64 {
        header
            .chunks_exact(8)
            .fold(0x5eed_u64, |acc, w| mix(acc ^ u64::from_le_bytes(w.try_into().unwrap())))
    }

    /// Writes the full 512-byte sector for this stamp into `out` (which must be 512 bytes).
    pub fn encode_into(&self, out: &mut [u8]) {
        assert_eq!(out.len(), SECTOR, "a stamp fills exactly one sector");
        let header = self.header();
        let sum = Self::checksum_of(&header);
        out[..32].copy_from_slice(&header);
        out[32..40].copy_from_slice(&sum.to_le_bytes());
        for (i, w) in out[HEADER_LEN..].chunks_mut(8).enumerate() {
            let v = mix(sum ^ (i as u64).wrapping_mul(FILLER_STEP));
            w.copy_from_slice(&v.to_le_bytes()[..w.len()]);
        }
    }

    /// The full sector for this stamp.
    pub fn encode(&self) -> [u8; SECTOR] {
        let mut s = [0u8; SECTOR];
        self.encode_into(&mut s);
        s
    }

    /// Decodes a (possibly partial, at the end of a file) sector: `Some` only if the
    /// magic, checksum and every present filler byte match.
    pub fn decode(bytes: &[u8]) -> Option<Stamp> {
        if bytes.len() < HEADER_LEN || bytes.len() > SECTOR {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        if u64_at(0) != MAGIC || u32_at(28) != 0 {
            return None;
        }
        if Self::checksum_of(&bytes[..32]) != u64_at(32) {
            return None;
        }
        let stamp = Stamp { file: u32_at(8), op: u32_at(12), offset: u64_at(16), gen: u32_at(24) };
        // The header is these fields and zeros, and its checksum matched: only the filler
        // is left to compare, word by word as `encode_into` makes it, stopping at the
        // first that differs (the whole sector encoded again cost a third of a walk's
        // classifying).
        let sum = u64_at(32);
        let word = |i: usize| mix(sum ^ (i as u64).wrapping_mul(FILLER_STEP));
        let mut words = bytes[HEADER_LEN..].chunks_exact(8);
        let whole_words_match = (&mut words)
            .enumerate()
            .all(|(i, w)| u64::from_le_bytes(w.try_into().expect("8-byte word")) == word(i));
        // A partial sector ends in part of a word.
        let tail = words.remainder();
        let tail_matches = tail.is_empty()
            || *tail == word((bytes.len() - HEADER_LEN) / 8).to_le_bytes()[..tail.len()];
        (whole_words_match && tail_matches).then_some(stamp)
    }
}

/// Fills `buf` (a multiple of 512 bytes) with the stamped sectors of `file` starting at
/// byte `offset`, written by `op` with generation `gen`.
pub fn fill(buf: &mut [u8], file: u32, offset: u64, op: u32, gen: u32) {
    assert_eq!(buf.len() % SECTOR, 0, "stamped writes are whole sectors");
    for (i, s) in buf.chunks_mut(SECTOR).enumerate() {
        Stamp { file, op, offset: offset + (i * SECTOR) as u64, gen }.encode_into(s);
    }
}

/// Classifies the bytes of the sector found at byte `offset` of a file (the last sector
/// of a file may be partial): all zeros -> `Zero`; a valid stamp for this offset ->
/// `Data` (op `None` for setup and drain data); a valid stamp for another offset ->
/// `Foreign`; anything else -> `Garbage`.
pub fn classify(bytes: &[u8], offset: u64) -> SectorClass {
    if bytes.iter().all(|&b| b == 0) {
        return SectorClass::Zero;
    }
    match Stamp::decode(bytes) {
        Some(s) => {
            let op = (s.op != SETUP_OP && s.op != DRAIN_OP).then_some(s.op);
            if s.offset == offset {
                SectorClass::Data { file: s.file, op }
            } else {
                SectorClass::Foreign { file: s.file, offset: s.offset, op }
            }
        }
        None => SectorClass::Garbage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(file in any::<u32>(), op in any::<u32>(), sector in 0u64..(1 << 40), gen in any::<u32>()) {
            let offset = sector * 512;
            let s = Stamp { file, op, offset, gen };
            let bytes = s.encode();
            prop_assert_eq!(Stamp::decode(&bytes), Some(s));
            let want_op = (op != SETUP_OP && op != DRAIN_OP).then_some(op);
            prop_assert_eq!(classify(&bytes, offset), SectorClass::Data { file, op: want_op });
            // Found elsewhere: foreign.
            prop_assert_eq!(
                classify(&bytes, offset + 512),
                SectorClass::Foreign { file, offset, op: (op != SETUP_OP && op != DRAIN_OP).then_some(op) }
            );
            // A partial tail sector still classifies.
            prop_assert_eq!(classify(&bytes[..100], offset), SectorClass::Data { file, op: want_op });
        }

        #[test]
        fn any_flipped_byte_is_garbage(file in any::<u32>(), op in 0u32..1000, sector in 0u64..1000, at in 0usize..512, bit in 0u8..8) {
            let offset = sector * 512;
            let mut bytes = Stamp { file, op, offset, gen: 7 }.encode();
            bytes[at] ^= 1 << bit;
            prop_assert_eq!(classify(&bytes, offset), SectorClass::Garbage);
        }

        #[test]
        fn random_bytes_are_garbage(bytes in proptest::collection::vec(any::<u8>(), 512)) {
            prop_assume!(bytes.iter().any(|&b| b != 0));
            prop_assert_eq!(classify(&bytes, 0), SectorClass::Garbage);
        }
    }

    #[test]
    fn zeros_and_fill() {
        assert_eq!(classify(&[0u8; 512], 4096), SectorClass::Zero);
        let mut buf = vec![0u8; 4096];
        fill(&mut buf, 3, 8192, 5, 1);
        for (i, s) in buf.chunks(512).enumerate() {
            assert_eq!(
                classify(s, 8192 + i as u64 * 512),
                SectorClass::Data { file: 3, op: Some(5) }
            );
        }
        fill(&mut buf, 3, 0, SETUP_OP, 1);
        assert_eq!(classify(&buf[..512], 0), SectorClass::Data { file: 3, op: None });
    }
}
