//! The layer table's shape rules: what each one-input layer does to the
//! shape it is given (PyTorch's output-size formulas).

use super::layers::{Kind, Layer, Slot};
use crate::shape::{Dim, Shape, show, window_out};

/// What the checker answers when a rule needs two dims equal or one to divide another.
pub trait Facts {
    /// `Ok` when equal (or deferred to a compile-time assertion); `Err` when provably not.
    fn equal(&mut self, got: &Dim, want: &Dim, msg: &dyn Fn() -> String) -> Result<(), String>;
    fn divides(&mut self, n: &Dim, d: &Dim, msg: &dyn Fn() -> String) -> Result<(), String>;
}

fn rank_at_least(label: &str, x: &Shape, n: usize, pattern: &str) -> Result<(), String> {
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
fn last_dim(label: &str, x: &Shape, want: &Dim, facts: &mut dyn Facts) -> Result<(), String> {
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

    /// The one-input shape rule. Multi-input layers (attention) and models are
    /// handled by the checker. Error messages carry a `{from}` placeholder
    /// where the checker says where the input came from.
    pub fn apply(&self, field: &str, x: &Shape, facts: &mut dyn Facts) -> Result<Shape, String> {
        let label = self.label(field);
        let label = label.as_str();
        let mut y = x.clone();
        match &self.kind {
            Kind::Linear { inp, out, .. } => {
                rank_at_least(label, x, 1, "[.., in_features]")?;
                let want = fill_slot(inp, &x[x.len() - 1], "in_features", label)?;
                last_dim(label, x, &want, facts)?;
                *y.last_mut().unwrap_or(&mut Dim::lit(0)) = out.clone();
            }
            Kind::LayerNorm { d, .. } => {
                rank_at_least(label, x, 1, "[.., normalized_shape]")?;
                let want = fill_slot(d, &x[x.len() - 1], "normalized_shape", label)?;
                last_dim(label, x, &want, facts)?;
            }
            Kind::BatchNorm { c, two_d } => {
                let pattern = if *two_d {
                    "[N, C, H, W]"
                } else {
                    "[N, C] or [N, C, L]"
                };
                let ok_rank = if *two_d {
                    x.len() == 4
                } else {
                    x.len() == 2 || x.len() == 3
                };
                if !ok_rank {
                    return Err(format!(
                        "{label} expects input `{pattern}`, got `{}`{{from}}",
                        show(x)
                    ));
                }
                let want = fill_slot(c, &x[1], "num_features", label)?;
                facts.equal(&x[1], &want, &|| {
                    format!(
                        "{label} expects {want} channels in dim 1, got `{}`{{from}}",
                        show(x)
                    )
                })?;
            }
            Kind::Dropout { .. } | Kind::Act { .. } => {}
            Kind::Softmax { dim } => {
                normalize_dim(*dim, x.len()).ok_or_else(|| {
                    format!(
                        "{label}: dim {dim} is out of range for input `{}`{{from}}",
                        show(x)
                    )
                })?;
            }
            Kind::Embedding { d, .. } => y.push(d.clone()),
            Kind::Conv2d {
                inp,
                out,
                k,
                stride,
                padding,
                dilation,
                groups,
                ..
            } => {
                if x.len() != 4 {
                    return Err(format!(
                        "{label} expects input `[N, C, H, W]`, got `{}`{{from}}",
                        show(x)
                    ));
                }
                let want = fill_slot(inp, &x[1], "in_channels", label)?;
                facts.equal(&x[1], &want, &|| {
                    format!(
                        "{label} expects input `[N, {want}, H, W]`, got `{}`{{from}}",
                        show(x)
                    )
                })?;
                for (what, n) in [("in_channels", &want), ("out_channels", out)] {
                    facts.divides(n, groups, &|| {
                        format!("{label}: {what} {n} is not divisible by groups {groups}")
                    })?;
                }
                y[1] = out.clone();
                for (ax, out) in y.iter_mut().enumerate().skip(2) {
                    *out = window(label, x, ax, k, stride, padding, dilation)?;
                }
            }
            Kind::Pool {
                k, stride, padding, ..
            } => {
                if x.len() != 4 && x.len() != 3 {
                    return Err(format!(
                        "{label} expects input `[N, C, H, W]`, got `{}`{{from}}",
                        show(x)
                    ));
                }
                let first = x.len() - 2;
                for (ax, out) in y.iter_mut().enumerate().skip(first) {
                    *out = window(label, x, ax, k, stride, padding, &Dim::lit(1))?;
                }
            }
            Kind::AdaptiveAvgPool { h, w } => {
                if x.len() != 4 {
                    return Err(format!(
                        "{label} expects input `[N, C, H, W]`, got `{}`{{from}}",
                        show(x)
                    ));
                }
                y[2] = h.clone();
                y[3] = w.clone();
            }
            Kind::Flatten { start, end } => {
                let (s, e) = match (normalize_dim(*start, x.len()), normalize_dim(*end, x.len())) {
                    (Some(s), Some(e)) if s <= e => (s, e),
                    _ => {
                        return Err(format!(
                            "{label}: dims {start}..={end} are out of range for input `{}`{{from}}",
                            show(x)
                        ));
                    }
                };
                y = flatten(x, s, e);
            }
            Kind::Sequential(_) | Kind::Mha { .. } | Kind::List { .. } | Kind::Model { .. } => {
                return Err(format!("{label} is not a one-input layer"));
            }
        }
        Ok(y)
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

fn window(
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
