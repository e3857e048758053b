//! The macro's layer table against the runtime layers: every row is built by
//! `model!`, whose shape rule fixes the declared output shapes at compile
//! time, and then run; the real output shapes must be the declared ones.
//! A rule that drifted from its layer fails here (or fails to compile).

use tapir::{DType, Device, Tensor, model};

model! {
    /// One field per row of the layer table (some rows twice, with options).
    pub struct Table {
        linear: Linear<4, 3>,
        layer_norm: LayerNorm<4>,
        rms_norm: RMSNorm<4, eps = 1e-6>,
        batch_norm_1d: BatchNorm1d<4>,
        batch_norm_2d: BatchNorm2d<3>,
        dropout: Dropout<0.5>,
        embedding: Embedding<10, 4, padding_idx = 1>,
        conv: Conv2d<3, 4, 3, stride = 2, padding = 1, dilation = 2>,
        conv_grouped: Conv2d<4, 6, 1, groups = 2, bias = false>,
        max_pool: MaxPool2d<3, stride = 2, padding = 1>,
        avg_pool: AvgPool2d<2>,
        adaptive: AdaptiveAvgPool2d<3, 2>,
        flatten: Flatten<1, 2>,
        relu: ReLU,
        gelu: GELU<approximate = "tanh">,
        silu: SiLU,
        tanh: Tanh,
        sigmoid: Sigmoid,
        hardswish: Hardswish,
        leaky: LeakyReLU<0.1>,
        softmax: Softmax<-1>,
        attn: MultiheadAttention<8, 2, batch_first = true>,
        attn_seq_first: MultiheadAttention<8, 4>,
        seq: Sequential<(Linear<4, 6>, ReLU, Linear<6, 2>)>,
    }
    fn forward(
        &self,
        x: [2, 5, 4],
        img: [2, 3, 11, 9],
        ids: [2, 3],
        q: [2, 3, 8],
        kv: [2, 5, 8],
        q_seq: [3, 2, 8],
    ) -> (
        [2, 5, 3], [2, 5, 4], [2, 5, 4], [2, 4], [2, 3, 11, 9], [2, 5, 4], [2, 3, 4],
        [2, 4, 5, 4], [2, 6, 5, 4], [2, 3, 6, 5], [2, 3, 5, 4], [2, 3, 3, 2], [2, 33, 9],
        [2, 5, 4], [2, 5, 4], [2, 5, 4], [2, 5, 4], [2, 5, 4], [2, 5, 4], [2, 5, 4],
        [2, 5, 4], [2, 3, 8], [2, 3, 5], [3, 2, 8], [2, 5, 2],
    ) {
        let (a, w) = self.attn(q, kv, kv);
        let (s, _) = self.attn_seq_first(q_seq, q_seq, q_seq);
        let conv = self.conv(img);
        (
            self.linear(x),
            self.layer_norm(x),
            self.rms_norm(x),
            self.batch_norm_1d(x.select(1, 0)),
            self.batch_norm_2d(img),
            self.dropout(x),
            self.embedding(ids),
            conv,
            self.conv_grouped(conv),
            self.max_pool(img),
            self.avg_pool(img),
            self.adaptive(img),
            self.flatten(img),
            self.relu(x),
            self.gelu(x),
            self.silu(x),
            self.tanh(x),
            self.sigmoid(x),
            self.hardswish(x),
            self.leaky(x),
            self.softmax(x),
            a,
            w,
            s,
            self.seq(x),
        )
    }
}

