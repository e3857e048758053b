//! The indexing kernels (gather, index_select and their adjoints) against
//! their CPU twins, and the device-side bounds checks.

use super::*;
use crate::cpu::{Indices, ScatterMode};

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn indexing_kernels_match_their_cpu_twins() {
    let Some(dev) = gpu() else { return };
    let (r, c) = (4, 6);
    let x = inputs(r * c, 51);
    let dx = up(&dev, &x);
    let lx = Layout::contiguous(&[r, c]);
    // gather along dim 1 with a [4, 3] index.
    let index: Vec<usize> = (0..12).map(|i| (i * 5) % c).collect();
    let ids: Vec<i64> = index.iter().map(|&i| i as i64).collect();
    let di = dev.upload(&ids).unwrap();
    let view = Layout {
        shape: vec![r, 3],
        strides: lx.strides.clone(),
        offset: 0,
    };
    let g = launch::Gathered {
        input: &view,
        inner: 1,
        len: 3,
        stride: 1,
        size: c,
        op: "gather",
    };
    let y = launch::gather(&dx, g, &di, 4, true).unwrap();
    let want = crate::cpu::gather(
        &x,
        &lx,
        1,
        Indices {
            ids: &index,
            layout: &Layout::contiguous(&[r, 3]),
        },
    );
    close("gather", &down(&y, 12), &want, 0.0);
    // scatter_add: gather's adjoint.
    let src = inputs(12, 53);
    let ds = up(&dev, &src);
    let mut dst = launch::fill(&dev, r * c, "f32", 0.0).unwrap();
    let g = launch::Gathered {
        input: &view,
        inner: 1,
        len: 3,
        stride: 1,
        size: c,
        op: "gather",
    };
    let ls = Layout::contiguous(&[r, 3]);
    let sum = launch::scatter_kernel(ScatterMode::Sum, 4).unwrap();
    launch::scatter(&mut dst, g, &ds, &ls, &di, (&sum, 4)).unwrap();
    let mut want = vec![0.0f32; r * c];
    crate::cpu::scatter_add(
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
    close("scatter_add", &down(&dst, r * c), &want, 1e-6);
    // The other reductions onto x, with repeated indices in every row, and
    // assignment through `index`, whose rows do not repeat (so the value
    // that lands is the one PyTorch's would be).
    let repeats: Vec<usize> = (0..12).map(|i| (i % 2) * 2).collect();
    let dr = dev
        .upload(&repeats.iter().map(|&i| i as i64).collect::<Vec<_>>())
        .unwrap();
    for mode in [
        ScatterMode::Prod,
        ScatterMode::Amax,
        ScatterMode::Amin,
        ScatterMode::Assign,
    ] {
        let (ids, dids) = if mode == ScatterMode::Assign {
            (&index, &di)
        } else {
            (&repeats, &dr)
        };
        let mut dst = up(&dev, &x);
        let g = launch::Gathered {
            input: &view,
            inner: 1,
            len: 3,
            stride: 1,
            size: c,
            op: "scatter_reduce",
        };
        let kernel = launch::scatter_kernel(mode, 4).unwrap();
        launch::scatter(&mut dst, g, &ds, &ls, dids, (&kernel, 4)).unwrap();
        let mut want = x.clone();
        crate::cpu::scatter_reduce(
            &mut want,
            &view,
            1,
            Indices { ids, layout: &ls },
            &src,
            &ls,
            mode,
        );
        close(mode.name(), &down(&dst, r * c), &want, 1e-6);
    }
    // index_select rows (dim 0) and index_add_rows.
    let rows: Vec<usize> = vec![3, 0, 3];
    let rid: Vec<i64> = rows.iter().map(|&i| i as i64).collect();
    let dri = dev.upload(&rid).unwrap();
    let view = Layout {
        shape: vec![3, c],
        strides: lx.strides.clone(),
        offset: 0,
    };
    let g = launch::Gathered {
        input: &view,
        inner: c,
        len: 3,
        stride: c,
        size: r,
        op: "index_select",
    };
    let y = launch::gather(&dx, g, &dri, 4, false).unwrap();
    close(
        "index_select",
        &down(&y, 3 * c),
        &crate::cpu::index_select(&x, 1, r, c, &rows),
        0.0,
    );
    let gsrc = inputs(3 * c, 57);
    let mut dst = launch::fill(&dev, r * c, "f32", 0.0).unwrap();
    launch::index_add_f32(
        &mut dst,
        (1, r, c),
        &up(&dev, &gsrc),
        &dri,
        (3, "index_add"),
    )
    .unwrap();
    let mut want = vec![0.0f32; r * c];
    crate::cpu::index_add_rows(&mut want, r, c, &gsrc, &rows);
    close("index_add", &down(&dst, r * c), &want, 1e-6);
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn out_of_range_indices_touch_nothing_and_are_reported_at_the_next_read() {
    let Some(dev) = gpu() else { return };
    let (r, c) = (2, 5);
    let x = inputs(r * c, 71);
    let dx = up(&dev, &x);
    let view = Layout::contiguous(&[r, 2]);
    let view = Layout {
        strides: vec![c, 1],
        ..view
    };
    let geom = |op| launch::Gathered {
        input: &view,
        inner: 1,
        len: 2,
        stride: 1,
        size: c,
        op,
    };
    let panic_of = |f: &mut dyn FnMut()| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .err()
            .and_then(|p| p.downcast_ref::<String>().cloned())
            .expect("the bad index is reported")
    };
    let gather_reported = |msg: String| {
        assert!(
            msg.starts_with("gather: index 7 is out of bounds for dim of size 5")
                || msg.starts_with("gather: index -1 is out of bounds for dim of size 5"),
            "{msg}"
        )
    };
    let index_add_reported = |msg: String| {
        assert!(
            msg.starts_with("index_select backward: index 3 is out of bounds for dim of size 3"),
            "{msg}"
        )
    };
    let src = up(&dev, &[1.0f32; 4]);
    let rows = dev.upload(&[0i64, 3]).unwrap();
    // Index 7 and -1 are out of range: the first launch's first is reported.
    let bad = dev.upload(&[1i64, 7, -1, 0]).unwrap();
    if std::env::var("CUDA_LAUNCH_BLOCKING").is_ok_and(|v| v == "1") {
        // Synchronous launches report at the launch itself.
        gather_reported(panic_of(&mut || {
            launch::gather(&dx, geom("gather"), &bad, 4, true).unwrap();
        }));
        index_add_reported(panic_of(&mut || {
            let mut dst = launch::fill(&dev, 3, "f32", 0.0).unwrap();
            launch::index_add_f32(
                &mut dst,
                (1, 3, 1),
                &src,
                &rows,
                (2, "index_select backward"),
            )
            .unwrap();
        }));
        return;
    }
    let y = launch::gather(&dx, geom("gather"), &bad, 4, true).unwrap();
    let mut dst = launch::fill(&dev, r * c, "f32", 0.0).unwrap();
    let sum = launch::scatter_kernel(ScatterMode::Sum, 4).unwrap();
    launch::scatter(&mut dst, geom("scatter_add"), &src, &view, &bad, (&sum, 4)).unwrap();
    gather_reported(panic_of(&mut || {
        down(&y, 4);
    }));
    // Nothing was read or written for them; the flag is clear again.
    close("gather", &down(&y, 4), &[x[1], 0.0, 0.0, x[c]], 0.0);
    let mut want = vec![0.0f32; r * c];
    want[1] = 1.0;
    want[c] = 1.0;
    close("scatter_add", &down(&dst, r * c), &want, 0.0);
    // index_select's adjoint checks its rows too.
    let mut dst = launch::fill(&dev, 3, "f32", 0.0).unwrap();
    launch::index_add_f32(
        &mut dst,
        (1, 3, 1),
        &src,
        &rows,
        (2, "index_select backward"),
    )
    .unwrap();
    index_add_reported(panic_of(&mut || {
        down(&dst, 3);
    }));
    assert_eq!(down(&dst, 3), vec![1.0, 0.0, 0.0]);
}
