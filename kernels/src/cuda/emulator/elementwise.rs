//! Every elementwise row (`cu/elementwise.cu` instantiated from
//! `elementwise.rs`) in f32, f16 and bf16, emulated with the launcher's
//! view packing (`launch::pack`) over a transposed view, a view at an
//! offset, and a broadcast row, against each row's CPU function.

use super::rows::close;
use super::{Arg, Emulator, Job, Value, bytes_as, floats_from};
use crate::Layout;
use crate::cuda::launch::{Strided, elems, pack};
use crate::cuda::twins::attention::rounded;
use crate::elementwise::{BINARY_ROWS, Domain, UNARY_ROWS};

impl Value for Strided {
    fn arg(&self) -> Arg {
        // `int ndim`, 4 bytes of padding, then the two arrays (C layout).
        let mut b = self.ndim.to_le_bytes().to_vec();
        b.extend([0; 4]);
        b.extend(self.shape.iter().flat_map(|x| x.to_le_bytes()));
        b.extend(self.strides.iter().flat_map(|x| x.to_le_bytes()));
        Arg::Value(b)
    }
}

/// Deterministic values in a row's test domain.
fn in_domain(n: usize, seed: u32, d: Domain) -> Vec<f32> {
    let x = super::rows::draw(n, seed);
    match d {
        Domain::Any => x,
        Domain::Positive => x.iter().map(|v| v.abs() / 2.0 + 0.5).collect(),
        Domain::Wide => x.iter().map(|v| v * 3.0).collect(),
        Domain::Unit => x.iter().map(|v| v * 0.45).collect(),
        Domain::AboveOne => x.iter().map(|v| v.abs() + 1.1).collect(),
        Domain::Probability => x.iter().map(|v| v * 0.2 + 0.5).collect(),
    }
}

#[test]
fn emulated_elementwise_rows_match_the_cpu_through_views_in_every_float_dtype() {
    let emu = Emulator::module("elementwise").unwrap();
    let (rows, cols) = (33, 70);
    let n = rows * cols;
    // The transposed view of a [70, 33] buffer, and a [33, 70] view that
    // starts 5 elements into a longer buffer.
    let transposed = Layout::contiguous(&[cols, rows]).transpose(0, 1);
    let mut shifted = Layout::contiguous(&[rows, cols]);
    shifted.offset = 5;
    let row = Layout::contiguous(&[cols]).broadcast_to(&[rows, cols]);
    // Element `i` (row-major over [33, 70]) of each view's buffer.
    let t_index = |i: usize| (i % cols) * rows + i / cols;
    for (dtype, width, tol) in [("f32", 4, 1e-5), ("f16", 2, 1e-3), ("bf16", 2, 8e-3)] {
        let mut job = Job::default();
        let mut checks = Vec::new();
        for r in UNARY_ROWS {
            let x = rounded(&in_domain(n + 5, 1, r.domain), dtype);
            let bx = job.buffer(bytes_as(&x, dtype));
            for (view, at) in [(&transposed, 0), (&shifted, 5)] {
                let y = job.output(n, width);
                let v = pack(&view.shape, &[&view.strides], r.name)[0];
                let (p0, p1) = (r.sample[0] as f32, r.sample[1] as f32);
                let args = [n.arg(), v.arg(), p0.arg(), p1.arg()];
                let mut args = args.to_vec();
                args.extend([Arg::Buffer(bx, (at * width) as u64), Arg::Buffer(y, 0)]);
                job.launch(&format!("{}_{dtype}", r.name), elems(n), &args);
                let want: Vec<f32> = (0..n)
                    .map(|i| {
                        let xi = if at == 0 { x[t_index(i)] } else { x[i + at] };
                        (r.reference)(xi, r.sample)
                    })
                    .collect();
                checks.push((format!("{}_{dtype} at {at}", r.name), y, want));
            }
        }
        let b = rounded(&in_domain(cols, 7, Domain::Any), dtype);
        let bb = job.buffer(bytes_as(&b, dtype));
        let contiguous = Layout::contiguous(&[rows, cols]);
        for r in BINARY_ROWS {
            let a = rounded(&in_domain(n, 3, r.domain), dtype);
            let ba = job.buffer(bytes_as(&a, dtype));
            let y = job.output(n, width);
            let v = pack(&[rows, cols], &[&contiguous.strides, &row.strides], r.name);
            let mut args = vec![n.arg(), v[0].arg(), v[1].arg(), (r.sample as f32).arg()];
            args.extend([Arg::Buffer(ba, 0), Arg::Buffer(bb, 0), Arg::Buffer(y, 0)]);
            job.launch(&format!("{}_{dtype}", r.name), elems(n), &args);
            let want: Vec<f32> = (0..n)
                .map(|i| (r.reference)(a[i], b[i % cols], r.sample))
                .collect();
            checks.push((format!("{}_{dtype}", r.name), y, want));
        }
        let got = emu.run(&job).unwrap();
        for (what, y, want) in checks {
            // A half kernel rounds the f32 result once, as `rounded` does.
            close(
                &what,
                &floats_from(&got[y], dtype),
                &rounded(&want, dtype),
                tol,
            );
        }
    }
}