/// The rows exercised above, by the names the table uses.
const COVERED: &[&str] = &[
    "Linear",
    "LayerNorm",
    "RMSNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "Dropout",
    "Embedding",
    "Conv2d",
    "MaxPool2d",
    "AvgPool2d",
    "AdaptiveAvgPool2d",
    "Flatten",
    "ReLU",
    "GELU",
    "SiLU",
    "Tanh",
    "Sigmoid",
    "Hardswish",
    "LeakyReLU",
    "Softmax",
    "MultiheadAttention",
    "Sequential",
    "Conv1d",
    "GRU",
    "LSTM",
    "TransformerEncoderLayer",
    "SELU",
    "Mish",
    "ReLU6",
    "Hardsigmoid",
    "LogSigmoid",
    "Softsign",
    "Softplus",
    "Tanhshrink",
    "ELU",
    "CELU",
    "Hardtanh",
    "Hardshrink",
    "Softshrink",
    "ConvTranspose2d",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "BatchNorm3d",
    "RNN",
    "ConvTranspose1d",
    "LogSoftmax",
    "Softmin",
    "MaxPool1d",
    "AvgPool1d",
    "AdaptiveAvgPool1d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "CircularPad1d",
    "CircularPad2d",
    "Identity",
    "PixelShuffle",
    "PixelUnshuffle",
    "EmbeddingBag",
    "LPPool1d",
    "LPPool2d",
    "PReLU",
    "Softmax2d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ChannelShuffle",
    "LocalResponseNorm",
    // The volumetric rows: `VolumeTable` below.
    "Conv3d",
    "ConvTranspose3d",
    "MaxPool3d",
    "AvgPool3d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool3d",
    "InstanceNorm3d",
    "ZeroPad3d",
    "ReflectionPad3d",
    "ReplicationPad3d",
    "CircularPad3d",
    "ConstantPad3d",
    "LPPool3d",
];

#[test]
fn every_row_is_covered() {
    let rows: &[&str] = model!(@layer_table);
    let mut rows = rows.to_vec();
    let mut covered = COVERED.to_vec();
    rows.sort();
    covered.sort();
    assert_eq!(rows, covered);
}

#[test]
fn rules_match_the_runtime_layers() {
    let t = Table::new(&Device::Cpu);
    let ids = Tensor::from_vec(vec![0i64, 1, 9, 3, 4, 5], &[2, 3]);
    let out = t.forward(
        &Tensor::randn(&[2, 5, 4]),
        &Tensor::randn(&[2, 3, 11, 9]),
        &ids,
        &Tensor::randn(&[2, 3, 8]),
        &Tensor::randn(&[2, 5, 8]),
        &Tensor::randn(&[3, 2, 8]),
    );
    let shapes: Vec<Vec<usize>> = [
        &out.0, &out.1, &out.2, &out.3, &out.4, &out.5, &out.6, &out.7, &out.8, &out.9, &out.10,
        &out.11, &out.12, &out.13, &out.14, &out.15, &out.16, &out.17, &out.18, &out.19, &out.20,
        &out.21, &out.22, &out.23, &out.24,
    ]
    .iter()
    .map(|t| t.shape().to_vec())
    .collect();
    let declared: Vec<Vec<usize>> = vec![
        vec![2, 5, 3],
        vec![2, 5, 4],
        vec![2, 5, 4],
        vec![2, 4],
        vec![2, 3, 11, 9],
        vec![2, 5, 4],
        vec![2, 3, 4],
        vec![2, 4, 5, 4],
        vec![2, 6, 5, 4],
        vec![2, 3, 6, 5],
        vec![2, 3, 5, 4],
        vec![2, 3, 3, 2],
        vec![2, 33, 9],
        vec![2, 5, 4],
        vec![2, 5, 4],
        vec![2, 5, 4],
        vec![2, 5, 4],
        vec![2, 5, 4],
        vec![2, 5, 4],
        vec![2, 5, 4],
        vec![2, 5, 4],
        vec![2, 3, 8],
        vec![2, 3, 5],
        vec![3, 2, 8],
        vec![2, 5, 2],
    ];
    assert_eq!(shapes, declared);
    assert_eq!(out.6.dtype(), DType::F32);
}

model! {
    /// The sequence rows: Conv1d, GRU and LSTM (with their final states), and
    /// TransformerEncoderLayer, in the layouts PyTorch accepts.
    pub struct SequenceTable {
        conv1d: Conv1d<4, 6, 3, stride = 2, padding = 1>,
        gru: GRU<4, 5>,
        gru_bi: GRU<4, 5, num_layers = 2, batch_first = true, bidirectional = true>,
        lstm: LSTM<4, 3, num_layers = 2>,
        lstm_lazy: LSTM<_, 3, bidirectional = true>,
        encoder: TransformerEncoderLayer<4, 2, dim_feedforward = 8, batch_first = true>,
        encoder_pre: TransformerEncoderLayer<4, 1, 16, 0.0, "gelu", norm_first = true>,
    }
    fn forward(&self, x: [2, 5, 4], seq: [7, 4]) -> (
        [2, 6, 3], [2, 5, 5], [1, 5, 5], [2, 5, 10], [4, 2, 5], [2, 5, 3], [2, 5, 3],
        [2, 5, 3], [7, 6], [2, 3], [2, 5, 4], [2, 5, 4],
    ) {
        let (g, h) = self.gru(x);
        let (gb, hb) = self.gru_bi(x);
        let (l, (lh, lc)) = self.lstm(x);
        let (u, (uh, _)) = self.lstm_lazy(seq);
        (
            self.conv1d(x.transpose(1, 2)),
            g, h, gb, hb, l, lh, lc, u, uh,
            self.encoder(x),
            self.encoder_pre(x),
        )
    }
}

