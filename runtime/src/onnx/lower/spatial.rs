//! The spatial family's ONNX lowering: convolutions (1-D to 3-D, and
//! transposed), max and average pooling, and `interpolate` as Resize.

use super::{Lowered, OpView};
use crate::onnx::builder::{Builder, float, int, ints, string};

pub(super) fn conv(b: &mut Builder, op: &OpView) -> Lowered {
    let w = op.in_dims[1].as_ref().ok_or("no weight")?;
    let (p, s, d) = (op.ints("padding"), op.ints("stride"), op.ints("dilation"));
    let mut ins = vec![op.x(0), op.x(1)];
    ins.extend(op.inputs.get(2).and_then(|v| v.as_deref()));
    // ONNX pads list every dim's start, then every dim's end.
    let kernel: Vec<i64> = w.0[2..].iter().map(|&k| k as i64).collect();
    let mut attrs = vec![
        ints("kernel_shape", &kernel),
        ints("strides", &s),
        ints("pads", &[p.clone(), p].concat()),
        ints("dilations", &d),
        int("group", op.int("groups")),
    ];
    let onnx = if op.name.starts_with("conv_transpose") {
        attrs.push(ints("output_padding", &op.ints("output_padding")));
        "ConvTranspose"
    } else {
        "Conv"
    };
    b.node(onnx, &ins, &[op.out()], attrs);
    Ok(())
}

pub(super) fn pool(b: &mut Builder, op: &OpView) -> Lowered {
    let (k, s, p) = (op.ints("kernel"), op.ints("stride"), op.ints("padding"));
    let mut attrs = vec![
        ints("kernel_shape", &k),
        ints("strides", &s),
        ints("pads", &[p.clone(), p].concat()),
    ];
    attrs.push(int("ceil_mode", op.int("ceil_mode")));
    let onnx = match op.name {
        "max_pool2d" | "max_pool3d" => {
            attrs.push(ints("dilations", &op.ints("dilation")));
            "MaxPool"
        }
        _ => {
            if op.int("divisor_override") > 0 {
                return op.fail("AveragePool has no divisor_override");
            }
            attrs.push(int("count_include_pad", op.int("count_include_pad")));
            "AveragePool"
        }
    };
    b.node(onnx, &[op.x(0)], &[op.out()], attrs);
    Ok(())
}

/// `interpolate` as Resize, with the coordinate transform PyTorch's own
/// exporter picks for each mode: the output's spatial size after the
/// input's batch and channels, or the scales when a scale factor was given
/// (whose reciprocal PyTorch's source index uses).
pub(super) fn resize(b: &mut Builder, op: &OpView) -> Lowered {
    use crate::nn::InterpolateMode as M;
    let corners = op.int("align_corners") == 1;
    let smooth = if corners {
        "align_corners"
    } else {
        "pytorch_half_pixel"
    };
    let (mode, coords) = match M::from_code(op.int("mode")) {
        M::Nearest => ("nearest", "asymmetric"),
        // floor((j + 0.5) n / m) is rounding (j + 0.5) n / m - 0.5 up at ties.
        M::NearestExact => ("nearest", "half_pixel"),
        M::Linear | M::Bilinear | M::Trilinear => ("linear", smooth),
        M::Bicubic => ("cubic", smooth),
        M::Area => return op.fail("its area mode (adaptive average pooling) has no Resize form"),
    };
    let attrs = vec![
        string("mode", mode),
        string("coordinate_transformation_mode", coords),
        string(
            "nearest_mode",
            if coords == "half_pixel" {
                "round_prefer_ceil"
            } else {
                "floor"
            },
        ),
        float("cubic_coeff_a", -0.75),
    ];
    let scales: Vec<f64> = ["scale0", "scale1", "scale2"]
        .iter()
        .map(|k| op.float(k))
        .take_while(|&f| f > 0.0)
        .collect();
    if scales.is_empty() {
        let shape = b.tmp("Shape", &[op.x(0)], vec![]);
        let (starts, ends) = (b.vec_i64(&[0]), b.vec_i64(&[2]));
        let head = b.tmp("Slice", &[&shape, &starts, &ends], vec![]);
        let tail = b.vec_i64(&op.ints("size"));
        let sizes = b.tmp("Concat", &[&head, &tail], vec![int("axis", 0)]);
        b.node("Resize", &[op.x(0), "", "", &sizes], &[op.out()], attrs);
    } else {
        let all: Vec<f64> = [1.0, 1.0].into_iter().chain(scales).collect();
        let scales = b.vec_f32(&all);
        b.node("Resize", &[op.x(0), "", &scales], &[op.out()], attrs);
    }
    Ok(())
}
