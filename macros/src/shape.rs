//! Shape algebra: a dimension is a polynomial with integer coefficients over
//! symbols (const generics, run-time dims) and opaque floor divisions. Two
//! dimensions are compared by subtracting them: zero is "equal", a non-zero
//! constant is "different", anything else is undecided here and becomes a
//! compile-time assertion (const generics) or an error (run-time dims).
//!
//! This module is pure: no syn, no spans, unit-tested on its own.

use std::collections::BTreeMap;
use std::fmt;

/// What a symbol stands for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SymKind {
    /// A `const N: usize` parameter of the struct: known when monomorphised.
    Const,
    /// A dimension bound where the input enters `forward` (B, T, ...).
    Runtime,
}

/// An atom of a monomial.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    Sym(String, SymKind),
    /// `floor(num / den)` that could not be simplified.
    FloorDiv(Box<Dim>, Box<Dim>),
}

/// A dimension: monomial (sorted atoms) -> coefficient; no zero coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dim {
    terms: BTreeMap<Vec<Atom>, i64>,
}

/// The answer to "are these two dimensions equal?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Equal,
    Different,
    Undecided,
}

impl Dim {
    pub fn lit(n: i64) -> Dim {
        let mut terms = BTreeMap::new();
        if n != 0 {
            terms.insert(vec![], n);
        }
        Dim { terms }
    }

    pub fn sym(name: &str, kind: SymKind) -> Dim {
        Dim::atom(Atom::Sym(name.to_string(), kind))
    }

    fn atom(a: Atom) -> Dim {
        let mut terms = BTreeMap::new();
        terms.insert(vec![a], 1);
        Dim { terms }
    }

    /// The monomials and their coefficients.
    pub fn terms(&self) -> impl Iterator<Item = (&Vec<Atom>, &i64)> {
        self.terms.iter()
    }

    /// The name, when the dimension is exactly one run-time symbol (`B`).
    pub fn as_runtime_sym(&self) -> Option<&str> {
        match self.terms.iter().next() {
            Some((atoms, 1)) if self.terms.len() == 1 => match atoms.as_slice() {
                [Atom::Sym(name, SymKind::Runtime)] => Some(name),
                _ => None,
            },
            _ => None,
        }
    }

