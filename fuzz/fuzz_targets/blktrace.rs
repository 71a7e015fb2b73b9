//! blktrace binary and blkparse text input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = bob_core::trace::blktrace::read_events(std::io::Cursor::new(data), std::path::Path::new("fuzz"));
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = bob_core::trace::blktrace::parse_blkparse(text, std::path::Path::new("fuzz"));
    }
});
