//! `torch.einsum` over one or more operands, each pair contracted by one
//! batched matrix product: letters only in one operand (and not the output)
//! are summed first, the shared ones are batch or contracted dims, the rest
//! are the product's rows and columns; a letter repeated within an operand
//! first takes that operand's diagonal. Built from `diagonal`, `sum_dims`,
//! `permute`, `reshape` and `matmul`, so its gradient and devices are theirs.

use crate::Tensor;

/// The stand-in letters for the dims an ellipsis covers, from the right
/// (private-use characters, which no equation can contain).
fn ellipsis_letters(rank: usize) -> Vec<char> {
    (0..rank)
        .map(|k| char::from_u32(0xE000 + (rank - 1 - k) as u32).expect("a private-use character"))
        .collect()
}

/// One operand's letters, checked against its dims; `...` becomes the
/// stand-ins of the dims it covers.
fn letters(term: &str, t: &Tensor, equation: &str) -> Vec<char> {
    let (before, after, ellipsis) = match term.split_once("...") {
        Some((b, a)) => (b, a, true),
        None => (term, "", false),
    };
    let named: Vec<char> = before.chars().chain(after.chars()).collect();
    for &c in &named {
        assert!(
            c.is_ascii_alphabetic(),
            "einsum: '{c}' in \"{equation}\" is not a letter (at most one ellipsis per operand)"
        );
    }
    assert!(
        named.len() == t.ndim() || (ellipsis && named.len() < t.ndim()),
        "einsum: \"{term}\" names {} dims of an operand of shape {:?} in \"{equation}\"",
        named.len(),
        t.shape()
    );
    let covered = if ellipsis {
        ellipsis_letters(t.ndim() - named.len())
    } else {
        vec![]
    };
    [
        before.chars().collect(),
        covered,
        after.chars().collect::<Vec<_>>(),
    ]
    .concat()
}

/// An operand whose term repeats a letter (`"ii"`, `"bii"`) reduced to
/// its diagonal over each repeated pair, the letter then naming the
/// diagonal's dim (last, as `diagonal` puts it).
fn take_diagonals(
    mut t: Tensor,
    mut ls: Vec<char>,
    term: &str,
    equation: &str,
) -> (Tensor, Vec<char>) {
    while let Some((i, j)) = (0..ls.len()).find_map(|i| {
        let j = ls[i + 1..].iter().position(|&c| c == ls[i])?;
        Some((i, i + 1 + j))
    }) {
        let (a, b) = (t.shape()[i], t.shape()[j]);
        assert!(
            a == b,
            "einsum: '{}' repeats within \"{term}\" in \"{equation}\" over dims of sizes {a} and {b}, which must be equal",
            ls[i]
        );
        let c = ls[i];
        t = t.diagonal(0, i as isize, j as isize);
        ls.remove(j);
        ls.remove(i);
        ls.push(c);
    }
    (t, ls)
}

/// The operands' ellipsis dims broadcast together, as PyTorch's (aligned
/// from the right): each operand's size-1 dims are expanded, and missing
/// leading ones added, so the stand-in letters name equal sizes.
fn broadcast_ellipses(ops: &mut [(Tensor, Vec<char>)], equation: &str) -> Vec<char> {
    let is_stand_in = |c: &char| !c.is_ascii_alphabetic();
    let rank = ops
        .iter()
        .map(|(_, l)| l.iter().filter(|c| is_stand_in(c)).count())
        .max()
        .unwrap_or(0);
    let stand_ins = ellipsis_letters(rank);
    let mut sizes = vec![1usize; rank];
    for (t, ls) in ops.iter() {
        for (k, c) in ls.iter().enumerate().filter(|(_, c)| is_stand_in(c)) {
            let j = stand_ins
                .iter()
                .position(|x| x == c)
                .expect("a stand-in letter");
            let n = t.shape()[k];
            assert!(
                n == 1 || sizes[j] == 1 || sizes[j] == n,
                "einsum: the dims under \"...\" in \"{equation}\" do not broadcast ({} against {n})",
                sizes[j]
            );
            sizes[j] = sizes[j].max(n);
        }
    }
    for (t, ls) in ops.iter_mut() {
        let first = ls.iter().position(is_stand_in);
        let Some(first) = first else { continue };
        let own = ls.iter().filter(|c| is_stand_in(c)).count();
        let shape = t.shape().to_vec();
        let full: Vec<usize> = [&shape[..first], &sizes[..], &shape[first + own..]].concat();
        let padded: Vec<isize> = [&shape[..first], &vec![1; rank - own][..], &shape[first..]]
            .concat()
            .iter()
            .map(|&n| n as isize)
            .collect();
        *t = t.reshape(&padded).expand(&full);
        ls.splice(first..first + own, stand_ins.iter().copied());
    }
    stand_ins
}