#[test]
fn sequence_rules_match_the_runtime_layers() {
    let t = SequenceTable::new(&Device::Cpu);
    let o = t.forward(&Tensor::randn(&[2, 5, 4]), &Tensor::randn(&[7, 4]));
    let shapes: Vec<Vec<usize>> = [
        &o.0, &o.1, &o.2, &o.3, &o.4, &o.5, &o.6, &o.7, &o.8, &o.9, &o.10, &o.11,
    ]
    .iter()
    .map(|t| t.shape().to_vec())
    .collect();
    let declared: Vec<Vec<usize>> = vec![
        vec![2, 6, 3],
        vec![2, 5, 5],
        vec![1, 5, 5],
        vec![2, 5, 10],
        vec![4, 2, 5],
        vec![2, 5, 3],
        vec![2, 5, 3],
        vec![2, 5, 3],
        vec![7, 6],
        vec![2, 3],
        vec![2, 5, 4],
        vec![2, 5, 4],
    ];
    assert_eq!(shapes, declared);
    let names: Vec<String> = tapir::nn::Module::named_parameters(&t)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n.starts_with("lstm.") || n.starts_with("encoder."))
        .collect();
    assert!(
        names.contains(&"lstm.weight_hh_l1".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"encoder.self_attn.in_proj_weight".to_string()),
        "{names:?}"
    );
}

model! {
    /// A rule applied to const generics: the same model at two sizes.
    pub struct Pyramid<const C: usize, const S: usize> {
        conv: Conv2d<C, { 2 * C }, 3, stride = 2>,
        pool: MaxPool2d<2>,
    }
    fn forward(&self, x: [N, C, S, S]) -> [N, { 2 * C }, { ((S - 3) / 2 + 1) / 2 }, { ((S - 3) / 2 + 1) / 2 }] {
        self.pool(self.conv(x))
    }
}

#[test]
fn symbolic_rules_match_at_several_sizes() {
    let a = Pyramid::<3, 17>::new(&Device::Cpu).forward(&Tensor::randn(&[2, 3, 17, 17]));
    assert_eq!(a.shape(), &[2, 6, 4, 4]);
    let b = Pyramid::<1, 32>::new(&Device::Cpu).forward(&Tensor::randn(&[1, 1, 32, 32]));
    assert_eq!(b.shape(), &[1, 2, 7, 7]);
}

model! {
    /// The activation rows added with the PyTorch activation set: each
    /// keeps its input's shape; parameters as PyTorch names them.
    pub struct ActivationTable {
        selu: SELU,
        mish: Mish,
        relu6: ReLU6,
        hardsigmoid: Hardsigmoid,
        logsigmoid: LogSigmoid,
        softsign: Softsign,
        softplus: Softplus,
        tanhshrink: Tanhshrink,
        elu: ELU<alpha = 0.5>,
        celu: CELU,
        hardtanh: Hardtanh<min_val = -2.0, max_val = 2.0>,
        hardshrink: Hardshrink<0.25>,
        softshrink: Softshrink,
    }
    fn forward(&self, x: [2, 3]) -> (
        [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3],
        [2, 3], [2, 3], [2, 3], [2, 3], [2, 3], [2, 3],
    ) {
        (
            self.selu(x), self.mish(x), self.relu6(x), self.hardsigmoid(x),
            self.logsigmoid(x), self.softsign(x), self.softplus(x), self.tanhshrink(x),
            self.elu(x), self.celu(x), self.hardtanh(x), self.hardshrink(x),
            self.softshrink(x),
        )
    }
}

