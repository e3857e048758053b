//! The `scatter` workload: a graph network's aggregation, as
//! `benches/torch_ref.py`'s `bench_scatter` builds it. 100k edges between
//! 10k nodes of 64 features: gather each edge's source row, then combine
//! the rows at their destinations by `index_add` (a sum) or by
//! `scatter_reduce` amax (the index expanded to the rows), forward and
//! backward of the sum.

use crate::Args;
use crate::measure::{record, time_loop};
use crate::workloads::scaled;
use tapir::ScatterReduce;
use tapir::prelude::*;

/// The workload's variants.
pub(crate) const SCATTER_VARIANTS: [&str; 2] = ["index_add_e100k", "scatter_amax_e100k"];

pub(crate) fn bench_scatter(args: &Args, variant: &str) -> String {
    let (nodes, edges, features) = (10_000usize, 100_000usize, 64usize);
    let g = Generator::new(args.seed);
    let dev = args.device;
    let x = Tensor::randn_with(&[nodes, features], &g)
        .to(dev)
        .unwrap()
        .requires_grad_(true);
    let ends = || {
        Tensor::randint_with(0, nodes as i64, &[edges], &g)
            .to(dev)
            .unwrap()
    };
    let (src, dst) = (ends(), ends());
    let spread = dst.reshape(&[-1, 1]).expand(&[edges, features]);
    let zeros = Tensor::zeros_on(&[nodes, features], DType::F32, dev);
    let step = || {
        x.set_grad(None);
        let rows = x.index_select(0, &src);
        let out = if variant == "index_add_e100k" {
            zeros.index_add(0, &dst, &rows, 1.0)
        } else {
            zeros.scatter_reduce(0, &spread, &rows, ScatterReduce::Amax, false)
        };
        out.sum().backward();
    };
    let (warm, steps) = scaled(args, "scatter");
    let t = time_loop(dev, step, warm, steps);
    record(
        "scatter",
        variant,
        warm,
        &t,
        edges as f64,
        &[
            ("edges", edges.to_string()),
            ("nodes", nodes.to_string()),
            ("features", features.to_string()),
        ],
    )
}