    /// The value, when the dimension is a plain number.
    pub fn as_const(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&vec![]).copied(),
            _ => None,
        }
    }

    /// Whether any run-time symbol occurs (such a dim is unknown until run time).
    pub fn has_runtime(&self) -> bool {
        self.atoms().iter().any(|a| match a {
            Atom::Sym(_, k) => *k == SymKind::Runtime,
            Atom::FloorDiv(n, d) => n.has_runtime() || d.has_runtime(),
        })
    }

    fn atoms(&self) -> Vec<&Atom> {
        self.terms.keys().flatten().collect()
    }

    /// The symbols of `kind`, sorted, without repeats.
    pub fn symbols(&self, kind: SymKind) -> Vec<String> {
        let mut out = vec![];
        for a in self.atoms() {
            match a {
                Atom::Sym(n, k) if *k == kind => out.push(n.clone()),
                Atom::Sym(..) => {}
                Atom::FloorDiv(n, d) => {
                    out.extend(n.symbols(kind.clone()));
                    out.extend(d.symbols(kind.clone()));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    pub fn add(&self, o: &Dim) -> Dim {
        let mut terms = self.terms.clone();
        for (m, c) in &o.terms {
            let e = terms.entry(m.clone()).or_insert(0);
            *e = e.saturating_add(*c);
            if *e == 0 {
                terms.remove(m);
            }
        }
        Dim { terms }
    }

    pub fn neg(&self) -> Dim {
        Dim {
            terms: self
                .terms
                .iter()
                .map(|(m, c)| (m.clone(), c.saturating_neg()))
                .collect(),
        }
    }

    pub fn sub(&self, o: &Dim) -> Dim {
        self.add(&o.neg())
    }

    pub fn mul(&self, o: &Dim) -> Dim {
        let mut out = Dim::default();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &o.terms {
                let mut m = ma.clone();
                m.extend(mb.iter().cloned());
                m.sort();
                let mut t = BTreeMap::new();
                t.insert(m, ca.saturating_mul(*cb));
                out = out.add(&Dim { terms: t });
            }
        }
        out
    }

    /// `floor(self / d)` for non-negative dims. `None` when `d` is zero.
    pub fn floor_div(&self, d: &Dim) -> Option<Dim> {
        if let Some(q) = self.exact_div(d) {
            return Some(q);
        }
        match (self.as_const(), d.as_const()) {
            (_, Some(0)) => None,
            (Some(a), Some(b)) => Some(Dim::lit(a.div_euclid(b))),
            _ => Some(Dim::atom(Atom::FloorDiv(
                Box::new(self.clone()),
                Box::new(d.clone()),
            ))),
        }
    }

    /// `self / d` when the division is provably exact (every coefficient a
    /// multiple of a constant divisor, or the same polynomial).
    pub fn exact_div(&self, d: &Dim) -> Option<Dim> {
        if self == d && !d.terms.is_empty() {
            return Some(Dim::lit(1));
        }
        // A single-monomial divisor `c * a * b`: every term must hold `a * b`
        // and a multiple of `c`.
        if d.terms.len() != 1 {
            return None;
        }
        let (dm, c) = d.terms.iter().next()?;
        if *c == 0 {
            return None;
        }
        let mut terms = BTreeMap::new();
        for (m, v) in &self.terms {
            if v % c != 0 {
                return None;
            }
            let mut rest = m.clone();
            for a in dm {
                let i = rest.iter().position(|x| x == a)?;
                rest.remove(i);
            }
            terms.insert(rest, v / c);
        }
        Some(Dim { terms })
    }

    /// Whether `self` is provably divisible by `d` (Some(true/false)) or undecided.
    pub fn divisible_by(&self, d: &Dim) -> Option<bool> {
        if self.exact_div(d).is_some() {
            return Some(true);
        }
        match (self.as_const(), d.as_const()) {
            (Some(a), Some(b)) if b != 0 => Some(a % b == 0),
            _ => None,
        }
    }

    /// Divides out every atom that occurs in all terms (run-time dims and
    /// const generics are at least 1, so `B * x == B * y` iff `x == y`).
    pub fn strip_common_atoms(&self) -> Dim {
        let mut common: Option<Vec<Atom>> = None;
        for m in self.terms.keys() {
            common = Some(match common {
                None => m.clone(),
                Some(c) => {
                    let mut rest = m.clone();
                    c.into_iter()
                        .filter(|a| match rest.iter().position(|x| x == a) {
                            Some(i) => {
                                rest.remove(i);
                                true
                            }
                            None => false,
                        })
                        .collect()
                }
            });
        }
        let common = common.unwrap_or_default();
        let mut terms = BTreeMap::new();
        for (m, v) in &self.terms {
            let mut rest = m.clone();
            for a in &common {
                if let Some(i) = rest.iter().position(|x| x == a) {
                    rest.remove(i);
                }
            }
            terms.insert(rest, *v);
        }
        Dim { terms }
    }

    /// Cancels the atoms a single-monomial divisor shares with every term of
    /// `self`: `(B * D * T, B * H * T)` becomes `(D, H)`.
    pub fn cancel(&self, d: &Dim) -> (Dim, Dim) {
        if d.terms.len() != 1 {
            return (self.clone(), d.clone());
        }
        let (dm, c) = d
            .terms
            .iter()
            .next()
            .map(|(m, c)| (m.clone(), *c))
            .unwrap_or_default();
        let mut num = self.clone();
        let mut den = dm.clone();
        for a in &dm {
            if num.terms.keys().all(|m| m.contains(a)) {
                let mut terms = BTreeMap::new();
                for (m, v) in &num.terms {
                    let mut rest = m.clone();
                    if let Some(i) = rest.iter().position(|x| x == a) {
                        rest.remove(i);
                    }
                    terms.insert(rest, *v);
                }
                num = Dim { terms };
                if let Some(i) = den.iter().position(|x| x == a) {
                    den.remove(i);
                }
            }
        }
        let mut t = BTreeMap::new();
        t.insert(den, c);
        (num, Dim { terms: t })
    }

    pub fn decide_eq(&self, o: &Dim) -> Decision {
        let diff = self.sub(o);
        match diff.as_const() {
            Some(0) => Decision::Equal,
            Some(_) => Decision::Different,
            None => Decision::Undecided,
        }
    }

    /// Replaces symbols by dims (`D -> 256`), re-simplifying floor divisions.
    pub fn substitute(&self, map: &dyn Fn(&str, &SymKind) -> Option<Dim>) -> Dim {
        let mut out = Dim::default();
        for (m, c) in &self.terms {
            let mut prod = Dim::lit(*c);
            for a in m {
                let v = match a {
                    Atom::Sym(n, k) => map(n, k).unwrap_or_else(|| Dim::atom(a.clone())),
                    Atom::FloorDiv(n, d) => {
                        let (n, d) = (n.substitute(map), d.substitute(map));
                        n.floor_div(&d).unwrap_or_else(|| Dim::atom(a.clone()))
                    }
                };
                prod = prod.mul(&v);
            }
            out = out.add(&prod);
        }
        out
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Sym(n, _) => write!(f, "{n}"),
            Atom::FloorDiv(n, d) => {
                let paren = |x: &Dim| {
                    if x.terms.len() > 1
                        || x.terms
                            .iter()
                            .any(|(m, c)| m.len() > 1 || (!m.is_empty() && *c != 1))
                    {
                        format!("({x})")
                    } else {
                        x.to_string()
                    }
                };
                write!(f, "{} / {}", paren(n), paren(d))
            }
        }
    }
}

impl Dim {
    /// `self` as `(X + c) * q` for an atom `X` it is linear in, when it
    /// factors so: how a flattened `[C, H', W']` reads as the user wrote it,
    /// `C * (H' + 1) * (W' + 1)`, rather than expanded into four terms.
    fn split_factor(&self) -> Option<(Dim, Dim)> {
        if self.terms.len() < 2 {
            return None;
        }
        let mut atoms: Vec<&Atom> = self.atoms();
        atoms.sort();
        atoms.dedup();
        for x in atoms {
            let (mut q, mut rest) = (Dim::default(), Dim::default());
            let mut linear = true;
            for (m, c) in &self.terms {
                match m.iter().filter(|a| *a == x).count() {
                    0 => {
                        rest.terms.insert(m.clone(), *c);
                    }
                    1 => {
                        let without: Vec<Atom> = m.iter().filter(|a| *a != x).cloned().collect();
                        q.terms.insert(without, *c);
                    }
                    _ => linear = false,
                }
            }
            if !linear || q.terms.is_empty() || (rest.terms.is_empty() && q.terms.len() < 2) {
                continue;
            }
            // rest = k * q for a whole k: then self = (x + k) * q.
            let (m0, c0) = q.terms.iter().next().expect("q has a term");
            let r0 = rest.terms.get(m0).copied().unwrap_or(0);
            if r0 % c0 != 0 {
                continue;
            }
            let k = r0 / c0;
            if q.mul(&Dim::lit(k)) == rest {
                return Some((Dim::atom(x.clone()).add(&Dim::lit(k)), q));
            }
        }
        None
    }

    /// The factors `split_factor` finds, repeatedly; the last is what is left.
    fn factors(&self) -> Vec<Dim> {
        let mut out = vec![];
        let mut d = self.clone();
        while let Some((factor, rest)) = d.split_factor() {
            // `3 - D` stays a sum: only a product of sums is worth showing so.
            if out.is_empty() && rest.as_const().is_some() {
                break;
            }
            out.push(factor);
            d = rest;
        }
        if out.is_empty() || d != Dim::lit(1) {
            out.push(d);
        }
        out
    }
}

impl fmt::Display for Dim {
    /// Highest-degree terms first, the constant last: `IN * 2 + 1`, `B`,
    /// `(H - 1) / 2 + 1`; a product of sums stays a product:
    /// `((H - 4) / 2 + 1) * ((W - 4) / 2 + 1) * 16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let factors = self.factors();
        if factors.len() > 1 {
            let shown: Vec<String> = factors
                .iter()
                .map(|d| match d.terms.len() {
                    1 => d.to_string(),
                    _ => format!("({d})"),
                })
                .collect();
            return write!(f, "{}", shown.join(" * "));
        }
        if self.terms.is_empty() {
            return write!(f, "0");
        }
        let mut terms: Vec<_> = self.terms.iter().collect();
        terms.sort_by_key(|(m, _)| std::cmp::Reverse(m.len()));
        for (i, (m, c)) in terms.into_iter().enumerate() {
            let mag = c.unsigned_abs();
            if i == 0 {
                if *c < 0 {
                    write!(f, "-")?;
                }
            } else {
                write!(f, " {} ", if *c < 0 { '-' } else { '+' })?;
            }
            let atoms: Vec<String> = m
                .iter()
                .map(|a| match a {
                    Atom::FloorDiv(..) if m.len() > 1 || mag != 1 => format!("({a})"),
                    _ => a.to_string(),
                })
                .collect();
            match (atoms.is_empty(), mag) {
                (true, _) => write!(f, "{mag}")?,
                (false, 1) => write!(f, "{}", atoms.join(" * "))?,
                (false, _) => write!(f, "{} * {mag}", atoms.join(" * "))?,
            }
        }
        Ok(())
    }
}