/// `t` (with letters `ls`) summed over the letters that no other operand
/// and not the output (`keep`) has.
fn sum_private(t: &Tensor, ls: &[char], keep: &[char]) -> (Tensor, Vec<char>) {
    let gone: Vec<isize> = (0..ls.len())
        .filter(|&k| !keep.contains(&ls[k]))
        .map(|k| k as isize)
        .collect();
    if gone.is_empty() {
        return (t.clone(), ls.to_vec());
    }
    let kept = ls.iter().copied().filter(|c| keep.contains(c)).collect();
    (t.sum_dims(&gone, false), kept)
}

/// The size of each letter of `ls` in `t`.
fn sizes(t: &Tensor, ls: &[char], of: &[char]) -> Vec<usize> {
    of.iter()
        .map(|c| t.shape()[ls.iter().position(|x| x == c).expect("letter of t")])
        .collect()
}

/// `t` with its dims in the order of `want` (letters it has).
fn arrange(t: &Tensor, ls: &[char], want: &[char]) -> Tensor {
    let perm: Vec<isize> = want
        .iter()
        .map(|c| ls.iter().position(|x| x == c).expect("letter of t") as isize)
        .collect();
    t.permute(&perm)
}

/// The product of `a` and `b` over their shared letters that `out_keep`
/// does not keep; its letters are batch, then `a`'s own, then `b`'s own.
fn contract(
    a: &Tensor,
    la: &[char],
    b: &Tensor,
    lb: &[char],
    out_keep: &[char],
    eq: &str,
) -> (Tensor, Vec<char>) {
    let shared: Vec<char> = la.iter().copied().filter(|c| lb.contains(c)).collect();
    for &c in &shared {
        let (sa, sb) = (sizes(a, la, &[c])[0], sizes(b, lb, &[c])[0]);
        assert!(
            sa == sb,
            "einsum: '{c}' is {sa} in one operand and {sb} in another in \"{eq}\""
        );
    }
    let batch: Vec<char> = shared
        .iter()
        .copied()
        .filter(|c| out_keep.contains(c))
        .collect();
    let inner: Vec<char> = shared
        .iter()
        .copied()
        .filter(|c| !out_keep.contains(c))
        .collect();
    let rows: Vec<char> = la.iter().copied().filter(|c| !lb.contains(c)).collect();
    let cols: Vec<char> = lb.iter().copied().filter(|c| !la.contains(c)).collect();
    let (nb, nr, nc, ni) = (
        sizes(a, la, &batch),
        sizes(a, la, &rows),
        sizes(b, lb, &cols),
        sizes(a, la, &inner),
    );
    let prod = |v: &[usize]| v.iter().product::<usize>() as isize;
    let a3 = arrange(
        a,
        la,
        &[batch.clone(), rows.clone(), inner.clone()].concat(),
    )
    .reshape(&[prod(&nb), prod(&nr), prod(&ni)]);
    let b3 = arrange(
        b,
        lb,
        &[batch.clone(), inner.clone(), cols.clone()].concat(),
    )
    .reshape(&[prod(&nb), prod(&ni), prod(&nc)]);
    let shape: Vec<isize> = [nb, nr, nc].concat().iter().map(|&s| s as isize).collect();
    let product = a3.matmul(&b3).reshape(&shape);
    (product, [batch, rows, cols].concat())
}

