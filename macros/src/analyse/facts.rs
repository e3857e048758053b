//! The checker's answers to "are these equal / does this divide": proved,
//! refuted (an error), or deferred to a compile-time assertion when only
//! const generics are involved.

use super::rules::Facts;
use crate::shape::{Decision, Dim};
use proc_macro2::Span;

#[derive(Clone)]
pub enum AssertKind {
    Equal(Dim, Dim),
    Divides(Dim, Dim),
}

/// A relation between const generics that the macro could not decide; code
/// generation turns it into `const { assert!(..) }` at `span`.
#[derive(Clone)]
pub struct Assertion {
    pub kind: AssertKind,
    pub msg: String,
    pub span: Span,
}

pub struct FactSink<'a> {
    pub assertions: &'a mut Vec<Assertion>,
    pub span: Span,
}

const RUNTIME_HINT: &str = " (this depends on a run-time dim, so it cannot be proved here; check it at run time with `unchecked!(expr => [..])`)";

impl Facts for FactSink<'_> {
    fn equal(&mut self, got: &Dim, want: &Dim, msg: &dyn Fn() -> String) -> Result<(), String> {
        // Factors shared by both sides (a batch dim) do not change the answer.
        let diff = got.sub(want).strip_common_atoms();
        match diff.decide_eq(&Dim::lit(0)) {
            Decision::Equal => Ok(()),
            Decision::Different => Err(msg()),
            Decision::Undecided if diff.has_runtime() => Err(format!("{}{RUNTIME_HINT}", msg())),
            Decision::Undecided => {
                self.assertions.push(Assertion {
                    kind: AssertKind::Equal(diff, Dim::lit(0)),
                    msg: msg(),
                    span: self.span,
                });
                Ok(())
            }
        }
    }

    fn divides(&mut self, n: &Dim, d: &Dim, msg: &dyn Fn() -> String) -> Result<(), String> {
        let (n2, d2) = n.cancel(d);
        let (n, d) = (&n2, &d2);
        match n.divisible_by(d) {
            Some(true) => Ok(()),
            Some(false) => Err(msg()),
            None if n.has_runtime() || d.has_runtime() => Err(format!("{}{RUNTIME_HINT}", msg())),
            None => {
                self.assertions.push(Assertion {
                    kind: AssertKind::Divides(n.clone(), d.clone()),
                    msg: msg(),
                    span: self.span,
                });
                Ok(())
            }
        }
    }
}
