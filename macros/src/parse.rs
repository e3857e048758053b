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

use proc_macro2::Span;
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
    /// The parse error that stopped parsing, if any (models before it are kept).
    pub error: Option<syn::Error>,
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
            .filter_map(|f| {
                Some(FieldDef {
                    attrs: f.attrs,
                    vis: f.vis,
                    name: f.ident?,
                    ty: f.ty,
                })
            })
            .collect(),
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

fn parse_forward(input: ParseStream, model: &Ident) -> syn::Result<ForwardDef> {
    let attrs = input.call(Attribute::parse_outer)?;
    if !input.peek(Token![fn]) {
        return Err(input.error(format!(
            "expected `fn forward(&self, ..) -> [..] {{ .. }}` after the struct `{model}`"
        )));
    }
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

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut out = Input {
            signatures: vec![],
            models: vec![],
            error: None,
        };
        while input.peek(Token![@]) {
            out.signatures.push(input.parse()?);
        }
        if input.is_empty() {
            return Err(
                input.error("`model!` expects `struct Name { layers } fn forward(..) { .. }`")
            );
        }
        while !input.is_empty() {
            let mut model = match parse_struct(input) {
                Ok(m) => m,
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            };
            match parse_forward(input, &model.name) {
                Ok(f) => model.forward = Some(f),
                Err(e) => {
                    out.error = Some(e);
                    out.models.push(model);
                    break;
                }
            }
            out.models.push(model);
        }
        Ok(out)
    }
}
