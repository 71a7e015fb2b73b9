//! `bob bench --kernel`: the same benchmark on several kernels (the host's and guests'),
//! and what a mounted crash state costs on each against the host's, in one report.
//!
//! Each kernel's [`BenchReport`] is measured by its own bob (the host's, or one inside a
//! guest); this module only sets them side by side. The ratio that matters to a user
//! sizing a run is the engine's wall time per state it mounted: a guest under emulation
//! pays for every mount, fsck and page of I/O. The floor (one mount + umount) is set
//! beside it, so a reader sees whether the guest slows the kernel's work or bob's own.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::BenchReport;

/// One kernel's benchmark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelBench {
    /// The kernel as named on the command line (`host`, `debian:6.12`, a path).
    pub kernel: String,
    /// The release the benchmark ran on (`uname -r`).
    pub release: String,
    /// The report that kernel's bob wrote.
    pub report: BenchReport,
}

/// How one kernel compares with the first (the host's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRatio {
    /// The kernel as named on the command line.
    pub kernel: String,
    /// Engine wall time per mounted state on this kernel, ms.
    pub ms_per_mounted_state: f64,
    /// This kernel's over the baseline's: how many times a mounted state costs more.
    pub mounted_state_ratio: f64,
    /// Mean mount + umount of an unchanged image on this kernel, ms.
    pub floor_ms: f64,
    /// This kernel's floor over the baseline's.
    pub floor_ratio: f64,
    /// One worker's mean ms per mounted state (the serial engine sample) over the
    /// baseline's: the same ratio with parallel workers taken out.
    pub serial_ratio: f64,
}

/// The benchmark on each kernel, and each kernel against the first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelBenchReport {
    /// The kernel the others are measured against (the first one run: the host).
    pub baseline: String,
    /// Every kernel's benchmark, the baseline first.
    pub kernels: Vec<KernelBench>,
    /// Every kernel after the baseline against it.
    pub ratios: Vec<KernelRatio>,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

impl KernelBenchReport {
    /// Sets `kernels` side by side, the first as the baseline. `None` when empty.
    pub fn of(kernels: Vec<KernelBench>) -> Option<Self> {
        let base = kernels.first()?.clone();
        let ratios = kernels[1..]
            .iter()
            .map(|k| KernelRatio {
                kernel: k.kernel.clone(),
                ms_per_mounted_state: k.report.engine_ms_per_mounted_state,
                mounted_state_ratio: ratio(
                    k.report.engine_ms_per_mounted_state,
                    base.report.engine_ms_per_mounted_state,
                ),
                floor_ms: k.report.floor_ms,
                floor_ratio: ratio(k.report.floor_ms, base.report.floor_ms),
                serial_ratio: ratio(
                    k.report.engine_serial.ms_per_mounted_state,
                    base.report.engine_serial.ms_per_mounted_state,
                ),
            })
            .collect();
        Some(KernelBenchReport { baseline: base.kernel, kernels, ratios })
    }

    /// The human-readable summary: one line per kernel, then the ratios.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        if let Some(first) = self.kernels.first() {
            let r = &first.report;
            let _ = writeln!(
                s,
                "bench {} / {} on {} kernel(s)",
                r.config,
                r.property,
                self.kernels.len()
            );
        }
        for k in &self.kernels {
            let r = &k.report;
            let _ = writeln!(
                s,
                "{:<14} {:<28} {} jobs, {:>5} states, {:>5} mounted: {:8.1} ms per mounted \
                 state ({:.1} ms with one worker), floor {:7.1} ms, cost {:.2}x floor, verdicts {}",
                k.kernel,
                k.release,
                r.jobs,
                r.states,
                r.states_mounted,
                r.engine_ms_per_mounted_state,
                r.engine_serial.ms_per_mounted_state,
                r.floor_ms,
                r.cost_vs_floor,
                if r.verdicts_agree { "agree" } else { "DIFFER" }
            );
        }
        for q in &self.ratios {
            let _ = writeln!(
                s,
                "{} against {}: a mounted state costs {:.1}x ({:.1}x with one worker); the \
                 floor (mount + umount) {:.1}x",
                q.kernel, self.baseline, q.mounted_state_ratio, q.serial_ratio, q.floor_ratio
            );
        }
        s
    }
}
