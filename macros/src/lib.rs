//! `tapir-macros`: the `model!` procedural macro.
//!
//! The shape-checking `model!` macro is delivered by its own issue; for now the
//! crate exposes nothing but builds as part of the workspace.
