//! Prints the blake3 digest bob gives an image file (`bob_core::files::file_digest`), for
//! scripts that record expected images (scripts/replay-log-fixtures.sh).

fn main() -> std::process::ExitCode {
    let mut status = 0;
    for path in std::env::args_os().skip(1) {
        match bob_core::files::file_digest(std::path::Path::new(&path)) {
            Ok(d) => println!("{d}"),
            Err(e) => {
                eprintln!("file-digest: {}: {e}", std::path::Path::new(&path).display());
                status = 2;
            }
        }
    }
    std::process::ExitCode::from(status)
}
