//! The decompositions against their defining identities, in f64 and f32.

use super::*;

/// `a @ b` for row-major `m x k` and `k x n`.
fn mm(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    c
}

fn t(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    (0..n * m).map(|i| a[(i % m) * n + i / m]).collect()
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
}

/// A fixed, well-conditioned but unstructured `m x n` matrix.
fn sample(m: usize, n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..m * n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn spd(n: usize, seed: u64) -> Vec<f64> {
    let x = sample(n, n, seed);
    let mut a = mm(&x, &t(&x, n, n), n, n, n);
    for d in 0..n {
        a[d * n + d] += n as f64;
    }
    a
}

#[test]
fn cholesky_rebuilds_its_input_and_names_the_failing_minor() {
    let n = 5;
    let mut a = spd(n, 1);
    a.extend(spd(n, 2));
    let (l, info) = cholesky(&a, 2, n, false);
    assert_eq!(info, vec![0, 0]);
    for b in 0..2 {
        let lb = &l[b * n * n..(b + 1) * n * n];
        assert!((0..n).all(|i| (i + 1..n).all(|j| lb[i * n + j] == 0.0)));
        assert!(close(
            &mm(lb, &t(lb, n, n), n, n, n),
            &a[b * n * n..(b + 1) * n * n],
            1e-12
        ));
    }
    let (u, _) = cholesky(&a[..n * n], 1, n, true);
    assert!(close(&u, &t(&l[..n * n], n, n), 0.0));
    // [[1, 2], [2, 1]]: the second leading minor is -3.
    let (_, info) = cholesky(&[1.0, 2.0, 2.0, 1.0], 1, 2, false);
    assert_eq!(info, vec![2]);
}

#[test]
fn cholesky_reads_only_the_lower_triangle_small_and_large() {
    // Below 512 the factor runs on a column-major copy, from 512 on the
    // row-major one: NaN above the diagonal must reach neither.
    for n in [6, 520] {
        // Symmetric and diagonally dominant, so positive definite.
        let noise = sample(n, n, 3);
        let mut a = vec![f64::NAN; n * n];
        for r in 0..n {
            for c in 0..r {
                a[r * n + c] = noise[r * n + c] + noise[c * n + r];
            }
            a[r * n + r] = 2.0 * n as f64;
        }
        let (l, info) = cholesky(&a, 1, n, false);
        assert_eq!(info, vec![0], "n {n}");
        assert!(
            (0..n).all(|r| (r + 1..n).all(|c| l[r * n + c] == 0.0)),
            "n {n}"
        );
        // (L Lᵀ)[r][c] = A[r][c] below the diagonal, at every 7th entry.
        for (r, c) in (0..n).flat_map(|r| (0..=r).map(move |c| (r, c))).step_by(7) {
            let dot: f64 = (0..=c).map(|k| l[r * n + k] * l[c * n + k]).sum();
            assert!(
                (dot - a[r * n + c]).abs() < 1e-9 * n as f64,
                "n {n} at ({r}, {c})"
            );
        }
        let (u, _) = cholesky(&a, 1, n, true);
        assert!(close(&u, &t(&l, n, n), 0.0), "n {n}");
        // A negative pivot at row n / 2 fails the leading minor of that order.
        a[n / 2 * n + n / 2] = -1.0;
        let (_, info) = cholesky(&a, 1, n, false);
        assert_eq!(info, vec![n as i64 / 2 + 1], "n {n}");
    }
}

#[test]
fn solve_and_slogdet_agree_with_hand_values() {
    // det [[0, 2], [3, 1]] = -6: a row swap makes the sign.
    let a = [0.0, 2.0, 3.0, 1.0];
    let (sign, log) = slogdet(&a, 1, 2);
    assert_eq!(sign, vec![-1.0]);
    assert!((log[0] - 6f64.ln()).abs() < 1e-15);
    let (x, info) = solve(&a, &[4.0, 5.0], 1, 2, 1);
    assert_eq!(info, vec![0]);
    assert!(close(&x, &[1.0, 2.0], 1e-15));
    let singular = [1.0, 2.0, 2.0, 4.0];
    assert_eq!(
        slogdet(&singular, 1, 2),
        (vec![0.0], vec![f64::NEG_INFINITY])
    );
    assert_eq!(solve(&singular, &[1.0, 1.0], 1, 2, 1).1, vec![2]);
    // A batch of random 6 x 6: A X = B.
    let (n, k) = (6, 3);
    let (a, b) = (sample(2 * n, n, 3), sample(2 * n, k, 4));
    let (x, _) = solve(&a, &b, 2, n, k);
    for i in 0..2 {
        let ax = mm(
            &a[i * n * n..(i + 1) * n * n],
            &x[i * n * k..(i + 1) * n * k],
            n,
            n,
            k,
        );
        assert!(close(&ax, &b[i * n * k..(i + 1) * n * k], 1e-12));
    }
}

#[test]
fn triangular_solves_read_only_their_triangle_on_either_side() {
    let n = 4;
    let full = sample(n, n, 5);
    let rhs = sample(n, 2, 6);
    for bits in 0..16 {
        let [upper, unit, left, transpose] = [0, 1, 2, 3].map(|b| bits >> b & 1 == 1);
        let system = Triangular {
            upper,
            unit,
            left,
            transpose,
        };
        let x = solve_triangular(&full, &rhs, 1, (n, 2), system);
        // The stored triangle, then op(A).
        let tri: Vec<f64> = (0..n * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                match (r == c, unit, (c > r) == upper) {
                    (true, true, _) => 1.0,
                    (true, false, _) | (false, _, true) => full[i],
                    _ => 0.0,
                }
            })
            .collect();
        let op = if transpose { t(&tri, n, n) } else { tri };
        // Left: X is n x 2; right: X and B are 2 x n.
        let back = if left {
            mm(&op, &x, n, n, 2)
        } else {
            mm(&x, &op, 2, n, n)
        };
        assert!(close(&back, &rhs, 1e-12), "{system:?}");
    }
}