#[test]
fn activation_rows_build_the_runtime_modules_with_their_parameters() {
    let t = ActivationTable::new(&Device::Cpu);
    assert_eq!(t.elu.alpha, 0.5);
    assert_eq!(t.celu.alpha, 1.0);
    assert_eq!((t.hardtanh.min_val, t.hardtanh.max_val), (-2.0, 2.0));
    assert_eq!((t.hardshrink.lambd, t.softshrink.lambd), (0.25, 0.5));
    let x = Tensor::from_vec(vec![-3.0f32, -0.3, 0.0, 0.2, 1.0, 3.0], &[2, 3]);
    let out = t.forward(&x);
    assert_eq!(out.2.to_vec::<f32>(), x.relu6().to_vec::<f32>());
    assert_eq!(out.8.to_vec::<f32>(), x.elu(0.5).to_vec::<f32>());
    assert_eq!(out.10.to_vec::<f32>(), vec![-2.0, -0.3, 0.0, 0.2, 1.0, 2.0]);
    assert_eq!(out.11.to_vec::<f32>(), vec![-3.0, -0.3, 0.0, 0.0, 1.0, 3.0]);
    assert_eq!(out.0.shape(), &[2, 3]);
    // Reprs as torch 2.15 prints them.
    use tapir::nn::Module;
    let reprs: Vec<String> = [
        &t.elu as &dyn Module,
        &t.celu,
        &t.hardtanh,
        &t.hardshrink,
        &t.softshrink,
        &t.softplus,
        &t.selu,
        &t.relu6,
        &tapir::nn::GLU::default(),
        &tapir::nn::Threshold {
            threshold: 0.1,
            value: 20.0,
        },
    ]
    .iter()
    .map(|m| m.repr())
    .collect();
    assert_eq!(
        reprs,
        [
            "ELU(alpha=0.5)",
            "CELU(alpha=1.0)",
            "Hardtanh(min_val=-2.0, max_val=2.0)",
            "Hardshrink(0.25)",
            "Softshrink(0.5)",
            "Softplus(beta=1.0, threshold=20.0)",
            "SELU()",
            "ReLU6()",
            "GLU(dim=-1)",
            "Threshold(threshold=0.1, value=20.0)",
        ]
    );
}

model! {
    /// The decoder rows: transposed convolutions (the output size grows by
    /// the stride; output_padding picks among the sizes a stride allows;
    /// channels inferred with `_`), group norm and instance norm, batched
    /// and not, at symbolic sizes.
    pub struct DecoderTable<const C: usize, const S: usize> {
        up: ConvTranspose2d<C, 4, 3, stride = 2, padding = 1, output_padding = 1>,
        up_lazy: ConvTranspose2d<_, 6, 2, groups = 2, dilation = 3, bias = false>,
        gn: GroupNorm<2, 4>,
        gn_lazy: GroupNorm<3, _, eps = 1e-3, affine = false>,
        inst: InstanceNorm2d<4, affine = true>,
        inst_1d: InstanceNorm1d<_>,
    }
    fn forward(&self, x: [N, C, S, S], seq: [4, L]) -> (
        [N, 4, { 2 * S }, { 2 * S }], [N, 6, { 2 * S + 3 }, { 2 * S + 3 }], [4, L],
    ) {
        let h = self.inst(self.gn(self.up(x)));
        let y = self.gn_lazy(self.up_lazy(h));
        (h, y, self.inst_1d(seq))
    }
}

#[test]
fn decoder_rules_match_the_runtime_layers() {
    let t = DecoderTable::<3, 5>::new(&Device::Cpu);
    let (h, y, s) = t.forward(&Tensor::randn(&[2, 3, 5, 5]), &Tensor::randn(&[4, 7]));
    assert_eq!(
        (h.shape(), y.shape(), s.shape()),
        (&[2, 4, 10, 10][..], &[2, 6, 13, 13][..], &[4, 7][..])
    );
    assert_eq!(t.up_lazy.weight.shape(), &[4, 3, 2, 2]);
    assert!(t.up_lazy.bias.is_none() && t.gn_lazy.weight.is_none());
    assert_eq!(
        (t.gn_lazy.num_groups, t.gn_lazy.num_channels, t.gn_lazy.eps),
        (3, 6, 1e-3)
    );
    assert!(t.inst.weight.is_some() && t.inst_1d.weight.is_none());
}

