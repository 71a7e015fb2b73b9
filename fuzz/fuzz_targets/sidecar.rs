//! Sidecar JSON: any bytes parse to a sidecar or an error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = serde_json::from_slice::<bob_core::trace::sidecar::Sidecar>(data);
});
