//! Any bytes given to the IDX reader (plain or gzipped) give a tensor or an
//! error, never a panic. `cargo +nightly fuzz run idx`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tapir_runtime::data::parse_idx(data);
});
