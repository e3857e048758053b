//! Parse: the tokens of a `model!` block into plain syntax (no meaning yet).
//!
//! ```text
//! block     := signature* model+
//! model     := struct-item forward
//! forward   := attr* "fn" "forward" "(" "&self" ("," param)* ","? ")" "->" ret block
//! param     := ident ":" (shape | type)
//! ret       := shape | "(" shape ("," shape)* ","? ")"
//! shape     := "[" expr ("," expr)* ","? "]"
//! signature := "@signature" ident "[" ident* "]" "(" shape* ")" "->" "(" shape* ")" ";"
//! ```
//! `@signature` lines are written by the `macro_rules!` each model leaves
//! behind, so that a later `model!` block can check calls into it.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Block, Expr, Fields, Generics, Ident, ItemStruct, Token, Type, Visibility};

/// A shape as written: `[B, 784]`.
#[derive(Clone)]
pub struct ShapeSyntax {
    pub span: Span,
    pub dims: Vec<Expr>,
}

pub enum ParamType {
    Shape(ShapeSyntax),
    Rust(Box<Type>),
}

pub struct Param {
    pub name: Ident,
    pub ty: ParamType,
}

pub struct FieldDef {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub ty: Type,
    /// `#[module]` / `#[module(init)]`: a hand-written module, built by
    /// `init` (or `Default::default()`), whose calls go through `unchecked!`.
    pub module: Option<Option<Expr>>,
    /// `#[checkpoint]`: calls of this layer are gradient-checkpointed.
    pub checkpoint: bool,
}

pub struct ForwardDef {
    pub attrs: Vec<Attribute>,
    pub params: Vec<Param>,
    /// One shape, or several for a tuple return.
    pub ret: Vec<ShapeSyntax>,
    pub ret_is_tuple: bool,
    pub body: Block,
}

pub struct ModelDef {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub generics: Generics,
    pub fields: Vec<FieldDef>,
    /// `None` when the forward could not be parsed (an error was recorded).
    pub forward: Option<ForwardDef>,
}

/// The signature of a model defined in another `model!` block.
pub struct ExternSig {
    pub name: Ident,
    pub generics: Vec<Ident>,
    pub inputs: Vec<ShapeSyntax>,
    pub outputs: Vec<ShapeSyntax>,
}

pub struct Input {
    pub signatures: Vec<ExternSig>,
    pub models: Vec<ModelDef>,
    /// Every parse error (the models that parsed are kept).
    pub errors: Vec<syn::Error>,
}

impl Parse for ShapeSyntax {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let content;
        let bracket = syn::bracketed!(content in input);
        let dims = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
        Ok(ShapeSyntax {
            span: bracket.span.join(),
            dims: dims.into_iter().collect(),
        })
    }
}

fn parse_shapes_in_parens(input: ParseStream) -> syn::Result<Vec<ShapeSyntax>> {
    let content;
    syn::parenthesized!(content in input);
    let shapes = Punctuated::<ShapeSyntax, Token![,]>::parse_terminated(&content)?;
    Ok(shapes.into_iter().collect())
}

impl Parse for ExternSig {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        input.parse::<Token![@]>()?;
        let kw: Ident = input.parse()?;
        if kw != "signature" {
            return Err(syn::Error::new(kw.span(), "expected `@signature`"));
        }
        let name: Ident = input.parse()?;
        let content;
        syn::bracketed!(content in input);
        let mut generics = vec![];
        while !content.is_empty() {
            generics.push(content.parse()?);
        }
        let inputs = parse_shapes_in_parens(input)?;
        input.parse::<Token![->]>()?;
        let outputs = parse_shapes_in_parens(input)?;
        input.parse::<Token![;]>()?;
        Ok(ExternSig {
            name,
            generics,
            inputs,
            outputs,
        })
    }
}

fn parse_struct(input: ParseStream) -> syn::Result<ModelDef> {
    let item: ItemStruct = input.parse()?;
    let fields = match item.fields {
        Fields::Named(named) => named
            .named
            .into_iter()
            .map(|f| {
                let (module, attrs): (Vec<Attribute>, Vec<Attribute>) = f
                    .attrs
                    .into_iter()
                    .partition(|a| a.path().is_ident("module"));
                let (checkpoint, attrs): (Vec<Attribute>, Vec<Attribute>) = attrs
                    .into_iter()
                    .partition(|a| a.path().is_ident("checkpoint"));
                if let Some(a) = checkpoint
                    .iter()
                    .find(|a| !matches!(a.meta, syn::Meta::Path(_)))
                {
                    return Err(syn::Error::new_spanned(
                        a,
                        "`#[checkpoint]` takes no arguments",
                    ));
                }
                let module = match module.first() {
                    None => None,
                    Some(a) => Some(match &a.meta {
                        syn::Meta::Path(_) => None,
                        _ => Some(a.parse_args::<Expr>()?),
                    }),
                };
                Ok(f.ident.map(|name| FieldDef {
                    attrs,
                    vis: f.vis,
                    name,
                    ty: f.ty,
                    module,
                    checkpoint: !checkpoint.is_empty(),
                }))
            })
            .filter_map(Result::transpose)
            .collect::<syn::Result<Vec<_>>>()?,
        Fields::Unit => vec![],
        Fields::Unnamed(u) => {
            return Err(syn::Error::new(
                u.span(),
                "a model's layers are named fields: write `struct Name { field: Layer, .. }`",
            ));
        }
    };
    Ok(ModelDef {
        attrs: item.attrs,
        vis: item.vis,
        name: item.ident,
        generics: item.generics,
        fields,
        forward: None,
    })
}

