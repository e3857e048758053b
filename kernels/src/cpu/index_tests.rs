//! Tests of the indexing kernels (`index.rs`).

use super::*;

/// gather and scatter through a permuted 3-D view at an offset, along
/// each dim, against coordinates computed the long way.
#[test]
fn gather_and_scatter_walk_views_as_their_coordinates_say() {
    let data: Vec<f64> = (0..200).map(|v| v as f64).collect();
    // A [3, 4, 5] buffer at offset 7, viewed as [5, 3, 2] by permuting
    // and cutting (strides 1, 20, 5).
    let view = Layout {
        shape: vec![5, 3, 2],
        strides: vec![1, 20, 5],
        offset: 7,
    };
    for dim in 0..3 {
        let size = [5, 3, 4][dim];
        let index: Vec<usize> = (0..30).map(|i| (i * 7 + dim) % size).collect();
        let coords = |flat: usize| [flat / 6, (flat / 2) % 3, flat % 2];
        let at = |flat: usize| {
            let mut c = coords(flat);
            c[dim] = index[flat];
            7 + c[0] + 20 * c[1] + 5 * c[2]
        };
        let got = gather(
            &data,
            &view,
            dim,
            Indices {
                ids: &index,
                layout: &Layout::contiguous(&[5, 3, 2]),
            },
        );
        let want: Vec<f64> = (0..30).map(|f| data[at(f)]).collect();
        assert_eq!(got, want, "gather along {dim}");
        let src: Vec<f64> = (0..30).map(|v| v as f64 + 0.5).collect();
        let ls = Layout::contiguous(&[5, 3, 2]);
        let mut dst = vec![0.0; 200];
        scatter_add(
            &mut dst,
            &view,
            dim,
            Indices {
                ids: &index,
                layout: &ls,
            },
            &src,
            &ls,
        );
        let mut want = vec![0.0; 200];
        (0..30).for_each(|f| want[at(f)] += src[f]);
        assert_eq!(dst, want, "scatter_add along {dim}");
    }
}

#[test]
fn every_scatter_mode_combines_repeated_indices_and_keeps_nan() {
    let l = Layout::contiguous(&[4]);
    let index = [0usize, 0, 2, 2];
    let src = [3.0f64, -2.0, f64::NAN, 5.0];
    let run = |mode| {
        let mut dst = [1.0f64, 1.0, 1.0, 1.0];
        scatter_reduce(
            &mut dst,
            &l,
            0,
            Indices {
                ids: &index,
                layout: &l,
            },
            &src,
            &l,
            mode,
        );
        dst
    };
    assert_eq!(run(ScatterMode::Assign)[..2], [-2.0, 1.0]);
    assert_eq!(run(ScatterMode::Sum)[..2], [2.0, 1.0]);
    assert_eq!(run(ScatterMode::Prod)[..2], [-6.0, 1.0]);
    assert_eq!(run(ScatterMode::Amax)[..2], [3.0, 1.0]);
    assert_eq!(run(ScatterMode::Amin)[..2], [-2.0, 1.0]);
    for mode in [
        ScatterMode::Sum,
        ScatterMode::Prod,
        ScatterMode::Amax,
        ScatterMode::Amin,
    ] {
        assert!(
            run(mode)[2].is_nan(),
            "{mode:?} lost the NaN sent before a number"
        );
    }
    let mut ints = [7i64, 0];
    let l2 = Layout::contiguous(&[2]);
    scatter_reduce(
        &mut ints,
        &l2,
        0,
        Indices {
            ids: &[0usize, 0],
            layout: &l2,
        },
        &[-9, 4],
        &l2,
        ScatterMode::Amin,
    );
    assert_eq!(ints, [-9, 0]);
}

