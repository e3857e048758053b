"""The polynomial of tapir's vectorised f32 tanh (kernels/src/vecmath/mod.rs,
`tanh`): tanh(a) = a + a^3 p(a^2) for a in [0, 0.625], p of degree 4 in
s = a^2 fitted by weighted least squares (weights make the error relative
to tanh(a)) on 400 Chebyshev nodes in 40-digit arithmetic. Prints the
coefficients rounded to f32 (highest degree first, as the Rust Horner loop
reads them) and the worst relative error of a + a^3 p(a^2) with those
coefficients over 3000 points (about 5e-9; the f32 sweep in the tests
checks the rounded result).

Run: python3 scripts/fit_tanh.py (needs mpmath and numpy)."""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
T, DEG, N = mp.mpf("0.625"), 4, 400


def p_exact(s):
    a = mp.sqrt(s)
    return (mp.tanh(a) - a) / a**3


nodes = [T * T / 2 * (1 - mp.cos(mp.pi * (k + mp.mpf(0.5)) / N)) for k in range(N)]
weight = [mp.sqrt(s) ** 3 / mp.tanh(mp.sqrt(s)) for s in nodes]
a = mp.matrix([[w * s**j for j in range(DEG + 1)] for s, w in zip(nodes, weight)])
b = mp.matrix([w * p_exact(s) for s, w in zip(nodes, weight)])
coef = mp.lu_solve(a.T * a, a.T * b)
coef = [float(np.float32(float(c))) for c in coef]
worst = 0
for i in range(1, 3001):
    x = T * i / 3000
    p = sum(mp.mpf(c) * (x * x) ** j for j, c in enumerate(coef))
    worst = max(worst, abs((x + x**3 * p) / mp.tanh(x) - 1))
print("p (highest degree first):", [repr(c) for c in reversed(coef)])
print("worst relative error of a + a^3 p(a^2):", float(worst))
