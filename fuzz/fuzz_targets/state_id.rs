//! State ids typed by people: parse, and if it parses, print back to the same id.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(id) = text.parse::<bob_core::crash::StateId>() {
            let again: bob_core::crash::StateId = id.to_string().parse().expect("round trip");
            assert_eq!(id, again);
        }
    }
});
