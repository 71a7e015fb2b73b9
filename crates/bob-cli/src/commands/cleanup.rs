//! `bob cleanup`: release what killed bob processes left behind; and the quiet version
//! every resource-creating command runs first.

use bob_core::run;

use crate::cli::CleanupArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::print;

/// Runs `bob cleanup`.
pub fn run(args: CleanupArgs) -> Result<Conclusion, CliError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(CliError::Environment(
            "bob cleanup needs root to unmount and unbind loop devices".into(),
        ));
    }
    let r = run::reclaim_dead();
    print::render(&r, args.format)?;
    if r.failures.is_empty() {
        Ok(Conclusion::Done)
    } else {
        Err(CliError::CleanupIncomplete(r.failures.len()))
    }
}

/// Reclaims what dead bob processes left, saying so in one line if there was anything.
pub fn reclaim_quietly() {
    if let Some(notice) = run::reclaim_dead().notice() {
        eprintln!("bob: {notice}");
    }
}