/// Above the parallel grain, on two threads: every split (gather and
/// index_select by rows; scatter by rows, by columns for dim 0, and
/// not at all for a destination that overlaps itself; index_add_rows
/// by blocks and by column strips) against positions computed one by
/// one. Values are small integers, so sums are exact in any order.
#[test]
fn split_kernels_match_their_positions_on_two_threads() {
    crate::threads::set_num_threads(2);
    let (r, c) = (700usize, 96usize); // 67,200 positions
    let data: Vec<f64> = (0..r * c).map(|v| (v % 97) as f64).collect();
    let lx = Layout::contiguous(&[r, c]);
    for dim in 0..2 {
        let size = [r, c][dim];
        let index: Vec<usize> = (0..r * c).map(|i| (i * 31 + 7) % size).collect();
        let at = |f: usize| {
            let (mut i, mut j) = (f / c, f % c);
            [&mut i, &mut j][dim].clone_from(&index[f]);
            i * c + j
        };
        let got = gather(
            &data,
            &lx,
            dim,
            Indices {
                ids: &index,
                layout: &lx,
            },
        );
        let want: Vec<f64> = (0..r * c).map(|f| data[at(f)]).collect();
        assert_eq!(got, want, "gather along {dim}");
        for mode in [ScatterMode::Sum, ScatterMode::Amax] {
            let mut dst = vec![1.0; r * c];
            scatter_reduce(
                &mut dst,
                &lx,
                dim,
                Indices {
                    ids: &index,
                    layout: &lx,
                },
                &data,
                &lx,
                mode,
            );
            let mut want = vec![1.0f64; r * c];
            for f in 0..r * c {
                let w = &mut want[at(f)];
                *w = if mode == ScatterMode::Sum {
                    *w + data[f]
                } else {
                    w.max(data[f])
                };
            }
            assert_eq!(dst, want, "scatter {mode:?} along {dim}");
        }
    }
    // An index expanded along the rows (stride 0: one entry per row, as
    // `index.reshape(-1, 1).expand(r, c)`), gathering and scattering whole
    // rows along dim 0, serial (one thread) and split.
    let per_row: Vec<usize> = (0..r).map(|i| (i * 37 + 5) % r).collect();
    let li = Layout {
        shape: vec![r, c],
        strides: vec![1, 0],
        offset: 0,
    };
    let index = Indices {
        ids: &per_row,
        layout: &li,
    };
    for threads in [1, 2] {
        crate::threads::set_num_threads(threads);
        let want: Vec<f64> = (0..r * c)
            .map(|f| data[per_row[f / c] * c + f % c])
            .collect();
        assert_eq!(
            gather(&data, &lx, 0, index),
            want,
            "expanded gather, {threads} threads"
        );
        let mut dst = vec![1.0; r * c];
        scatter_reduce(&mut dst, &lx, 0, index, &data, &lx, ScatterMode::Amax);
        let mut want = vec![1.0f64; r * c];
        (0..r * c).for_each(|f| {
            let w = &mut want[per_row[f / c] * c + f % c];
            *w = w.max(data[f]);
        });
        assert_eq!(dst, want, "expanded scatter amax, {threads} threads");
    }
    crate::threads::set_num_threads(2);
    // A destination whose rows all alias one row (stride 0) is walked
    // on one thread: every position adds into row 0.
    let alias = Layout {
        shape: vec![r, c],
        strides: vec![0, 1],
        offset: 0,
    };
    let index: Vec<usize> = (0..r * c).map(|i| i % c).collect();
    let mut dst = vec![0.0; c];
    scatter_add(
        &mut dst,
        &alias,
        1,
        Indices {
            ids: &index,
            layout: &lx,
        },
        &data,
        &lx,
    );
    let mut want = vec![0.0; c];
    (0..r * c).for_each(|f| want[index[f]] += data[f]);
    assert_eq!(dst, want, "scatter into an aliased destination");
    // index_select and index_add_rows, one outer block (column strips)
    // and many (blocks).
    for (outer, size, inner) in [(1usize, 50usize, 96usize), (40, 5, 200)] {
        let idx: Vec<usize> = (0..(r * c) / (outer * inner))
            .map(|j| (j * 13) % size)
            .collect();
        let x: Vec<f64> = (0..outer * size * inner).map(|v| (v % 89) as f64).collect();
        let got = index_select(&x, outer, size, inner, &idx);
        let row = |o: usize, i: usize| &x[(o * size + i) * inner..][..inner];
        let want: Vec<f64> = (0..outer)
            .flat_map(|o| idx.iter().flat_map(move |&i| row(o, i).to_vec()))
            .collect();
        assert_eq!(got, want, "index_select outer {outer}");
        let mut dst = vec![0.0; outer * size * inner];
        index_add_rows(&mut dst, size, inner, &got, &idx);
        let mut want = vec![0.0; outer * size * inner];
        for o in 0..outer {
            for (j, &i) in idx.iter().enumerate() {
                for k in 0..inner {
                    want[(o * size + i) * inner + k] += got[(o * idx.len() + j) * inner + k];
                }
            }
        }
        assert_eq!(dst, want, "index_add_rows outer {outer}");
    }
}
