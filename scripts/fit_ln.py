"""The polynomial of tapir's vectorised f32 natural logarithm
(kernels/src/vecmath/mod.rs, `log_scaled`): ln(1 + f) = f - f^2/2 + f^3 r(f)
for f in [sqrt(1/2) - 1, sqrt(2) - 1], r of degree 7 fitted by weighted
least squares (weights make the error relative to ln(1 + f)) on 400
Chebyshev nodes in 40-digit arithmetic. Prints the coefficients rounded to
f32 (highest degree first, as the Rust Horner loop reads them) and the
worst relative error of f - f^2/2 + f^3 r(f) with those coefficients over
3000 points (about 7e-9; the f32 sweep in the tests checks the rounded
result).

Run: python3 scripts/fit_ln.py (needs mpmath and numpy)."""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
LO, HI = mp.sqrt(0.5) - 1, mp.sqrt(2) - 1
DEG, N = 7, 400


def r_exact(f):
    return (mp.log(1 + f) - f + f * f / 2) / f**3


nodes = [(LO + HI) / 2 + (HI - LO) / 2 * mp.cos(mp.pi * (k + mp.mpf(0.5)) / N) for k in range(N)]
weight = [abs(f) ** 3 / abs(mp.log(1 + f)) for f in nodes]
a = mp.matrix([[w * f**j for j in range(DEG + 1)] for f, w in zip(nodes, weight)])
b = mp.matrix([w * r_exact(f) for f, w in zip(nodes, weight)])
coef = mp.lu_solve(a.T * a, a.T * b)
coef = [float(np.float32(float(c))) for c in coef]
worst = 0
for i in range(3001):
    f = LO + (HI - LO) * i / 3000
    if f != 0:
        r = sum(mp.mpf(c) * f**j for j, c in enumerate(coef))
        worst = max(worst, abs((f - f * f / 2 + f**3 * r) / mp.log(1 + f) - 1))
print("r (highest degree first):", [repr(c) for c in reversed(coef)])
print("worst relative error of f - f^2/2 + f^3 r(f):", float(worst))
