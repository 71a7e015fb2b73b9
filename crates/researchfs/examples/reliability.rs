//! Prints the thesis' reliability table (5.6) as this crate's orderless and NoFS produce
//! it: `cargo run -p researchfs --example reliability [-- --json]`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let json = std::env::args().any(|a| a == "--json");
    match researchfs::reliability::run_table() {
        Ok(rows) if json => match serde_json::to_string_pretty(&rows) {
            Ok(s) => {
                println!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("reliability: cannot serialize the table: {e}");
                ExitCode::from(2)
            }
        },
        Ok(rows) => {
            print!("{}", researchfs::reliability::render_markdown(&rows));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("reliability: {e}");
            ExitCode::from(2)
        }
    }
}
