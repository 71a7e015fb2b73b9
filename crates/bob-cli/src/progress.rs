//! Progress on stderr (indicatif), one implementation of bob-core's [`Progress`] and
//! [`TableProgress`] for every command: a bar per phase (states checked of the phase's
//! total), and for a table a bar of cells above it. Hidden when stderr is not a terminal;
//! a table then says each finished cell in one line instead, so logs show progress.

use std::sync::Mutex;
use std::time::Duration;

use bob_core::report::Cell;
use bob_core::run::explore::ExploreProgress;
use bob_core::run::{Progress, TableProgress};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars of one command.
pub struct Bars {
    multi: MultiProgress,
    visible: bool,
    /// Keep each finished phase as a line (`bob bench`, whose phases are its report).
    keep_phases: bool,
    cells: Option<ProgressBar>,
    phase: Mutex<Option<ProgressBar>>,
    /// The phase bars of a table's lanes after the first (two cells checked at once),
    /// by lane; lane 0's is `phase`.
    lanes: Mutex<std::collections::BTreeMap<usize, ProgressBar>>,
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Bars {
    fn new(visible: bool, keep_phases: bool) -> Bars {
        let multi = MultiProgress::new();
        if !visible {
            multi.set_draw_target(ProgressDrawTarget::hidden());
        }
        Bars {
            multi,
            visible,
            keep_phases,
            cells: None,
            phase: Mutex::new(None),
            lanes: Mutex::new(Default::default()),
        }
    }

    /// One bar, reused by each phase and cleared at the end (`bob run`, `bob check`).
    pub fn states(visible: bool) -> Bars {
        Bars::new(visible, false)
    }

    /// A bar per phase, each left as a line when done (`bob bench`).
    pub fn phases(visible: bool) -> Bars {
        Bars::new(visible, true)
    }

    /// A bar of `cells` cells above the bar of the current cell's states (`bob table`).
    pub fn table(visible: bool, cells: usize) -> Bars {
        let mut bars = Bars::new(visible, false);
        let bar = bars.multi.add(ProgressBar::new(cells as u64));
        bar.set_style(style("cells  [{bar:30}] {pos}/{len} {msg}"));
        bars.cells = Some(bar);
        bars
    }

    /// Whether stderr is a terminal (where bars are drawn).
    pub fn stderr_is_terminal() -> bool {
        std::io::IsTerminal::is_terminal(&std::io::stderr())
    }

    /// Ends every bar (cleared, or left as a line for kept phases).
    pub fn finish(&self) {
        if let Some(bar) = self.phase.lock().unwrap_or_else(|p| p.into_inner()).take() {
            self.end(bar);
        }
        let lanes = std::mem::take(&mut *self.lanes.lock().unwrap_or_else(|p| p.into_inner()));
        lanes.into_values().for_each(|bar| self.end(bar));
        if let Some(cells) = &self.cells {
            cells.finish_and_clear();
        }
    }

    fn end(&self, bar: ProgressBar) {
        if self.keep_phases {
            bar.finish();
        } else {
            bar.finish_and_clear();
        }
    }

    /// A new bar for a phase named `name`.
    fn phase_bar(&self, name: &str, total: usize) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new(total as u64));
        bar.set_style(style(
            "{spinner} {msg:<12} [{bar:30}] {pos}/{len} {per_sec} eta {eta} {elapsed_precise}",
        ));
        bar.set_message(name.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }
}

impl Progress for Bars {
    fn phase(&self, name: &str, total: usize) {
        let mut current = self.phase.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bar) = current.take() {
            self.end(bar);
        }
        *current = Some(self.phase_bar(name, total));
    }

    fn state_done(&self, done: usize, total: usize) {
        if let Some(bar) = self.phase.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }
}

impl TableProgress for Bars {
    fn cell_started(&self, index: usize, label: &str) {
        if let Some(cells) = &self.cells {
            cells.set_position(index as u64);
            cells.set_message(label.to_owned());
        }
    }

    fn lane_phase(&self, lane: usize, name: &str, total: usize) {
        if lane == 0 {
            return self.phase(name, total);
        }
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bar) = lanes.remove(&lane) {
            self.end(bar);
        }
        lanes.insert(lane, self.phase_bar(name, total));
    }

    fn lane_state_done(&self, lane: usize, done: usize, total: usize) {
        if lane == 0 {
            return self.state_done(done, total);
        }
        if let Some(bar) = self.lanes.lock().unwrap_or_else(|p| p.into_inner()).get(&lane) {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    fn cell_finished(&self, cell: &Cell) {
        if !self.visible {
            eprintln!(
                "bob: {} / {} [{}]: {} ({} explored, {} distinct: {}; {:.1}s)",
                cell.config,
                cell.property,
                cell.disk_model,
                cell.verdict.name(),
                cell.states_explored,
                cell.states_unique,
                cell.how_checked(),
                cell.seconds
            );
        }
    }
}

impl ExploreProgress for Bars {
    fn scanning(&self, scanned: u64, indices: u64) {
        if let Some(bar) = &*self.phase.lock().unwrap_or_else(|p| p.into_inner()) {
            bar.set_message(format!(
                "looking at index {scanned} of {indices} ({:.2}%)",
                scanned as f64 * 100.0 / indices.max(1) as f64
            ));
        }
    }

    fn start(&self, total: Option<u64>) {
        let mut current = self.phase.lock().unwrap_or_else(|p| p.into_inner());
        let bar = match total {
            Some(n) => {
                let bar = self.multi.add(ProgressBar::new(n));
                bar.set_style(style(
                    "{spinner} workloads [{bar:30}] {pos}/{len} {per_sec} eta {eta} {msg}",
                ));
                bar
            }
            None => {
                let bar = self.multi.add(ProgressBar::new_spinner());
                bar.set_style(style("{spinner} workloads {pos} {per_sec} {msg}"));
                bar
            }
        };
        bar.enable_steady_tick(Duration::from_millis(120));
        *current = Some(bar);
    }

    fn done(&self, done: u64, signatures: usize, last: &str) {
        if let Some(bar) = self.phase.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            bar.set_position(done);
            bar.set_message(format!("{signatures} signature(s); {last}"));
        }
    }
}
