//! Colour on the terminal: verdicts in colour when stdout is a terminal and `NO_COLOR` is
//! not set (https://no-color.org: any non-empty value turns colour off), plain otherwise,
//! so that pipes, files and CI logs get the same text as before. Each verdict's colour is
//! its row of bob-core's outcome table.

use std::io::IsTerminal;

use bob_core::check::OutcomeKind;

/// Whether to colour, decided once per command.
#[derive(Clone, Copy, Debug)]
pub struct Painter {
    on: bool,
}

impl Painter {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty.
    pub fn stdout() -> Painter {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Painter { on: !no_color && std::io::stdout().is_terminal() }
    }

    /// `text` in the colour of `verdict` (its row of the outcome table).
    pub fn verdict(&self, verdict: OutcomeKind, text: &str) -> String {
        if !self.on {
            return text.to_owned();
        }
        let code = verdict.row().ansi;
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_means_the_text_unchanged_and_on_wraps_it() {
        let off = Painter { on: false };
        assert_eq!(off.verdict(OutcomeKind::Violated, "violated"), "violated");
        let on = Painter { on: true };
        assert_eq!(on.verdict(OutcomeKind::Violated, "violated"), "\x1b[1;31mviolated\x1b[0m");
    }
}
