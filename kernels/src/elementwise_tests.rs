//! The elementwise rows' own tests (PyTorch's values at the edges).

use super::*;

#[test]
fn rows_have_unique_names_and_their_structs_agree() {
    let mut names: Vec<&str> = UNARY_ROWS.iter().map(|r| r.name).collect();
    names.extend(BINARY_ROWS.iter().map(|r| r.name));
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "kernel names are unique");
    let clamp = Clamp { lo: -1.0, hi: 2.0 };
    assert_eq!(clamp.params(), [-1.0, 2.0]);
    assert_eq!(clamp.f(5.0f64), 2.0);
    assert_eq!(clamp.i(-7), -1);
    let row = UNARY_ROWS.iter().find(|r| r.name == "clamp").unwrap();
    assert_eq!((row.reference)(5.0, [-1.0, 2.0]), 2.0);
    assert_eq!(AddScaled { alpha: 2.0 }.f(1.0f32, 3.0), 7.0);
    assert_eq!(AddScaled { alpha: 2.0 }.param(), 2.0);
    const { assert!(Neg::INT && !Exp::INT && Second::INT && !Div::INT) };
}

#[test]
fn hardswish_and_its_gradient_follow_pytorch() {
    // torch.nn.functional.hardswish at -4, -3, -1, 0, 1.5, 3, 4.
    let xs = [-4.0f64, -3.0, -1.0, 0.0, 1.5, 3.0, 4.0];
    let want = [0.0, 0.0, -1.0 / 3.0, 0.0, 1.125, 3.0, 4.0];
    for (x, w) in xs.iter().zip(want) {
        assert!((Hardswish.f(*x) - w).abs() < 1e-15, "hardswish({x})");
    }
    // torch 2.15's hardswish backward: 0 up to -3, x/3 + 0.5 on (-3, 3),
    // 1 from 3 (before 2.15 the kinks took the inner side: -0.5, 1.5).
    let dwant = [0.0, 0.0, 1.0 / 6.0, 0.5, 1.0, 1.0, 1.0];
    for (x, w) in xs.iter().zip(dwant) {
        assert!((HardswishGrad.f(*x) - w).abs() < 1e-15, "hardswish'({x})");
    }
}

#[test]
fn rounding_follows_pytorch() {
    // torch.round / floor / ceil / trunc at these points (torch 2.15).
    let xs = [
        -2.5f64,
        -1.5,
        -0.5,
        0.5,
        1.5,
        2.5,
        2.6,
        -2.6,
        0.49999999999999994,
    ];
    let round = [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 3.0, -3.0, 0.0];
    let floor = [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 2.0, -3.0, 0.0];
    let ceil = [-2.0, -1.0, -0.0, 1.0, 2.0, 3.0, 3.0, -2.0, 1.0];
    let trunc = [-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 2.0, -2.0, 0.0];
    for (k, x) in xs.iter().enumerate() {
        assert_eq!(Round.f(*x), round[k], "round({x})");
        assert_eq!(Round.f(*x as f32), round[k] as f32, "round({x}) in f32");
        assert_eq!(Floor.f(*x), floor[k], "floor({x})");
        assert_eq!(Ceil.f(*x), ceil[k], "ceil({x})");
        assert_eq!(Trunc.f(*x), trunc[k], "trunc({x})");
    }
    for v in [f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(Round.f(v), v);
    }
    // `==` does not see a zero's sign: PyTorch's round keeps it.
    for x in [-0.5f64, -0.4, -1e-7, -0.0] {
        assert!(
            Round.f(x) == 0.0 && Round.f(x).is_sign_negative(),
            "round({x})"
        );
        assert!(Round.f(x as f32).is_sign_negative(), "round({x}) in f32");
    }
    assert!(Round.f(0.4f64).is_sign_positive());
    assert!(Round.f(f64::NAN).is_nan());
    assert_eq!(Round.i(7), 7);
}

#[test]
fn copysign_takes_the_sign_bit() {
    // C's copysign: -0.0 and a negative NaN are negative, +NaN positive.
    assert_eq!(Copysign.f(2.0f32, -0.0), -2.0);
    assert_eq!(Copysign.f(-2.0f64, 0.0), 2.0);
    assert_eq!(Copysign.f(3.0f32, -f32::NAN), -3.0);
    assert_eq!(Copysign.f(-3.0f32, f32::NAN), 3.0);
    assert!(Copysign.f(f64::NAN, -1.0).is_sign_negative());
}

#[test]
fn integer_rows_follow_pytorch_at_the_edges() {
    // torch 2.15 on int64: shifts outside 0..64 give 0 (left) or the sign
    // (right); gcd and lcm are non-negative, gcd(0, 0) = 0.
    assert_eq!(ShiftLeft.i(-1, 1), -2);
    assert_eq!(ShiftLeft.i(-8, 63), 0);
    assert_eq!(ShiftLeft.i(3, 64), 0);
    assert_eq!(ShiftLeft.i(3, -1), 0);
    assert_eq!(ShiftRight.i(-8, 64), -1);
    assert_eq!(ShiftRight.i(8, 70), 0);
    assert_eq!(ShiftRight.i(-4, 1), -2);
    assert_eq!(
        (Gcd.i(0, 0), Gcd.i(-12, 18), Gcd.i(7, -21), Gcd.i(0, -5)),
        (0, 6, 7, 5)
    );
    assert_eq!((Lcm.i(0, 3), Lcm.i(-4, 6), Lcm.i(6, -4)), (0, 12, 12));
    assert_eq!(
        (
            BitAnd.i(12, 10),
            BitOr.i(12, 10),
            BitXor.i(12, 10),
            BitNot.i(5)
        ),
        (8, 14, 6, -6)
    );
    const { assert!(BitAnd::INT && BitNot::INT) };
}
