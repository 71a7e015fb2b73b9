//! A dm-log-writes log from anywhere: never a panic, never an allocation of its claimed size.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = bob_core::trace::log::read_log(std::io::Cursor::new(data));
});
