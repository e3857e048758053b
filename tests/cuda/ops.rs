//! Every op and its gradient on the GPU against the CPU.

use super::*;
use crate::training::{train, train_char_lm};

/// An op over its inputs.
type Op = Box<dyn Fn(&[Tensor]) -> Tensor>;

/// One op checked on both devices: the inputs (shape and whether it is an
/// int64 index with that many classes) and the op.
struct Case {
    name: &'static str,
    inputs: Vec<(Vec<usize>, Option<i64>)>,
    op: Op,
}

fn case(
    name: &'static str,
    inputs: &[&[usize]],
    op: impl Fn(&[Tensor]) -> Tensor + 'static,
) -> Case {
    Case {
        name,
        inputs: inputs.iter().map(|s| (s.to_vec(), None)).collect(),
        op: Box::new(op),
    }
}

fn with_index(mut c: Case, shape: &[usize], classes: i64) -> Case {
    c.inputs.push((shape.to_vec(), Some(classes)));
    c
}

fn cases() -> Vec<Case> {
    let conv = Conv2dOptions::default();
    vec![
        case("add_broadcast", &[&[4, 5], &[5]], |x| &x[0] + &x[1]),
        case("sub", &[&[4, 5], &[4, 5]], |x| &x[0] - &x[1]),
        case("mul_broadcast", &[&[3, 1, 5], &[4, 5]], |x| &x[0] * &x[1]),
        case("div", &[&[4, 5], &[4, 5]], |x| &x[0] / &(&x[1].abs() + 0.5)),
        case("maximum", &[&[4, 5], &[4, 5]], |x| x[0].maximum(&x[1])),
        case("scalar_ops", &[&[6]], |x| &(&x[0] * 2.5) + 1.0),
        case("powf_clamp", &[&[6]], |x| x[0].powf(3.0).clamp(-0.5, 0.5)),
        case("exp_log", &[&[7]], |x| {
            (&x[0].abs() + 1.0).log() + x[0].exp()
        }),
        case("sqrt_tanh_sigmoid", &[&[7]], |x| {
            &(&x[0].abs() + 0.1).sqrt() + &(&x[0].tanh() * &x[0].sigmoid())
        }),
        case("relu_gelu_silu", &[&[9]], |x| {
            &(&x[0].relu() + &x[0].gelu()) + &x[0].silu()
        }),
        case("matmul", &[&[3, 4], &[4, 5]], |x| x[0].matmul(&x[1])),
        case("matmul_transposed", &[&[4, 3], &[5, 4]], |x| {
            x[0].t().matmul(&x[1].t())
        }),
        case("bmm", &[&[2, 3, 4], &[2, 4, 5]], |x| x[0].matmul(&x[1])),
        case("matmul_broadcast", &[&[2, 3, 4], &[4, 5]], |x| {
            x[0].matmul(&x[1])
        }),
        case("sums", &[&[3, 4, 5]], |x| {
            &(&x[0].sum_dim(1, false).sum_dim(0, true) + &x[0].mean()) + &x[0].norm(2.0)
        }),
        case("softmax", &[&[4, 7]], |x| {
            &x[0].softmax(-1) + &x[0].log_softmax(0)
        }),
        case("layer_norm", &[&[4, 6], &[6], &[6]], |x| {
            x[0].layer_norm(&[6], Some(&x[1]), Some(&x[2]), 1e-5)
        }),
        case("layer_norm_plain_3d", &[&[2, 3, 6]], |x| {
            x[0].layer_norm(&[6], None, None, 1e-5)
        }),
        // Enough rows for several chunks of the column sums that give a
        // broadcast operand's gradient and LayerNorm's weight and bias
        // gradients, and columns past one block of 32.
        case("bias_gradient_over_many_rows", &[&[300, 70], &[70]], |x| {
            &x[0] * &x[1]
        }),
        case("layer_norm_many_rows", &[&[3, 70, 40], &[40], &[40]], |x| {
            x[0].layer_norm(&[40], Some(&x[1]), Some(&x[2]), 1e-5)
        }),
        with_index(
            case("cross_entropy", &[&[6, 5]], |x| cross_entropy(&x[0], &x[1])),
            &[6],
            5,
        ),
        with_index(
            case("embedding", &[&[7, 3]], |x| x[0].embedding(&x[1])),
            &[2, 4],
            7,
        ),
        with_index(
            case("gather", &[&[4, 5]], |x| x[0].gather(1, &x[1])),
            &[4, 2],
            5,
        ),
        with_index(
            case("index_select", &[&[4, 5]], |x| x[0].index_select(1, &x[1])),
            &[3],
            5,
        ),
        case("cat_stack", &[&[2, 3], &[2, 3]], |x| {
            &Tensor::cat(&[&x[0], &x[1]], 1).sum_dim(1, true)
                + &Tensor::stack(&[&x[0], &x[1]], 0)
                    .sum_dim(0, false)
                    .sum_dim(1, true)
        }),
        case("views", &[&[2, 3, 4]], |x| {
            x[0].permute(&[2, 0, 1])
                .contiguous()
                .reshape(&[4, 6])
                .narrow(1, 1, 3)
                * 3.0
        }),
        case("where_compare", &[&[4, 5], &[4, 5]], |x| {
            let m = x[0].gt(&x[1]);
            &Tensor::where_(&m, &x[0], &x[1]) + &x[0].masked_fill(&m, 0.5)
        }),
        case("max_dim", &[&[4, 5]], |x| x[0].max_dim(1, false).0),
        case("conv2d", &[&[2, 3, 6, 6], &[4, 3, 3, 3], &[4]], move |x| {
            x[0].conv2d(&x[1], Some(&x[2]), conv.padding(1))
        }),
        case("pools", &[&[1, 2, 6, 6]], |x| {
            &x[0].max_pool2d((2, 2), (2, 2), (0, 0), (1, 1))
                + &x[0].avg_pool2d((2, 2), (2, 2), (0, 0))
        }),
        // Their backward passes: scatter_add and index_add, in f32 then rounded.
        with_index(
            case("half_gather_embedding", &[&[7, 5]], |x| {
                let h = x[0].to_dtype(DType::BF16);
                &h.gather(1, &x[1]).to_dtype(DType::F32)
                    + &h.embedding(&x[1]).to_dtype(DType::F32).sum_dim(2, false)
            }),
            &[7, 2],
            5,
        ),
        case("half_types", &[&[4, 5]], |x| {
            &x[0].to_dtype(DType::F16).exp().to_dtype(DType::F32)
                + &x[0].to_dtype(DType::BF16).tanh().to_dtype(DType::F32)
        }),
    ]
}

