//! The data-movement kernels (`cu/copy.cu`): casts between every pair of
//! dtypes, comparisons, `where`, strided copies and assignments, and fills,
//! emulated with the launchers' view packing (`launch::pack`), against
//! values worked out here from the kernels' documented semantics (PyTorch's:
//! floats to integers truncate, to `u8` through `i64` (wrapping), to bool
//! as `!= 0`; half types round to nearest even).

use super::{Arg, Emulator, Job, Value};
use crate::Layout;
use crate::cuda::launch::{elems, pack};
use crate::cuda::modules::ALL_DTYPES;
use crate::elementwise::Compare;

fn width(dtype: &str) -> usize {
    crate::cuda::launch::width(dtype)
}

/// `v` stored as `dtype`, as the kernels' `from_d` stores it.
fn encode(v: f64, dtype: &str) -> Vec<u8> {
    match dtype {
        "f32" => (v as f32).to_le_bytes().to_vec(),
        "f16" => half::f16::from_f32(v as f32).to_le_bytes().to_vec(),
        "bf16" => half::bf16::from_f32(v as f32).to_le_bytes().to_vec(),
        "f64" => v.to_le_bytes().to_vec(),
        "i64" => (v as i64).to_le_bytes().to_vec(),
        "u8" => vec![(v as i64) as u8],
        "b8" => vec![(v != 0.0) as u8],
        other => panic!("no dtype {other}"),
    }
}

/// One element of `dtype` as f64.
fn decode(b: &[u8], dtype: &str) -> f64 {
    match dtype {
        "f32" => f32::from_le_bytes(b.try_into().unwrap()) as f64,
        "f16" => half::f16::from_le_bytes(b.try_into().unwrap()).to_f64(),
        "bf16" => half::bf16::from_le_bytes(b.try_into().unwrap()).to_f64(),
        "f64" => f64::from_le_bytes(b.try_into().unwrap()),
        "i64" => i64::from_le_bytes(b.try_into().unwrap()) as f64,
        _ => b[0] as f64,
    }
}

/// Twelve values as `dtype` holds them (negatives wrap in `u8`).
fn values(dtype: &str) -> Vec<f64> {
    let raw = [
        -3.0, -1.5, -0.0, 0.0, 0.5, 1.0, 2.5, 3.0, 7.0, 100.0, 200.0, 255.0,
    ];
    raw.iter()
        .map(|&v| decode(&encode(v, dtype), dtype))
        .collect()
}

fn bytes(vals: &[f64], dtype: &str) -> Vec<u8> {
    vals.iter().flat_map(|&v| encode(v, dtype)).collect()
}

