//! Benchmarks: bob's engine against the naive per-state pipeline and the mount floor (in progress).
