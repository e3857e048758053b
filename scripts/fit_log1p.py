"""The polynomial of tapir's vectorised logarithm (kernels/src/vecmath.rs,
`ln_1p_reduced`): ln(1 + f) = f - f^2/2 + f^3 q(f) on [sqrt(1/2) - 1,
sqrt(2) - 1], q of degree 10 fitted by least squares on 400 Chebyshev
nodes in 40-digit arithmetic. Prints the coefficients (highest degree
first, as the Rust Horner loop reads them) and the worst relative error of
the whole ln(1 + f) over 20001 points (about 1e-10).

Run: python3 scripts/fit_log1p.py (needs mpmath)."""
import mpmath as mp

mp.mp.dps = 40
lo, hi = mp.sqrt(0.5) - 1, mp.sqrt(2) - 1
DEG, N = 10, 400


def q_exact(f):
    if abs(f) < mp.mpf(10) ** -12:
        return mp.mpf(1) / 3
    return (mp.log1p(f) - f + f * f / 2) / f**3


nodes = [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (k + mp.mpf(0.5)) / N) for k in range(N)]
a = mp.matrix([[x**j for j in range(DEG + 1)] for x in nodes])
b = mp.matrix([q_exact(x) for x in nodes])
coef = mp.lu_solve(a.T * a, a.T * b)
coef = [float(c) for c in coef]
worst = 0
for i in range(20001):
    f = lo + (hi - lo) * i / 20000
    if f == 0:
        continue
    q = sum(mp.mpf(c) * f**j for j, c in enumerate(coef))
    worst = max(worst, abs((f - f * f / 2 + f**3 * q) / mp.log1p(f) - 1))
print("q (highest degree first):", [repr(c) for c in reversed(coef)])
print("worst relative error of ln(1 + f):", float(worst))
