//! `bob bench --kernel`: the same benchmark on several kernels (the host's and guests'),
//! and what a mounted crash state costs on each against the host's, in one report.
//!
//! Each kernel's [`BenchReport`] is measured by its own bob (the host's, or one inside a
//! guest); this module only sets them side by side. The ratio that matters to a user
//! sizing a run is the engine's wall time per state it mounted: a guest under emulation
//! pays for every mount, fsck and page of I/O. The floor (one mount + umount) is set
//! beside it, so a reader sees whether the guest slows the kernel's work or bob's own.
//!
//! A user-mode Linux guest has one CPU, so a table runs one guest per core; the benchmark
//! does the same (each guest checks the cell's states at once) and a kernel's figure is
//! what the machine delivers with all of them, set beside one guest's own.

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
    /// The report that kernel's bob wrote (the first guest's, when several ran).
    pub report: BenchReport,
    /// How many guests ran the benchmark at once (1 for the host).
    #[serde(default = "one")]
    pub guests: u32,
    /// Each guest's engine wall time per mounted state, ms, when several ran at once.
    #[serde(default)]
    pub guest_ms_per_mounted_state: Vec<f64>,
    /// Engine wall time per mounted state on this kernel with every guest at work, ms:
    /// the machine's rate is the sum of the guests' rates.
    pub ms_per_mounted_state: f64,
}

fn one() -> u32 {
    1
}

/// The ms per state of workers that ran at once, each at `each` ms per state: their
/// rates add up. Workers that measured nothing (0) add nothing.
fn together(each: &[f64]) -> f64 {
    let per_ms: f64 = each.iter().filter(|ms| **ms > 0.0).map(|ms| 1.0 / ms).sum();
    if per_ms > 0.0 {
        1.0 / per_ms
    } else {
        0.0
    }
}

impl KernelBench {
    /// The benchmark of `kernel` from the reports of the guests that ran it at once (one
    /// report for the host). `None` when there is none.
    pub fn of_guests(kernel: String, reports: Vec<BenchReport>) -> Option<Self> {
        let first = reports.first()?.clone();
        let each: Vec<f64> = reports.iter().map(|r| r.engine_ms_per_mounted_state).collect();
        let ms_per_mounted_state = together(&each);
        Some(KernelBench {
            kernel,
            release: first.machine.kernel.clone(),
            guests: reports.len() as u32,
            guest_ms_per_mounted_state: if reports.len() > 1 { each } else { Vec::new() },
            ms_per_mounted_state,
            report: first,
        })
    }
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
                ms_per_mounted_state: k.ms_per_mounted_state,
                mounted_state_ratio: ratio(k.ms_per_mounted_state, base.ms_per_mounted_state),
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
            let guests = match k.guest_ms_per_mounted_state.as_slice() {
                [] | [_] => String::new(),
                each => format!(
                    " with {} guests at once (each {} ms)",
                    each.len(),
                    each.iter().map(|ms| format!("{ms:.1}")).collect::<Vec<_>>().join(", ")
                ),
            };
            let _ = writeln!(
                s,
                "{:<14} {:<28} {} jobs, {:>5} states, {:>5} mounted: {:8.1} ms per mounted \
                 state{guests} ({:.1} ms with one worker), floor {:7.1} ms, cost {:.2}x floor, \
                 verdicts {}",
                k.kernel,
                k.release,
                r.jobs,
                r.states,
                r.states_mounted,
                k.ms_per_mounted_state,
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

#[cfg(test)]
mod tests {
    use super::together;

    #[test]
    fn guests_at_once_add_their_rates() {
        assert_eq!(together(&[8.0]), 8.0);
        assert_eq!(together(&[8.0, 8.0]), 4.0);
        assert!((together(&[24.0, 12.0]) - 8.0).abs() < 1e-9);
        assert_eq!(together(&[0.0, 10.0]), 10.0);
        assert_eq!(together(&[]), 0.0);
    }
}
