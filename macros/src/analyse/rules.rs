//! What the rows' shape rules share: the facts a rule asks the checker for,
//! slot inference, and PyTorch's output-size formulas.

use super::layers::{Kind, Layer, Slot};
use crate::shape::{Dim, Shape, show, window_out};

/// What the checker answers when a rule needs two dims equal or one to divide another.
pub trait Facts {
    /// `Ok` when equal (or deferred to a compile-time assertion); `Err` when provably not.
    fn equal(&mut self, got: &Dim, want: &Dim, msg: &dyn Fn() -> String) -> Result<(), String>;
    fn divides(&mut self, n: &Dim, d: &Dim, msg: &dyn Fn() -> String) -> Result<(), String>;
}

pub fn rank_at_least(label: &str, x: &Shape, n: usize, pattern: &str) -> Result<(), String> {
    if x.len() < n {
        return Err(format!(
            "{label} expects input `{pattern}`, got `{}`{{from}}",
            show(x)
        ));
    }
    Ok(())
}

pub fn fill_slot(slot: &Slot, got: &Dim, what: &str, label: &str) -> Result<Dim, String> {
    match slot {
        Slot::Known(d) => Ok(d.clone()),
        Slot::Infer(cell) => {
            let current = cell.borrow().clone();
            if let Some(d) = current {
                return Ok(d);
            }
            if got.has_runtime() {
                return Err(format!(
                    "{label} cannot infer `{what}` from `{got}`{{from}}: it depends on a run-time dim"
                ));
            }
            *cell.borrow_mut() = Some(got.clone());
            Ok(got.clone())
        }
    }
}

/// Checks the last dim against `want` (a `[.., want]` rule).
pub fn last_dim(label: &str, x: &Shape, want: &Dim, facts: &mut dyn Facts) -> Result<(), String> {
    rank_at_least(label, x, 1, &format!("[.., {want}]"))?;
    let last = &x[x.len() - 1];
    facts.equal(last, want, &|| {
        format!(
            "{label} expects input `[.., {want}]`, got `{}`{{from}}",
            show(x)
        )
    })
}

impl Layer {
    /// How an error names this layer: "Linear `head`".
    pub fn label(&self, field: &str) -> String {
        format!("{} `{field}`", self.row)
    }

    /// The one-input shape rule (the row's own). Multi-input layers
    /// (attention) and models are handled by the checker. Error messages
    /// carry a `{from}` placeholder where the checker says where the input
    /// came from.
    pub fn apply(&self, field: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        let label = self.label(field);
        match &self.kind {
            Kind::Row(r) => r.apply(&label, x, facts),
            Kind::Sequential(_) | Kind::List { .. } | Kind::Model { .. } | Kind::Custom { .. } => {
                Err(format!("{label} is not a one-input layer"))
            }
        }
    }
}

/// Python-style dim index (`-1` is the last) to a position, if in range.
pub fn normalize_dim(d: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let v = if d < 0 { d + r } else { d };
    (0..r).contains(&v).then_some(v as usize)
}

pub fn flatten(x: &Shape, s: usize, e: usize) -> Shape {
    let mut y: Shape = x[..s].to_vec();
    y.push(crate::shape::product(&x[s..=e]));
    y.extend(x[e + 1..].iter().cloned());
    y
}

pub fn window(
    label: &str,
    x: &Shape,
    ax: usize,
    k: &Dim,
    s: &Dim,
    p: &Dim,
    d: &Dim,
) -> Result<Dim, String> {
    let out = window_out(&x[ax], k, s, p, d)
        .ok_or_else(|| format!("{label}: stride must not be zero"))?;
    if let Some(v) = out.as_const()
        && v < 1
    {
        return Err(format!(
            "{label} leaves nothing of dim {ax} of input `{}`{{from}}: the window is larger than the padded input",
            show(x)
        ));
    }
    Ok(out)
}
