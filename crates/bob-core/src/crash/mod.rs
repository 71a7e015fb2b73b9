//! Crash states: the disk contents a crash may legally leave behind.
//!
//! The recorded disk has a volatile write cache: between two flush barriers it may persist
//! any subset of the writes it acknowledged, and tear a write at its atomic write unit. This
//! module turns a [`Trace`](crate::trace::Trace) into those states, without touching any
//! image:
//!
//! * a [`DiskModel`] says what the disk may do: its atomic write unit and what FUA means
//!   ([`disk`]);
//! * [`epochs`] cuts the trace at its barriers under that model ([`epoch`]);
//! * a [`StateId`] names one state compactly and printably, `e3:0-4,6,7[0-3]`, and parses
//!   back ([`id`]);
//! * [`stream`] gives the states of the chosen [`Strategy`]s within [`Limits`] one at a
//!   time, holding a digest per state rather than the state; [`generate`] collects them,
//!   and [`shard`] splits that list between machines ([`strategy`]);
//! * an [`Overlay`] says where each changed sector of a state comes from, for the
//!   copy-on-write view and for the content [`Overlay::digest`] that dedups states
//!   ([`overlay`](mod@overlay));
//! * [`compare`] sets two recordings of one workload side by side (`bob log A --compare
//!   B`): their marks and requests, and the epochs and crash states each gives.
//!
//! ```
//! use bob_core::crash::{self, DiskModel, Limits, Strategy};
//! use bob_core::trace::{Entry, Trace};
//!
//! let trace = Trace::new(
//!     512,
//!     vec![Entry::write(0, vec![1; 512]), Entry::write(8, vec![2; 1024]), Entry::flush()],
//! );
//! let epochs = crash::epochs(&trace, &DiskModel::default());
//! let states = crash::generate(&trace, &epochs, Strategy::ORIGINAL, &Limits::default());
//! let id = &states.states[2].id;
//! assert_eq!(id.to_string(), "e0:0-1");
//! let builder = crash::OverlayBuilder::new(&trace, &epochs);
//! assert_eq!(builder.state(id).len(), 3);
//! ```

pub mod compare;
pub(crate) mod disk;
pub(crate) mod epoch;
pub(crate) mod id;
pub(crate) mod overlay;
pub(crate) mod pm_states;
pub(crate) mod strategy;

#[cfg(test)]
mod tests;

pub use disk::{AtomicWriteUnits, DiskModel, FuaModel};
pub(crate) use epoch::op_epochs;
pub use epoch::{epochs, Barrier, Epoch};
pub use id::{Applied, StateId};
pub use overlay::{overlay, Overlay, OverlayBuilder, SectorSource};
pub use strategy::{generate, shard, stream, CrashState, Generated, Limits, StateStream, Strategy};

/// What can go wrong naming, checking or choosing crash states.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A state id that does not follow the grammar `e<epoch>:<writes>`.
    #[error("invalid crash-state id {id:?}: {reason} (at byte {position})")]
    InvalidId {
        /// The text given.
        id: String,
        /// Byte offset of the problem.
        position: usize,
        /// What is wrong there.
        reason: String,
    },
    /// A state id naming an epoch the trace does not have.
    #[error("crash-state id {id}: no epoch {epoch}, the trace has {epochs} (0 to {last})", last = epochs.saturating_sub(1))]
    NoSuchEpoch {
        /// The id.
        id: String,
        /// The epoch it names.
        epoch: u32,
        /// How many epochs the trace has.
        epochs: usize,
    },
    /// A state id naming a write its epoch does not have.
    #[error("crash-state id {id}: epoch {epoch} has {writes} writes, no write {write}")]
    NoSuchWrite {
        /// The id.
        id: String,
        /// The crash epoch.
        epoch: u32,
        /// The write position named.
        write: u32,
        /// How many writes the epoch has.
        writes: usize,
    },
    /// A tear naming a sector beyond its request.
    #[error(
        "crash-state id {id}: write {write} of epoch {epoch} has {nr_sectors} sectors, \
         so no sector {sector}"
    )]
    SectorOutOfRange {
        /// The id.
        id: String,
        /// The crash epoch.
        epoch: u32,
        /// The torn write's position.
        write: u32,
        /// The sector index named.
        sector: u32,
        /// The request's length in sectors.
        nr_sectors: u64,
    },
    /// A well-formed id that is not canonical or not consistent (order, duplicates).
    #[error("crash-state id {id}: {reason}")]
    InvalidState {
        /// The id.
        id: String,
        /// What is wrong.
        reason: String,
    },
    /// A strategy name that is not one of [`Strategy::ALL`].
    #[error("unknown crash-state strategy {name:?}; expected one of: {expected}")]
    UnknownStrategy {
        /// The name given.
        name: String,
        /// The valid names.
        expected: String,
    },
    /// A shard that does not exist.
    #[error(
        "invalid shard {index} of {count}: the count must be at least 1 and the index below it"
    )]
    InvalidShard {
        /// The 0-based shard index given.
        index: usize,
        /// The number of shards given.
        count: usize,
    },
}
