//! `tapir-macros`: the `model!` procedural macro.
//!
//! `model!` reads a struct of layers and its `forward`, checks every tensor
//! shape in `forward` symbolically, and generates the struct, its `new`, a
//! typed `forward`/`try_forward` and the `Module` impl. It is built as
//! serde_derive is: `parse` (syntax only) -> `analyse` (the layer table and
//! the shape checker over the pure algebra of `shape`) -> `codegen`.
//! Every user error is a `syn::Error` at the offending token; all errors of a
//! block are reported together, and a stub of each failed model is still
//! emitted so that code using it reports nothing further.
//!
//! The reference is `docs/model-macro.md` in the repository; use the macro
//! through `tapir::model!`.

#![warn(missing_docs)]

mod analyse;
mod codegen;
mod parse;
mod shape;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

/// Defines a model: layers as fields, `forward` with shapes, every shape
/// checked while the crate compiles. Use it through `tapir::model`, whose
/// documentation has a worked example; `tapir::model_macro_reference` has
/// the grammar, the shape rules, the layer table and every error.
#[proc_macro]
pub fn model(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand(input.into()).into()
}

/// Expands a `model!` block; never panics (an internal failure becomes a
/// compile error asking for a report).
fn expand(tokens: TokenStream) -> TokenStream {
    match std::panic::catch_unwind(|| expand_checked(tokens)) {
        Ok(t) => t,
        Err(_) => quote!(::core::compile_error!(
            "internal error in `model!` (please report it with the block that caused it)"
        );),
    }
}

fn expand_checked(tokens: TokenStream) -> TokenStream {
    if let Some(t) = layer_table_request(&tokens) {
        return t;
    }
    let input = parse::parse_input(tokens.clone());
    let analysis = analyse::analyse(&input);
    if let Some(callee) = &analysis.needs_signature {
        // Ask the other block's `macro_rules!` for its signature; it calls
        // `model!` again with `@signature ..` in front of these tokens.
        return quote_spanned!(callee.span()=> #callee! { @tapir_signature #tokens });
    }
    let mut out = TokenStream::new();
    let mut errors = analysis.errors;
    errors.extend(input.errors.iter().cloned());
    for e in &errors {
        out.extend(e.to_compile_error());
    }
    for m in &analysis.models {
        if errors.is_empty() {
            out.extend(codegen::model(m));
        } else {
            out.extend(codegen::stub(m.def, &m.fields));
        }
    }
    out
}

/// `model!(@layer_table)`: the names of the layer table's rows, for the test
/// that builds every row.
fn layer_table_request(tokens: &TokenStream) -> Option<TokenStream> {
    let s = tokens.to_string();
    if s.replace(' ', "") != "@layer_table" {
        return None;
    }
    let rows = analyse::layers::row_names();
    Some(quote!(&[#(#rows),*]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proc_macro2::TokenTree;

    const SEED: &str = r#"
        pub struct ResBlock<const D: usize> {
            net: Sequential<(Linear<D, D>, LayerNorm<D>, GELU, Linear<D, D>)>,
        }
        fn forward(&self, x: [B, D]) -> [B, D] {
            x + self.net(x)
        }
        pub struct Mlp<const IN: usize, const OUT: usize> {
            stem: Linear<IN, 256>,
            blocks: [ResBlock<256>; 4],
            conv: Conv2d<1, 8, 3, padding = 1>,
            attn: MultiheadAttention<_, 2, batch_first = true>,
            head: Linear<256, OUT>,
        }
        fn forward(&self, x: [B, IN], img: [B, 1, 28, 28]) -> ([B, OUT], [B, 8, 28, 28]) {
            let mut h = self.stem(x);
            for block in &self.blocks { h = block(h); }
            let (a, _) = self.attn(h.unsqueeze(1), h.unsqueeze(1), h.unsqueeze(1));
            let h = if self.is_training() { h * 0.5 } else { a.reshape([B, -1]) };
            let y = unchecked!(foo(&h) => [B, 256]);
            (self.head(y), self.conv(img).relu())
        }
    "#;

    fn flatten(ts: TokenStream) -> Vec<TokenTree> {
        ts.into_iter().collect()
    }

    #[test]
    fn the_seed_expands_without_errors() {
        let out = expand(SEED.parse().unwrap()).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("macro_rules"), "{out}");
    }

    #[test]
    fn truncated_input_never_panics() {
        // Cut the block after every top-level token and inside every group:
        // the macro must answer with errors, never a panic.
        let tokens = flatten(SEED.parse().unwrap());
        for cut in 0..tokens.len() {
            let ts: TokenStream = tokens[..cut].iter().cloned().collect();
            let out = expand_checked(ts).to_string();
            assert!(!out.contains("internal error"), "cut {cut}");
        }
    }

    #[test]
    fn every_token_removed_never_panics() {
        let text = SEED;
        let words: Vec<&str> = text.split_whitespace().collect();
        for i in 0..words.len() {
            let mut w = words.clone();
            w.remove(i);
            let Ok(ts) = w.join(" ").parse::<TokenStream>() else {
                continue;
            };
            let out = expand_checked(ts).to_string();
            assert!(!out.contains("internal error"), "without word {i}");
        }
    }
}
