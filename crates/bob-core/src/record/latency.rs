//! The latency model of bob's recording disk (`--latency hdd|ssd|none`): how long each
//! request takes, so that what a flush costs shows in a recording's wall time. An image
//! in the page cache makes a flush almost free; a real disk with a volatile cache must
//! first write every dirty request to the media.
//!
//! The model: a write or discard costs a fixed acknowledgement time (the request reaches
//! the disk's cache) plus its bytes at the interface's bandwidth; a flush costs one
//! positioning plus a media write per request made dirty since the last durability
//! point (a flush, or a durability notification: the disk wrote those back on its own, in
//! the background, at no cost to the caller). Reads are free (the page cache serves
//! them). What it does not capture: seek distances, request merging, queueing, the media
//! bandwidth of large flushed requests, or any reordering inside the disk. The constants
//! and their sources are in docs/researchfs.md.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which disk the recording disk imitates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Latency {
    /// No added latency (the default): the image file's own speed.
    #[default]
    None,
    /// A 7200 rpm disk like the OptFS thesis' (Hitachi DeskStar 7K1000.B).
    Hdd,
    /// A SATA flash disk with a volatile write cache.
    Ssd,
}

/// The costs of one disk model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Costs {
    /// A write or discard reaching the disk cache.
    pub per_request: Duration,
    /// Interface bandwidth in bytes per second (0: free).
    pub bytes_per_sec: u64,
    /// A flush: the positioning it always costs.
    pub flush: Duration,
    /// A flush: per request made dirty since the last durability point.
    pub flush_per_dirty: Duration,
}

impl Latency {
    /// Every model, in `--latency` order.
    pub const ALL: [Latency; 3] = [Latency::None, Latency::Hdd, Latency::Ssd];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Latency::None => "none",
            Latency::Hdd => "hdd",
            Latency::Ssd => "ssd",
        }
    }

    /// The model's costs; `None` adds nothing.
    pub(crate) fn costs(self) -> Option<Costs> {
        match self {
            Latency::None => None,
            // 7200 rpm: 4.17 ms average rotational latency; 8.5 ms average seek (the
            // DeskStar 7K1000.B data sheet; also the thesis' 8.5 ms for ext4's second,
            // one-block flush in Fig. 6.4); ~100 MB/s sustained; a cached write is
            // acknowledged in ~0.1 ms. A dirty request costs about half a rotation plus
            // a short seek when the disk schedules the whole cache at once: 4 ms.
            Latency::Hdd => Some(Costs {
                per_request: Duration::from_micros(100),
                bytes_per_sec: 100_000_000,
                flush: Duration::from_micros(8_500),
                flush_per_dirty: Duration::from_micros(4_000),
            }),
            // SATA 6 Gb/s: ~550 MB/s at the interface; ~20 us to acknowledge a cached
            // write; a flush of a consumer SSD's volatile cache in the order of 1 ms plus
            // ~50 us per dirty request (NAND program time amortised over its parallelism).
            Latency::Ssd => Some(Costs {
                per_request: Duration::from_micros(20),
                bytes_per_sec: 550_000_000,
                flush: Duration::from_micros(1_000),
                flush_per_dirty: Duration::from_micros(50),
            }),
        }
    }
}

impl Costs {
    /// The time a write or discard of `bytes` takes.
    pub fn write(&self, bytes: u64) -> Duration {
        let transfer = match self.bytes_per_sec {
            0 => Duration::ZERO,
            bw => Duration::from_nanos(bytes.saturating_mul(1_000_000_000) / bw),
        };
        self.per_request + transfer
    }

    /// The time a flush takes with `dirty` requests in the cache.
    pub fn flush(&self, dirty: u64) -> Duration {
        self.flush + self.flush_per_dirty * dirty.min(u64::from(u32::MAX)) as u32
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Latency {
    type Err = String;
    fn from_str(s: &str) -> Result<Latency, String> {
        Latency::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| format!("unknown latency model `{s}` (expected hdd, ssd or none)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_costs_grow_with_work() {
        for l in Latency::ALL {
            assert_eq!(l.name().parse::<Latency>().unwrap(), l);
        }
        assert!("tape".parse::<Latency>().is_err());
        assert!(Latency::None.costs().is_none());
        let hdd = Latency::Hdd.costs().unwrap();
        let ssd = Latency::Ssd.costs().unwrap();
        assert_eq!(hdd.write(4096), Duration::from_nanos(100_000 + 40_960));
        assert_eq!(hdd.flush(10), Duration::from_micros(8_500 + 40_000));
        assert!(ssd.flush(10) < hdd.flush(10) && ssd.write(4096) < hdd.write(4096));
    }
}