impl Tensor {
    /// Sums products of elements named by letters (`torch.einsum`):
    /// `"ij,jk->ik"` is a matrix product, `"bhqd,bhkd->bhqk"` attention
    /// scores, `"ij->ji"` a transpose. Without `->` the output is the
    /// letters used once, in alphabetical order. `...` stands for the dims
    /// the letters leave, broadcast across operands as PyTorch's
    /// (`"...ij,jk->...ik"`). A letter repeated within one operand takes
    /// its diagonal (`"ii->i"`, and `"ii"` is the trace).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let b = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2]);
    /// assert_eq!(Tensor::einsum("ij,jk->ik", &[&a, &b]).to_vec::<f32>(), a.to_vec::<f32>());
    /// assert_eq!(Tensor::einsum("ij->", &[&a]).item::<f32>(), 10.0);
    /// let batch = Tensor::ones(&[5, 3, 2, 2]);
    /// assert_eq!(Tensor::einsum("...ij,jk->...ik", &[&batch, &b]).shape(), &[5, 3, 2, 2]);
    /// ```
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> Tensor {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l.to_string(), Some(r.to_string())),
            None => (eq.clone(), None),
        };
        let terms: Vec<&str> = lhs.split(',').collect();
        assert!(
            terms.len() == operands.len(),
            "einsum: \"{equation}\" names {} operands but {} were given",
            terms.len(),
            operands.len()
        );
        let named: Vec<Vec<char>> = terms
            .iter()
            .zip(operands)
            .map(|(term, t)| letters(term, t, equation))
            .collect();
        // The implicit output counts letters as written (`"ii"` is a trace).
        let written: Vec<char> = named.iter().flatten().copied().collect();
        let mut ops: Vec<(Tensor, Vec<char>)> = terms
            .iter()
            .zip(operands)
            .zip(named)
            .map(|((term, t), ls)| take_diagonals((*t).clone(), ls, term, equation))
            .collect();
        let stand_ins = broadcast_ellipses(&mut ops, equation);
        let all: Vec<char> = ops.iter().flat_map(|(_, l)| l.clone()).collect();
        let out: Vec<char> = match rhs {
            Some(r) => match r.split_once("...") {
                Some((b, a)) => [
                    b.chars().collect(),
                    stand_ins,
                    a.chars().collect::<Vec<_>>(),
                ]
                .concat(),
                None => r.chars().collect(),
            },
            None => {
                // The ellipsis dims first, then the letters used once.
                let mut once: Vec<char> = written
                    .iter()
                    .copied()
                    .filter(|c| {
                        c.is_ascii_alphabetic() && written.iter().filter(|x| *x == c).count() == 1
                    })
                    .collect();
                once.sort();
                [stand_ins, once].concat()
            }
        };
        for (k, &c) in out.iter().enumerate() {
            assert!(
                all.contains(&c) && !out[k + 1..].contains(&c),
                "einsum: output letter '{c}' of \"{equation}\" is not in an operand or repeats"
            );
        }
        // Fold left: each step keeps what the output or a later operand needs.
        let (first, first_ls) = ops.remove(0);
        let later: Vec<char> = ops.iter().flat_map(|(_, l)| l.clone()).collect();
        let keep: Vec<char> = [out.clone(), later].concat();
        let (mut acc, mut acc_ls) = sum_private(&first, &first_ls, &keep);
        for k in 0..ops.len() {
            let rest: Vec<char> = ops[k + 1..].iter().flat_map(|(_, l)| l.clone()).collect();
            let keep: Vec<char> = [out.clone(), rest].concat();
            let with_acc: Vec<char> = [keep.clone(), acc_ls.clone()].concat();
            let (b, b_ls) = sum_private(&ops[k].0, &ops[k].1, &with_acc);
            let with_b: Vec<char> = [keep.clone(), b_ls.clone()].concat();
            let (a, a_ls) = sum_private(&acc, &acc_ls, &with_b);
            (acc, acc_ls) = contract(&a, &a_ls, &b, &b_ls, &keep, equation);
        }
        let (acc, acc_ls) = sum_private(&acc, &acc_ls, &out);
        arrange(&acc, &acc_ls, &out).contiguous()
    }
}
