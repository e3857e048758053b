//! The indexing kernels (`cu/index.cu`): gather, index_select and their
//! f32 adjoints with atomics, emulated with the launchers' argument order
//! and view packing against their CPU twins (the GPU twin test's cases),
//! and an out-of-range index, which reads nothing and is recorded in the
//! flag as `[launch id, index]`. Inputs are small integers, so sums by
//! atomics are exact in any order.

use super::{Arg, Emulator, Job, Value, bytes_as, floats_from};
use crate::Layout;
use crate::cpu::{
    Indices, ScatterMode, gather, index_add_rows, index_select, scatter_add, scatter_reduce,
};
use crate::cuda::launch::{elems, pack, scatter_kernel};

fn u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn emulated_indexing_kernels_match_their_cpu_twins_and_flag_a_bad_index() {
    let emu = Emulator::module("index").unwrap();
    let (r, c) = (4, 6);
    let x: Vec<f32> = (0..r * c).map(|i| (i * 7 % 11) as f32 - 5.0).collect();
    let lx = Layout::contiguous(&[r, c]);
    let mut job = Job::default();
    let bx = job.buffer(bytes_as(&x, "f32"));
    let flag = job.buffer(vec![0; 16]);
    let ids = |v: &[i64]| v.iter().flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>();
    // gather along dim 1 with a [4, 3] index; a second run with index 9
    // (out of range for size 6) at position 4.
    let index: Vec<usize> = (0..12).map(|i| (i * 5) % c).collect();
    let mut bad: Vec<i64> = index.iter().map(|&i| i as i64).collect();
    let good = job.buffer(ids(&bad));
    bad[4] = 9;
    let bad_idx = job.buffer(ids(&bad));
    let view = Layout {
        shape: vec![r, 3],
        strides: lx.strides.clone(),
        offset: 0,
    };
    let v = pack(&view.shape, &[&view.strides], "gather")[0];
    let [y, y_bad] = [0; 2].map(|_| job.output(12, 4));
    for (idx, out, id) in [(good, y, 1i64), (bad_idx, y_bad, 7)] {
        let mut args = vec![12usize.arg(), v.arg(), 1usize.arg(), 3usize.arg()];
        args.extend([1i64.arg(), (c as i64).arg(), Arg::Buffer(flag, 0), id.arg()]);
        args.extend([idx, bx, out].map(|b| Arg::Buffer(b, 0)));
        job.launch("gather_u32", elems(12), &args);
    }
    // scatter_add: gather's adjoint, into zeros.
    let src: Vec<f32> = (0..12).map(|i| (i % 5) as f32 - 2.0).collect();
    let bsrc = job.buffer(bytes_as(&src, "f32"));
    let dst = job.buffer(vec![0; r * c * 4]);
    let ls = Layout::contiguous(&[r, 3]);
    let v2 = pack(&ls.shape, &[&ls.strides, &view.strides], "scatter_add");
    let mut args = vec![
        12usize.arg(),
        v2[0].arg(),
        v2[1].arg(),
        1usize.arg(),
        3usize.arg(),
    ];
    args.extend([
        1i64.arg(),
        (c as i64).arg(),
        Arg::Buffer(flag, 0),
        2i64.arg(),
    ]);
    args.extend([good, bsrc, dst].map(|b| Arg::Buffer(b, 0)));
    job.launch("scatter_add_f32", elems(12), &args);
    // The reductions onto x with repeated indices in every row (small
    // integers: products and sums are exact in any order), and assignment
    // through `index`, which does not repeat within a row.
    let repeats: Vec<usize> = (0..12).map(|i| (i % 2) * 2).collect();
    let brep = job.buffer(ids(&repeats.iter().map(|&i| i as i64).collect::<Vec<_>>()));
    let modes = [
        ScatterMode::Prod,
        ScatterMode::Amax,
        ScatterMode::Amin,
        ScatterMode::Assign,
    ];
    let reduced = modes.map(|mode| {
        let onto = job.buffer(bytes_as(&x, "f32"));
        let idx = if mode == ScatterMode::Assign {
            good
        } else {
            brep
        };
        let mut args = vec![12usize.arg(), v2[0].arg(), v2[1].arg(), 1usize.arg()];
        args.extend([3usize.arg(), 1i64.arg(), (c as i64).arg()]);
        args.extend([Arg::Buffer(flag, 0), 5i64.arg()]);
        args.extend([idx, bsrc, onto].map(|b| Arg::Buffer(b, 0)));
        job.launch(&scatter_kernel(mode, 4).unwrap(), elems(12), &args);
        onto
    });
    // index_select of rows [3, 0, 3] and its adjoint index_add.
    let rows = [3usize, 0, 3];
    let rid = job.buffer(ids(&[3, 0, 3]));
    let rview = Layout {
        shape: vec![3, c],
        strides: lx.strides.clone(),
        offset: 0,
    };
    let v3 = pack(&rview.shape, &[&rview.strides], "index_select")[0];
    let sel = job.output(3 * c, 4);
    let mut args = vec![(3 * c).arg(), v3.arg(), c.arg(), 3usize.arg()];
    args.extend([
        (c as i64).arg(),
        (r as i64).arg(),
        Arg::Buffer(flag, 0),
        3i64.arg(),
    ]);
    args.extend([rid, bx, sel].map(|b| Arg::Buffer(b, 0)));
    job.launch("index_select_u32", elems(3 * c), &args);
    let gsrc: Vec<f32> = (0..3 * c).map(|i| (i % 4) as f32).collect();
    let bgsrc = job.buffer(bytes_as(&gsrc, "f32"));
    let added = job.buffer(vec![0; r * c * 4]);
    let mut args = vec![(3 * c).arg(), c.arg(), 3usize.arg(), r.arg()];
    args.extend([Arg::Buffer(flag, 0), 4i64.arg()]);
    args.extend([rid, bgsrc, added].map(|b| Arg::Buffer(b, 0)));
    job.launch("index_add_f32", elems(3 * c), &args);

    let got = emu.run(&job).unwrap();
    let want = gather(
        &x,
        &lx,
        1,
        Indices {
            ids: &index,
            layout: &Layout::contiguous(&[r, 3]),
        },
    );
    assert_eq!(floats_from(&got[y], "f32"), want, "gather");
    let mut want_bad = want.clone();
    want_bad[4] = 0.0;
    assert_eq!(floats_from(&got[y_bad], "f32"), want_bad, "gather, index 9");
    assert_eq!(u64s(&got[flag]), [7, 9], "the flag names launch 7, index 9");
    let mut want = vec![0.0f32; r * c];
    scatter_add(
        &mut want,
        &view,
        1,
        Indices {
            ids: &index,
            layout: &ls,
        },
        &src,
        &ls,
    );
    assert_eq!(floats_from(&got[dst], "f32"), want, "scatter_add");
    for (mode, onto) in modes.into_iter().zip(reduced) {
        let mut want = x.clone();
        let ids = if mode == ScatterMode::Assign {
            &index
        } else {
            &repeats
        };
        scatter_reduce(
            &mut want,
            &view,
            1,
            Indices { ids, layout: &ls },
            &src,
            &ls,
            mode,
        );
        assert_eq!(
            floats_from(&got[onto], "f32"),
            want,
            "scatter {}",
            mode.name()
        );
    }
    let want = index_select(&x, 1, r, c, &rows);
    assert_eq!(floats_from(&got[sel], "f32"), want, "index_select");
    let mut want = vec![0.0f32; r * c];
    index_add_rows(&mut want, r, c, &gsrc, &rows);
    assert_eq!(floats_from(&got[added], "f32"), want, "index_add");
}