#[test]
fn emulated_casts_comparisons_and_copies_match_their_semantics() {
    let copy = Emulator::module("copy").unwrap();
    // A [3, 4] view: the transpose of a [4, 3] buffer, so element i of the
    // view is buffer element t(i).
    let view = Layout::contiguous(&[4, 3]).transpose(0, 1);
    let t = |i: usize| (i % 4) * 3 + i / 4;
    let n = 12;
    let strided = pack(&view.shape, &[&view.strides], "cast")[0];
    let mut job = Job::default();
    let mut checks: Vec<(String, usize, Vec<u8>)> = Vec::new();
    for from in ALL_DTYPES {
        let vals = values(from);
        let x = job.buffer(bytes(&vals, from));
        for to in ALL_DTYPES {
            let y = job.output(n, width(to));
            let args = [n.arg(), strided.arg(), Arg::Buffer(x, 0), Arg::Buffer(y, 0)];
            job.launch(&format!("cast_to_{to}_{from}"), elems(n), &args);
            let want = (0..n).flat_map(|i| encode(vals[t(i)], to)).collect();
            checks.push((format!("cast {from} to {to}"), y, want));
        }
        // Comparisons against a broadcast row of four.
        let row = job.buffer(bytes(&vals[4..8], from));
        let contiguous = Layout::contiguous(&[3, 4]);
        let broadcast = Layout::contiguous(&[4]).broadcast_to(&[3, 4]);
        let v = pack(
            &[3, 4],
            &[&contiguous.strides, &broadcast.strides],
            "compare",
        );
        for cmp in Compare::ALL {
            let y = job.output(n, 1);
            let args = [n.arg(), v[0].arg(), v[1].arg(), Arg::Buffer(x, 0)];
            let mut args = args.to_vec();
            args.extend([Arg::Buffer(row, 0), Arg::Buffer(y, 0)]);
            job.launch(&format!("{}_{from}", cmp.name()), elems(n), &args);
            let want = (0..n)
                .map(|i| {
                    let (a, b) = (vals[i], vals[4 + i % 4]);
                    (match cmp.name() {
                        "eq" => a == b,
                        "ne" => a != b,
                        "lt" => a < b,
                        "le" => a <= b,
                        "gt" => a > b,
                        _ => a >= b,
                    }) as u8
                })
                .collect();
            checks.push((format!("{} {from}", cmp.name()), y, want));
        }
        let y = job.output(5, width(from));
        job.launch(
            &format!("fill_{from}"),
            elems(5),
            &[5usize.arg(), 2.5f64.arg(), Arg::Buffer(y, 0)],
        );
        checks.push((format!("fill {from}"), y, encode(2.5, from).repeat(5)));
    }
    for unit in ["u8", "u16", "u32", "u64"] {
        let w = width(match unit {
            "u8" => "u8",
            "u16" => "f16",
            "u32" => "f32",
            _ => "f64",
        });
        let data: Vec<u8> = (0..n * w).map(|b| (b * 7 + 3) as u8).collect();
        let elem = |i: usize| data[i * w..(i + 1) * w].to_vec();
        let x = job.buffer(data.clone());
        // A contiguous copy of the transposed view.
        let y = job.output(n, w);
        let args = [n.arg(), strided.arg(), Arg::Buffer(x, 0), Arg::Buffer(y, 0)];
        job.launch(&format!("strided_copy_{unit}"), elems(n), &args);
        checks.push((
            format!("strided_copy {unit}"),
            y,
            (0..n).flat_map(|i| elem(t(i))).collect(),
        ));
        // Assigned through the transposed view of a destination.
        let dst = job.output(n, w);
        let contiguous = Layout::contiguous(&[3, 4]);
        let v = pack(&[3, 4], &[&view.strides, &contiguous.strides], "copy_");
        let args = [n.arg(), v[0].arg(), v[1].arg(), Arg::Buffer(dst, 0)];
        let mut args = args.to_vec();
        args.push(Arg::Buffer(x, 0));
        job.launch(&format!("strided_assign_{unit}"), elems(n), &args);
        let mut want = vec![0u8; n * w];
        for i in 0..n {
            want[t(i) * w..(t(i) + 1) * w].copy_from_slice(&elem(i));
        }
        checks.push((format!("strided_assign {unit}"), dst, want));
        // `where` with a broadcast scalar as the other branch.
        let cond: Vec<u8> = (0..n).map(|i| (i % 3 == 0) as u8).collect();
        let c = job.buffer(cond.clone());
        let other = job.buffer(elem(11));
        let y = job.output(n, w);
        let scalar = Layout::contiguous(&[1, 1]).broadcast_to(&[3, 4]);
        let dense = Layout::contiguous(&[3, 4]);
        let v = pack(
            &[3, 4],
            &[&dense.strides, &dense.strides, &scalar.strides],
            "where",
        );
        let mut args = vec![n.arg(), v[0].arg(), v[1].arg(), v[2].arg()];
        args.extend([c, x, other, y].map(|b| Arg::Buffer(b, 0)));
        job.launch(&format!("where_{unit}"), elems(n), &args);
        let want = (0..n)
            .flat_map(|i| if cond[i] == 1 { elem(i) } else { elem(11) })
            .collect();
        checks.push((format!("where {unit}"), y, want));
    }
    let got = copy.run(&job).unwrap();
    for (what, y, want) in checks {
        assert_eq!(got[y], want, "{what}");
    }
}
