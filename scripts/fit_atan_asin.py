"""The polynomials of tapir's vectorised f32 arctangent and arcsine
(kernels/src/vecmath/trig.rs, `atan`, `asin` and `acos`):
atan(u) = u + u^3 p(u^2) for u in [0, 1] and asin(x) = x + x^3 q(x^2) for x
in [0, 1/2], p of degree 8 and q of degree 5, fitted by weighted least
squares (weights make the error relative to the function) on 400
Chebyshev nodes in 40-digit arithmetic. Prints the coefficients rounded
to f32 (highest degree first, as the Rust Horner loops read them) and the
worst relative error of each form with those coefficients over 3000
points (the f32 sweep in the tests checks the rounded result).

Run: python3 scripts/fit_atan_asin.py (needs mpmath and numpy)."""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
N = 400


def fit(name, f, hi, deg):
    """Fits (f(x) - x) / x^3 as a polynomial of t = x^2 for x in (0, hi]."""
    nodes = [hi / 2 + hi / 2 * mp.cos(mp.pi * (k + mp.mpf(0.5)) / N) for k in range(N)]
    weight = [x**3 / f(x) for x in nodes]
    a = mp.matrix([[w * (x * x) ** j for j in range(deg + 1)] for x, w in zip(nodes, weight)])
    b = mp.matrix([w * (f(x) - x) / x**3 for x, w in zip(nodes, weight)])
    coef = mp.lu_solve(a.T * a, a.T * b)
    coef = [float(np.float32(float(c))) for c in coef]
    worst = 0
    for i in range(1, 3001):
        x = hi * mp.mpf(i) / 3000
        p = sum(mp.mpf(c) * (x * x) ** j for j, c in enumerate(coef))
        worst = max(worst, abs((x + x**3 * p) / f(x) - 1))
    print(f"{name} (highest degree first):", [repr(c) for c in reversed(coef)])
    print(f"worst relative error of the {name} form:", float(worst))


fit("atan p", mp.atan, mp.mpf(1), 8)
fit("asin q", mp.asin, mp.mpf(0.5), 5)
