//! Any bytes given to the safetensors / checkpoint loader give a value or an
//! error, never a panic, an out-of-bounds read or an unbounded allocation.
//! `cargo +nightly fuzz run checkpoint` (seed corpus: fuzz/corpus/checkpoint).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tapir_runtime::checkpoint::from_safetensors(data);
    let _ = tapir_runtime::Checkpoint::from_bytes(data);
});
