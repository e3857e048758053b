//! The `model!` compile-time errors, one case per file under `tests/ui/<category>/`,
//! each with its expected `.stderr` (the toolchain is pinned, so they are stable).
//! Regenerate after a deliberate change with `TRYBUILD=overwrite cargo test --test ui`.

#[test]
fn model_macro_ui() {
    let t = trybuild::TestCases::new();
    for category in ["parse", "layer", "shape", "forward", "generics"] {
        t.compile_fail(format!("tests/ui/{category}/*.rs"));
    }
    t.pass("tests/ui/pass/*.rs");
}
