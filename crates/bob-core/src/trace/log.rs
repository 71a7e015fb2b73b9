//! dm-log-writes log reading and writing (in progress).