model! {
    /// The norms' keyword arguments: a cumulative, non-affine 3-d batch
    /// norm, an untracked one with its channels inferred, and an instance
    /// norm with running statistics.
    pub struct NormTable<const C: usize> {
        bn3: BatchNorm3d<C, momentum = None, affine = false>,
        bn_lazy: BatchNorm2d<_, eps = 1e-3, track_running_stats = false>,
        inst: InstanceNorm1d<4, momentum = 0.5, track_running_stats = true>,
    }
    fn forward(&self, vol: [N, C, D, H, W], img: [N, 5, H, W], seq: [N, 4, L]) -> (
        [N, C, D, H, W], [N, 5, H, W], [N, 4, L],
    ) {
        (self.bn3(vol), self.bn_lazy(img), self.inst(seq))
    }
}

#[test]
fn norm_keyword_arguments_reach_the_runtime_layers() {
    use tapir::nn::Module;
    let t = NormTable::<2>::new(&Device::Cpu);
    let (v, i, s) = t.forward(
        &Tensor::randn(&[2, 2, 3, 4, 4]),
        &Tensor::randn(&[2, 5, 4, 4]),
        &Tensor::randn(&[2, 4, 6]),
    );
    assert_eq!(
        (v.shape(), i.shape(), s.shape()),
        (&[2, 2, 3, 4, 4][..], &[2, 5, 4, 4][..], &[2, 4, 6][..])
    );
    assert_eq!(
        (t.bn3.repr(), t.bn_lazy.repr(), t.inst.repr()),
        (
            "BatchNorm3d(2, eps=1e-05, momentum=None, affine=False, bias=False, track_running_stats=True)".to_string(),
            "BatchNorm2d(5, eps=0.001, momentum=0.1, affine=True, bias=True, track_running_stats=False)".to_string(),
            "InstanceNorm1d(4, eps=1e-05, momentum=0.5, affine=False, bias=False, track_running_stats=True)".to_string(),
        )
    );
    // Trained once: the cumulative count and the instance norm's statistics moved.
    assert_eq!(t.bn3.num_batches_tracked.as_ref().unwrap().item::<i64>(), 1);
    assert_ne!(
        t.inst.running_mean.as_ref().unwrap().to_vec::<f32>(),
        vec![0.0; 4]
    );
}

model! {
    /// The pooling rows' options: ceil_mode at a number (the last window
    /// dropped when it would start in the padding) and at a symbolic size,
    /// the 1-D pools, unbatched input, and the adaptive pools.
    pub struct PoolTable {
        max_ceil: MaxPool2d<3, stride = 2, padding = 1, ceil_mode = true>,
        avg_ceil: AvgPool2d<2, stride = 2, ceil_mode = true, count_include_pad = false>,
        avg_div: AvgPool2d<2, divisor_override = 3>,
        max_1d: MaxPool1d<3, 2, 1, dilation = 2, ceil_mode = true>,
        avg_1d: AvgPool1d<4, stride = 3, padding = 2, ceil_mode = true>,
        adaptive_avg_1d: AdaptiveAvgPool1d<4>,
        adaptive_max_1d: AdaptiveMaxPool1d<3>,
        adaptive_max: AdaptiveMaxPool2d<2, 3>,
    }
    fn forward(&self, img: [N, 3, 5, H], seq: [N, 2, 10], plane: [3, 7, 7]) -> (
        [N, 3, 3, { H / 2 + 1 }], [N, 3, 3, { (H - 1) / 2 + 1 }], [3, 3, 3],
        [N, 2, 5], [N, 2, 4], [N, 2, 4], [2, 3], [N, 3, 2, 3],
    ) {
        (
            self.max_ceil(img),
            self.avg_ceil(img),
            self.avg_div(plane),
            self.max_1d(seq),
            self.avg_1d(seq),
            self.adaptive_avg_1d(seq),
            self.adaptive_max_1d(seq.select(0, 0)),
            self.adaptive_max(img),
        )
    }
}

#[test]
fn pooling_rules_match_the_runtime_layers() {
    let t = PoolTable::new(&Device::Cpu);
    for h in [6, 7] {
        let img = Tensor::randn(&[2, 3, 5, h]);
        let out = t.forward(
            &img,
            &Tensor::randn(&[2, 2, 10]),
            &Tensor::randn(&[3, 7, 7]),
        );
        let shapes = [
            &out.0, &out.1, &out.2, &out.3, &out.4, &out.5, &out.6, &out.7,
        ]
        .map(|t| t.shape().to_vec());
        let (hm, ha) = (h / 2 + 1, (h - 1) / 2 + 1);
        assert_eq!(
            shapes,
            [
                vec![2, 3, 3, hm],
                vec![2, 3, 3, ha],
                vec![3, 3, 3],
                vec![2, 2, 5],
                vec![2, 2, 4],
                vec![2, 2, 4],
                vec![2, 3],
                vec![2, 3, 2, 3],
            ]
        );
    }
}

