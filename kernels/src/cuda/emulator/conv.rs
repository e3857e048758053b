//! im2col, col2im and max pooling (`cu/conv.cu`), emulated with the
//! launchers' shapes (`launch/conv.rs`), against their CPU twins, on
//! geometries with strides, padding, dilation, and a NaN that wins its
//! windows.

use super::rows::{close, draw};
use super::{Arg, Emulator, Job, Value, bytes_as, floats_from};
use crate::Conv2dGeometry;
use crate::cpu::{col2im, im2col, max_pool2d, max_pool2d_backward};
use crate::cuda::launch::{ConvGeom, elems};

impl Value for ConvGeom {
    fn arg(&self) -> Arg {
        let g = self;
        let fields = [
            g.n, g.c, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.oh, g.ow,
        ];
        Arg::Value(fields.iter().flat_map(|f| f.to_le_bytes()).collect())
    }
}

fn geometries() -> Vec<Conv2dGeometry> {
    let g = |n, c, (h, w), kernel, stride, padding, dilation| Conv2dGeometry {
        n,
        c,
        h,
        w,
        kernel,
        stride,
        padding,
        dilation,
    };
    vec![
        g(2, 3, (7, 6), (3, 2), (2, 1), (1, 1), (1, 2)),
        g(1, 4, (5, 5), (3, 3), (1, 1), (1, 1), (1, 1)),
        g(3, 2, (8, 9), (2, 2), (2, 2), (0, 0), (1, 1)),
        g(1, 1, (4, 3), (5, 4), (1, 2), (2, 2), (1, 1)),
    ]
}

fn i64s(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn emulated_conv_and_pooling_kernels_match_their_cpu_twins() {
    let conv = Emulator::module("conv").unwrap();
    for g in geometries() {
        let geom = ConvGeom::new(&g).unwrap();
        let (oh, ow) = g.out_hw().unwrap();
        let (image, plane) = (g.n * g.c * g.h * g.w, g.n * g.c * oh * ow);
        let ncols = image / (g.h * g.w) * g.kernel.0 * g.kernel.1 * oh * ow;
        let mut x = draw(image, 61);
        x[image / 3] = f32::NAN; // NaN wins its windows
        let want_cols = im2col(&x, &g, -9.0);
        let (want_v, want_i) = max_pool2d(&x, &g);
        let grad = draw(plane, 71);
        let want_gx = max_pool2d_backward(&grad, &want_i, g.n * g.c, g.h * g.w);
        let finite = draw(ncols, 3);
        let want_back = col2im(&finite, &g);

        let mut job = Job::default();
        let bx = job.buffer(bytes_as(&x, "f32"));
        let cols = job.output(ncols, 4);
        let bfinite = job.buffer(bytes_as(&finite, "f32"));
        let back = job.output(image, 4);
        let (pv, pi) = (job.output(plane, 4), job.output(plane, 8));
        let bgrad = job.buffer(bytes_as(&grad, "f32"));
        let gx = job.output(image, 4);
        let p = |b| Arg::Buffer(b, 0);
        let launches = [
            ("im2col_f32", ncols, vec![(-9f32).arg(), p(bx), p(cols)]),
            ("col2im_f32", image, vec![p(bfinite), p(back)]),
            ("max_pool2d_f32", plane, vec![p(bx), p(pv), p(pi)]),
            (
                "max_pool2d_backward_f32",
                image,
                vec![p(bgrad), p(pi), p(gx)],
            ),
        ];
        for (name, total, rest) in launches {
            let mut args = vec![total.arg(), geom.arg()];
            args.extend(rest);
            job.launch(name, elems(total), &args);
        }
        let got = conv.run(&job).unwrap_or_else(|e| panic!("{g:?}: {e}"));
        let same = |a: &f32, b: &f32| a == b || (a.is_nan() && b.is_nan());
        let got_cols = floats_from(&got[cols], "f32");
        assert!(
            got_cols.iter().zip(&want_cols).all(|(a, b)| same(a, b)),
            "im2col {g:?}"
        );
        close("col2im", &floats_from(&got[back], "f32"), &want_back, 1e-5);
        let got_v = floats_from(&got[pv], "f32");
        assert!(
            got_v.iter().zip(&want_v).all(|(a, b)| same(a, b)),
            "max_pool2d values {g:?}"
        );
        assert_eq!(i64s(&got[pi]), want_i, "max_pool2d indices {g:?}");
        close(
            "max_pool2d_backward",
            &floats_from(&got[gx], "f32"),
            &want_gx,
            1e-6,
        );
    }
}