/// A tensor shape.
pub type Shape = Vec<Dim>;

/// `[B, 256]`.
pub fn show(shape: &[Dim]) -> String {
    let dims: Vec<String> = shape.iter().map(Dim::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// The product of some dims (flatten, reshape).
pub fn product(dims: &[Dim]) -> Dim {
    dims.iter().fold(Dim::lit(1), |acc, d| acc.mul(d))
}

/// PyTorch's output size of a convolution or pooling window along one axis:
/// `(n + 2p - d(k - 1) - 1) / s + 1`.
pub fn window_out(n: &Dim, k: &Dim, s: &Dim, p: &Dim, d: &Dim) -> Option<Dim> {
    let span = d.mul(&k.sub(&Dim::lit(1))).add(&Dim::lit(1));
    let inner = n.add(&p.mul(&Dim::lit(2))).sub(&span);
    Some(inner.floor_div(s)?.add(&Dim::lit(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(n: &str) -> Dim {
        Dim::sym(n, SymKind::Const)
    }
    fn r(n: &str) -> Dim {
        Dim::sym(n, SymKind::Runtime)
    }

    #[test]
    fn products_of_sums_are_shown_factored() {
        let h = r("H").sub(&Dim::lit(4)).floor_div(&Dim::lit(2)).unwrap();
        let w = r("W").sub(&Dim::lit(4)).floor_div(&Dim::lit(2)).unwrap();
        let flat = h
            .add(&Dim::lit(1))
            .mul(&w.add(&Dim::lit(1)))
            .mul(&Dim::lit(16));
        assert_eq!(
            flat.to_string(),
            "((H - 4) / 2 + 1) * ((W - 4) / 2 + 1) * 16"
        );
        assert_eq!(
            c("D").mul(&Dim::lit(2)).add(&Dim::lit(1)).to_string(),
            "D * 2 + 1"
        );
        let not_a_product = c("A").mul(&c("B")).add(&c("A")).add(&Dim::lit(1));
        assert_eq!(not_a_product.to_string(), "A * B + A + 1");
        assert_eq!(
            c("A").mul(&c("B")).add(&c("A").mul(&c("C"))).to_string(),
            "A * (B + C)"
        );
    }

    #[test]
    fn literal_arithmetic_folds() {
        let d = Dim::lit(32).mul(&Dim::lit(7)).mul(&Dim::lit(7));
        assert_eq!(d.as_const(), Some(1568));
        assert_eq!(Dim::lit(7).floor_div(&Dim::lit(2)), Some(Dim::lit(3)));
        assert_eq!(Dim::lit(7).floor_div(&Dim::lit(0)), None);
    }

    #[test]
    fn polynomials_compare_by_difference() {
        let a = c("D").mul(&Dim::lit(2)).add(&Dim::lit(1));
        let b = Dim::lit(1).add(&c("D")).add(&c("D"));
        assert_eq!(a.decide_eq(&b), Decision::Equal);
        assert_eq!(a.decide_eq(&b.add(&Dim::lit(1))), Decision::Different);
        assert_eq!(c("D").decide_eq(&c("E")), Decision::Undecided);
        assert_eq!(r("B").decide_eq(&r("B")), Decision::Equal);
        assert!(r("B").mul(&c("D")).has_runtime());
        assert!(!c("D").has_runtime());
    }

    #[test]
    fn division_is_exact_or_opaque() {
        let d4 = c("D").mul(&Dim::lit(4));
        assert_eq!(d4.exact_div(&Dim::lit(2)), Some(c("D").mul(&Dim::lit(2))));
        assert_eq!(c("D").exact_div(&Dim::lit(2)), None);
        assert_eq!(c("D").divisible_by(&Dim::lit(2)), None);
        assert_eq!(Dim::lit(12).divisible_by(&Dim::lit(5)), Some(false));
        assert_eq!(c("D").exact_div(&c("D")), Some(Dim::lit(1)));
        let bt = r("B").mul(&r("T")).mul(&Dim::lit(6));
        assert_eq!(
            bt.exact_div(&r("B").mul(&Dim::lit(3))),
            Some(r("T").mul(&Dim::lit(2)))
        );
        assert_eq!(bt.exact_div(&c("D")), None);
        let n = r("B").mul(&c("D")).mul(&r("T"));
        let d = r("B").mul(&c("H")).mul(&r("T"));
        assert_eq!(n.cancel(&d), (c("D"), c("H")));
        let split = c("D").floor_div(&c("H")).unwrap().mul(&c("H"));
        let diff = r("B").mul(&split).sub(&r("B").mul(&c("D")));
        assert_eq!(diff.strip_common_atoms(), split.sub(&c("D")));
        let h = c("H").sub(&Dim::lit(1)).floor_div(&Dim::lit(2)).unwrap();
        assert_eq!(h.to_string(), "(H - 1) / 2");
        // Substituting a value folds the opaque division.
        let v = h.substitute(&|n, _| (n == "H").then(|| Dim::lit(28)));
        assert_eq!(v.as_const(), Some(13));
    }

    #[test]
    fn conv_and_pool_sizes() {
        let n = Dim::lit(28);
        let same = window_out(&n, &Dim::lit(3), &Dim::lit(1), &Dim::lit(1), &Dim::lit(1));
        assert_eq!(same.unwrap().as_const(), Some(28));
        let pooled = window_out(&n, &Dim::lit(2), &Dim::lit(2), &Dim::lit(0), &Dim::lit(1));
        assert_eq!(pooled.unwrap().as_const(), Some(14));
        let sym = window_out(
            &r("H"),
            &Dim::lit(3),
            &Dim::lit(1),
            &Dim::lit(1),
            &Dim::lit(1),
        );
        assert_eq!(sym.unwrap(), r("H"));
        let strided = window_out(
            &r("H"),
            &Dim::lit(3),
            &Dim::lit(2),
            &Dim::lit(0),
            &Dim::lit(1),
        );
        assert_eq!(strided.unwrap().to_string(), "(H - 3) / 2 + 1");
    }

    #[test]
    fn display_reads_like_source() {
        assert_eq!(show(&[r("B"), Dim::lit(256)]), "[B, 256]");
        assert_eq!(
            c("IN").mul(&Dim::lit(2)).add(&Dim::lit(1)).to_string(),
            "IN * 2 + 1"
        );
        assert_eq!(c("D").neg().add(&Dim::lit(3)).to_string(), "-D + 3");
        assert_eq!(product(&[r("T"), c("D")]).to_string(), "D * T");
        assert_eq!(Dim::default().to_string(), "0");
    }

    #[test]
    fn substitution_binds_generics() {
        let d = c("D").mul(&Dim::lit(4));
        let v = d.substitute(&|n, k| (n == "D" && *k == SymKind::Const).then(|| Dim::lit(64)));
        assert_eq!(v.as_const(), Some(256));
    }
}