#[test]
fn qr_eigh_and_svd_rebuild_their_inputs() {
    let (m, n) = (5, 3);
    let a = sample(m, n, 7);
    for complete in [false, true] {
        let (q, r) = qr(&a, 1, m, n, complete);
        let qc = if complete { m } else { n };
        assert!(close(&mm(&q, &r, m, qc, n), &a, 1e-12));
        let qtq = mm(&t(&q, m, qc), &q, qc, m, qc);
        let eye: Vec<f64> = (0..qc * qc)
            .map(|i| (i / qc == i % qc) as u8 as f64)
            .collect();
        assert!(close(&qtq, &eye, 1e-12));
        assert!((0..qc.min(n)).all(|i| (0..i).all(|j| r[i * n + j] == 0.0)));
    }
    let s = spd(4, 8);
    let (w, v, info) = eigh(&s, 1, 4, false, true);
    assert_eq!(info, vec![0]);
    assert!(w.windows(2).all(|p| p[0] <= p[1]));
    let vw: Vec<f64> = (0..16).map(|i| v[i] * w[i % 4]).collect();
    assert!(close(&mm(&vw, &t(&v, 4, 4), 4, 4, 4), &s, 1e-12));
    let (w_only, _, _) = eigh(&s, 1, 4, false, false);
    assert!(close(&w_only, &w, 1e-12));
    for full in [false, true] {
        let (u, sv, vh, info) = svd(&a, 1, (m, n), full, true);
        assert_eq!(info, vec![0]);
        assert!(sv.windows(2).all(|p| p[0] >= p[1]) && sv[n - 1] > 0.0);
        let uc = if full { m } else { n };
        let us: Vec<f64> = (0..m * uc)
            .map(|i| u[i] * sv.get(i % uc).copied().unwrap_or(0.0))
            .collect();
        let us_k: Vec<f64> = (0..m * n).map(|i| us[(i / n) * uc + i % n]).collect();
        assert!(
            close(&mm(&us_k, &vh[..n * n], m, n, n), &a, 1e-12),
            "full {full}"
        );
    }
    let (_, s_only, _, _) = svd(&a, 1, (m, n), false, false);
    assert!(close(&s_only, &svd(&a, 1, (m, n), false, true).1, 1e-12));
}

#[test]
fn f32_batches_split_across_threads_match_one_by_one() {
    crate::threads::set_num_threads(2);
    let n = 8;
    let a: Vec<f32> = (0..16)
        .flat_map(|b| spd(n, 20 + b))
        .map(|x| x as f32)
        .collect();
    let (l, info) = cholesky(&a, 16, n, false);
    assert!(info.iter().all(|&i| i == 0));
    for b in [0, 7, 15] {
        let (one, _) = cholesky(&a[b * n * n..(b + 1) * n * n], 1, n, false);
        assert_eq!(&l[b * n * n..(b + 1) * n * n], &one[..]);
    }
}

#[test]
fn lu_rebuilds_square_and_rectangular_matrices_with_lapack_pivots() {
    for (m, n) in [(4, 4), (5, 3), (3, 5)] {
        let k = m.min(n);
        let a = sample(2 * m, n, 30 + m as u64);
        let f = lu(&a, 2, m, n);
        for b in 0..2 {
            let (l, u) = (
                &f.l[b * m * k..(b + 1) * m * k],
                &f.u[b * k * n..(b + 1) * k * n],
            );
            assert!((0..m).all(|i| (0..k).all(|j| (j <= i) || l[i * k + j] == 0.0)));
            assert!((0..k).all(|i| l[i * k + i] == 1.0));
            assert!((0..k).all(|i| (0..i.min(n)).all(|j| u[i * n + j] == 0.0)));
            let lu_rows = mm(l, u, m, k, n);
            let perm = &f.perm[b * m..(b + 1) * m];
            let ab = &a[b * m * n..(b + 1) * m * n];
            let permuted: Vec<f64> = (0..m * n).map(|x| ab[perm[x / n] * n + x % n]).collect();
            assert!(close(&lu_rows, &permuted, 1e-12), "{m} x {n}");
            // Replaying the swaps gives the same order.
            let mut order: Vec<usize> = (0..m).collect();
            for (i, &p) in f.pivots[b * k..(b + 1) * k].iter().enumerate() {
                order.swap(i, p - 1);
            }
            assert_eq!(&order[..], perm);
        }
    }
}