fn parse_forward(input: ParseStream) -> syn::Result<ForwardDef> {
    let attrs = input.call(Attribute::parse_outer)?;
    input.parse::<Token![fn]>()?;
    let name: Ident = input.parse()?;
    if name != "forward" {
        return Err(syn::Error::new(
            name.span(),
            format!("a model has one method, `forward`; found `{name}`"),
        ));
    }
    let content;
    syn::parenthesized!(content in input);
    let amp: Option<Token![&]> = content.parse()?;
    let self_token: Option<Token![self]> = content.parse()?;
    if amp.is_none() || self_token.is_none() {
        return Err(content.error("`forward` takes `&self` first"));
    }
    let mut params = vec![];
    while !content.is_empty() {
        content.parse::<Token![,]>()?;
        if content.is_empty() {
            break;
        }
        let name: Ident = content.parse()?;
        content.parse::<Token![:]>()?;
        let ty = if content.peek(syn::token::Bracket) {
            ParamType::Shape(content.parse()?)
        } else {
            ParamType::Rust(Box::new(content.parse()?))
        };
        params.push(Param { name, ty });
    }
    if !input.peek(Token![->]) {
        return Err(input.error("`forward` must declare its output shape: `-> [B, OUT]`"));
    }
    input.parse::<Token![->]>()?;
    let (ret, ret_is_tuple) = if input.peek(syn::token::Paren) {
        (parse_shapes_in_parens(input)?, true)
    } else {
        (vec![input.parse()?], false)
    };
    let body: Block = input.parse()?;
    Ok(ForwardDef {
        attrs,
        params,
        ret,
        ret_is_tuple,
        body,
    })
}

/// Splits the block at the top level into `@signature ..;` lines, struct
/// items and forward fns, so that each is parsed on its own and an error in
/// one does not hide the others.
fn chunks(tokens: TokenStream) -> Vec<(ChunkKind, TokenStream)> {
    let mut out = vec![];
    let mut cur: Vec<TokenTree> = vec![];
    let mut kind = None;
    for tt in tokens {
        let end = match (&tt, kind) {
            (TokenTree::Punct(p), _) if p.as_char() == '@' && cur.is_empty() => {
                kind = Some(ChunkKind::Signature);
                false
            }
            (TokenTree::Ident(i), None) if i == "struct" => {
                kind = Some(ChunkKind::Struct);
                false
            }
            (TokenTree::Ident(i), None) if i == "fn" => {
                kind = Some(ChunkKind::Forward);
                false
            }
            (TokenTree::Punct(p), Some(ChunkKind::Signature | ChunkKind::Struct)) => {
                p.as_char() == ';'
            }
            (TokenTree::Group(g), Some(ChunkKind::Struct | ChunkKind::Forward)) => {
                g.delimiter() == Delimiter::Brace
            }
            _ => false,
        };
        cur.push(tt);
        if end {
            out.push((kind.unwrap_or(ChunkKind::Struct), cur.drain(..).collect()));
            kind = None;
        }
    }
    if !cur.is_empty() {
        out.push((kind.unwrap_or(ChunkKind::Struct), cur.into_iter().collect()));
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ChunkKind {
    Signature,
    Struct,
    Forward,
}

/// Parses a block: every chunk that parses is kept, every error is returned.
pub fn parse_input(tokens: TokenStream) -> Input {
    let mut out = Input {
        signatures: vec![],
        models: vec![],
        errors: vec![],
    };
    let all = chunks(tokens);
    if all.is_empty() {
        out.errors.push(syn::Error::new(
            Span::call_site(),
            "`model!` expects `struct Name { layers } fn forward(&self, ..) -> [..] { .. }`",
        ));
    }
    let mut iter = all.into_iter().peekable();
    while let Some((kind, ts)) = iter.next() {
        match kind {
            ChunkKind::Signature => match syn::parse2::<ExternSig>(ts) {
                Ok(s) => out.signatures.push(s),
                Err(e) => out.errors.push(e),
            },
            ChunkKind::Forward => {
                let err = syn::parse2::<ForwardDef>(ts).err();
                out.errors.push(err.unwrap_or_else(|| {
                    syn::Error::new(Span::call_site(), "a `fn forward` must follow a struct")
                }));
            }
            ChunkKind::Struct => {
                let mut model = match syn::parse2::<StructChunk>(ts) {
                    Ok(m) => m.0,
                    Err(e) => {
                        out.errors.push(e);
                        // Skip this model's forward too.
                        if matches!(iter.peek(), Some((ChunkKind::Forward, _))) {
                            iter.next();
                        }
                        continue;
                    }
                };
                match iter.peek() {
                    Some((ChunkKind::Forward, _)) => {
                        let (_, f) = iter.next().unwrap_or((ChunkKind::Forward, TokenStream::new()));
                        match syn::parse2::<ForwardDef>(f) {
                            Ok(f) => model.forward = Some(f),
                            Err(e) => out.errors.push(e),
                        }
                    }
                    _ => out.errors.push(syn::Error::new(
                        model.name.span(),
                        format!("expected `fn forward(&self, ..) -> [..] {{ .. }}` after the struct `{}`", model.name),
                    )),
                }
                out.models.push(model);
            }
        }
    }
    out
}

struct StructChunk(ModelDef);

impl Parse for StructChunk {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        parse_struct(input).map(StructChunk)
    }
}

impl Parse for ForwardDef {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        parse_forward(input)
    }
}