model! {
    /// The padding rows (each spatial dim grows by twice the padding) and a
    /// convolution whose padding reflects the input.
    pub struct PadTable<const P: usize> {
        reflect: ReflectionPad2d<P>,
        replicate: ReplicationPad2d<1>,
        circular: CircularPad2d<2>,
        zero: ZeroPad2d<1>,
        reflect_1d: ReflectionPad1d<2>,
        replicate_1d: ReplicationPad1d<P>,
        circular_1d: CircularPad1d<1>,
        zero_1d: ZeroPad1d<3>,
        conv: Conv2d<2, 2, 3, padding = 1, padding_mode = "reflect">,
    }
    fn forward(&self, img: [N, 2, H, W], seq: [2, L]) -> (
        [N, 2, { H + 2 * P + 8 }, { W + 2 * P + 8 }], [2, { L + 2 * P + 12 }],
    ) {
        let img = self.zero(self.circular(self.replicate(self.reflect(self.conv(img)))));
        (img, self.zero_1d(self.circular_1d(self.replicate_1d(self.reflect_1d(seq)))))
    }
}

#[test]
fn padding_rules_match_the_runtime_layers() {
    use tapir::nn::Module;
    let t = PadTable::<2>::new(&Device::Cpu);
    let (img, seq) = t.forward(&Tensor::randn(&[3, 2, 4, 5]), &Tensor::randn(&[2, 6]));
    assert_eq!(
        (img.shape(), seq.shape()),
        (&[3, 2, 16, 17][..], &[2, 22][..])
    );
    assert!(
        t.conv.repr().ends_with("padding_mode=reflect)"),
        "{}",
        t.conv.repr()
    );
}

model! {
    /// The RNN row: `nonlinearity` in PyTorch's place (after num_layers).
    pub struct RnnTable {
        rnn: RNN<4, 6, 2, "relu", batch_first = true>,
        tanh: RNN<4, 3>,
    }
    fn forward(&self, x: [N, 5, 4], seq: [7, 4]) -> ([N, 5, 6], [2, N, 6], [7, 3]) {
        let (y, h) = self.rnn(x);
        let (s, _) = self.tanh(seq);
        (y, h, s)
    }
}

#[test]
fn the_rnn_row_builds_the_runtime_layer_with_its_nonlinearity() {
    let t = RnnTable::new(&Device::Cpu);
    let (y, h, s) = t.forward(&Tensor::randn(&[3, 5, 4]), &Tensor::randn(&[7, 4]));
    assert_eq!(
        (y.shape(), h.shape(), s.shape()),
        (&[3, 5, 6][..], &[2, 3, 6][..], &[7, 3][..])
    );
    assert!(
        y.min().item::<f32>() >= 0.0,
        "ReLU outputs are non-negative"
    );
}

model! {
    /// ConvTranspose1d: the length grows by the stride, batched or not.
    pub struct UpTable {
        up: ConvTranspose1d<4, 6, 3, stride = 2, padding = 1, output_padding = 1>,
        up_lazy: ConvTranspose1d<_, 2, 2>,
    }
    fn forward(&self, x: [N, 4, L], seq: [3, L]) -> ([N, 6, { 2 * L }], [2, { L + 1 }]) {
        (self.up(x), self.up_lazy(seq))
    }
}

#[test]
fn the_transposed_1d_row_matches_the_runtime_layer() {
    let t = UpTable::new(&Device::Cpu);
    let (y, s) = t.forward(&Tensor::randn(&[2, 4, 5]), &Tensor::randn(&[3, 5]));
    assert_eq!((y.shape(), s.shape()), (&[2, 6, 10][..], &[2, 6][..]));
    assert_eq!(t.up_lazy.weight.shape(), &[3, 2, 2]);
}

model! {
    /// The softmax family's rows.
    pub struct SoftTable {
        log: LogSoftmax<-1>,
        min: Softmin<1>,
    }
    fn forward(&self, x: [N, 4]) -> ([N, 4], [N, 4]) {
        (self.log(x), self.min(x))
    }
}