/// Runs `c` on the CPU and on `device`, comparing outputs and the gradients
/// of every float input.
fn check(c: &Case, device: Device) -> Result<(), String> {
    let make = |on: Device| -> Vec<Tensor> {
        c.inputs
            .iter()
            .enumerate()
            .map(|(k, (shape, classes))| {
                let n: usize = shape.iter().product();
                let t = match classes {
                    Some(m) => Tensor::from_vec(
                        (0..n).map(|i| (i as i64 * 3 + k as i64) % m).collect(),
                        shape,
                    ),
                    None => Tensor::from_vec(values(n, k as u64 + 1), shape),
                };
                let t = t.to(on).expect("usable device");
                if classes.is_some() {
                    t
                } else {
                    t.requires_grad_(true)
                }
            })
            .collect()
    };
    let (xc, xg) = (make(Device::Cpu), make(device));
    let (yc, yg) = ((c.op)(&xc), (c.op)(&xg));
    if !yc.to_vec::<f64>().iter().all(|v| v.is_finite()) {
        return Err(format!("{}: the CPU output is not finite", c.name));
    }
    if yg.device() != device {
        return Err(format!(
            "{}: output on {}, not {device}",
            c.name,
            yg.device()
        ));
    }
    close(&format!("{} output", c.name), &yg, &yc, 1e-4, 1e-4)?;
    let w = Tensor::from_vec(values(yc.numel(), 99), yc.shape());
    (&yc * &w).sum().backward();
    (&yg * &w.to(device).unwrap()).sum().backward();
    for (k, (a, b)) in xc.iter().zip(&xg).enumerate() {
        if a.requires_grad() {
            let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
            if gb.device() != device {
                return Err(format!("{}: grad {k} on {}", c.name, gb.device()));
            }
            close(&format!("{} grad {k}", c.name), &gb, &ga, 1e-4, 1e-4)?;
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn every_op_and_its_gradient_match_the_cpu() {
    let Some(device) = gpu() else { return };
    let failures: Vec<String> = cases()
        .iter()
        .filter_map(|c| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(c, device)))
                .unwrap_or_else(|p| {
                    Err(format!(
                        "{}: panicked: {:?}",
                        c.name,
                        p.downcast_ref::<String>()
                    ))
                })
                .err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The op cases themselves run (CPU against CPU), so a GPU run fails only
/// on the GPU's account; their outputs are finite and their gradients exist.
#[test]
fn the_op_cases_are_well_formed() {
    for c in cases() {
        check(&c, Device::Cpu).unwrap();
    }
    let (losses, _) = train(Device::Cpu, DType::F32);
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(losses[9] < losses[0], "the loss falls: {losses:?}");
    let lm = train_char_lm(Device::Cpu);
    assert!(lm[4] < lm[0], "the transformer's loss falls: {lm:?}");
}
