//! The Philox4x32-10 kernels (`cu/random.cu`) and `arange` (`cu/copy.cu`),
//! emulated with the launchers' shapes (`launch/movement.rs`), against
//! their CPU twins, with the GPU twin test's cases.

use super::rows::close;
use super::{Arg, Emulator, Job, Value, floats_from};
use crate::cpu::{arange_f32, arange_i64, philox_normal, philox_uniform};
use crate::cuda::launch::elems;

#[test]
fn emulated_philox_draws_match_the_cpu_twin() {
    let random = Emulator::module("random").unwrap();
    // An offset that is not a multiple of 4 and a length that crosses blocks.
    let (n, seed, offset): (usize, u64, u64) = (10_001, 0x1234_5678_9abc_def0, 4_294_967_294);
    let mut job = Job::default();
    let [u, z] = [0; 2].map(|_| job.output(n, 4));
    for (name, y) in [("philox_uniform_f32", u), ("philox_normal_f32", z)] {
        let args = [n.arg(), seed.arg(), offset.arg(), Arg::Buffer(y, 0)];
        job.launch(name, elems(n), &args);
    }
    let got = random.run(&job).unwrap();
    // Uniform draws are exact: integer bits scaled by a power of two.
    let want = philox_uniform(seed, offset, n);
    assert_eq!(floats_from(&got[u], "f32"), want, "philox uniform");
    // Normal draws go through logf, sinf and cosf: a few ulp apart.
    let want = philox_normal(seed, offset, n);
    close("philox normal", &floats_from(&got[z], "f32"), &want, 2e-6);
}

#[test]
fn emulated_arange_matches_the_cpu_twin() {
    let copy = Emulator::module("copy").unwrap();
    let n = 100_003;
    let mut job = Job::default();
    let (ints, floats) = (job.output(n, 8), job.output(n, 4));
    let args = [n.arg(), (-7i64).arg(), 3i64.arg(), Arg::Buffer(ints, 0)];
    job.launch("arange_i64", elems(n), &args);
    let args = [
        n.arg(),
        0.1f64.arg(),
        0.003f64.arg(),
        Arg::Buffer(floats, 0),
    ];
    job.launch("arange_f32", elems(n), &args);
    let got = copy.run(&job).unwrap();
    let got_ints: Vec<i64> = got[ints]
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got_ints, arange_i64(n, -7, 3));
    // Computed in f64 and rounded once on both: bit for bit.
    let got_floats = floats_from(&got[floats], "f32");
    assert_eq!(got_floats, arange_f32(n, 0.1, 0.003));
}