#[test]
fn softmax_rows_build_their_runtime_layers() {
    let x = Tensor::randn(&[3, 4]);
    let (log, min) = SoftTable::new(&Device::Cpu).forward(&x);
    let close = |a: &Tensor, b: &Tensor| (a - b).abs().max().item::<f32>() < 1e-6;
    assert!(close(&log, &x.log_softmax(-1)));
    assert!(close(&min, &x.neg().softmax(1)));
}

model! {
    /// Sub-pixel upsampling: a convolution to `4 C` channels shuffled into a
    /// twice-larger image, unshuffled back, and an identity.
    pub struct SubPixel<const C: usize> {
        conv: Conv2d<C, { 4 * C }, 3, padding = 1>,
        up: PixelShuffle<2>,
        down: PixelUnshuffle<2>,
        skip: Identity,
    }
    fn forward(&self, x: [N, C, H, W]) -> ([N, C, { 2 * H }, { 2 * W }], [N, { 4 * C }, H, W]) {
        let up = self.up(self.conv(x));
        (self.skip(up), self.down(up))
    }
}

#[test]
fn pixel_shuffle_rules_match_the_runtime_layers() {
    let t = SubPixel::<3>::new(&Device::Cpu);
    let (up, down) = t.forward(&Tensor::randn(&[2, 3, 5, 7]));
    assert_eq!(
        (up.shape(), down.shape()),
        (&[2, 3, 10, 14][..], &[2, 12, 5, 7][..])
    );
}

model! {
    /// The volumetric rows, each spatial dim by its own formula.
    pub struct VolumeTable {
        conv: Conv3d<2, 3, 3, stride = 2, padding = 1>,
        up: ConvTranspose3d<2, 4, 2, stride = 2, output_padding = 1>,
        max: MaxPool3d<2, stride = 1, dilation = 2>,
        avg: AvgPool3d<3, stride = 2, padding = 1, ceil_mode = true>,
        adaptive_avg: AdaptiveAvgPool3d<2, output_width = 3>,
        adaptive_max: AdaptiveMaxPool3d<1>,
        inst: InstanceNorm3d<2>,
        zero: ZeroPad3d<1>,
        reflect: ReflectionPad3d<2>,
        replicate: ReplicationPad3d<1>,
        circular: CircularPad3d<1>,
        constant: ConstantPad3d<2, 0.5>,
        lp: LPPool3d<2, 2>,
    }
    fn forward(&self, x: [N, 2, 5, 6, 7]) -> (
        [N, 3, 3, 3, 4], [N, 4, 11, 13, 15], [N, 2, 3, 4, 5], [N, 2, 3, 4, 4],
        [N, 2, 2, 2, 3], [N, 2, 1, 1, 1], [N, 2, 5, 6, 7], [N, 2, 7, 8, 9],
        [N, 2, 9, 10, 11], [N, 2, 7, 8, 9], [N, 2, 7, 8, 9], [N, 2, 9, 10, 11],
        [N, 2, 2, 3, 3],
    ) {
        (
            self.conv(x), self.up(x), self.max(x), self.avg(x), self.adaptive_avg(x),
            self.adaptive_max(x), self.inst(x), self.zero(x), self.reflect(x),
            self.replicate(x), self.circular(x), self.constant(x), self.lp(x),
        )
    }
}

#[test]
fn volume_rules_match_the_runtime_layers() {
    let t = VolumeTable::new(&Device::Cpu);
    let o = t.forward(&Tensor::randn(&[2, 2, 5, 6, 7]));
    let shapes = [
        &o.0, &o.1, &o.2, &o.3, &o.4, &o.5, &o.6, &o.7, &o.8, &o.9, &o.10, &o.11, &o.12,
    ]
    .map(|t| t.shape().to_vec());
    let want: [&[usize]; 13] = [
        &[2, 3, 3, 3, 4],
        &[2, 4, 11, 13, 15],
        &[2, 2, 3, 4, 5],
        &[2, 2, 3, 4, 4],
        &[2, 2, 2, 2, 3],
        &[2, 2, 1, 1, 1],
        &[2, 2, 5, 6, 7],
        &[2, 2, 7, 8, 9],
        &[2, 2, 9, 10, 11],
        &[2, 2, 7, 8, 9],
        &[2, 2, 7, 8, 9],
        &[2, 2, 9, 10, 11],
        &[2, 2, 2, 3, 3],
    ];
    assert_eq!(shapes, want.map(|s| s.to_vec()));
}
