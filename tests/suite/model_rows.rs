//! The rows added after the first layer table (`layer_table.rs`): built by
//! `model!`, run, their shapes the declared ones and their reprs PyTorch's.

use tapir::nn::Module;
use tapir::{Device, Tensor};

tapir::model! {
    /// The rows: bags of a `[bags, n]` grid, embeddings with a max norm,
    /// and LP pools (ceil_mode at a symbolic width, unbatched input).
    pub struct BagTable {
        bag: EmbeddingBag<10, 4, mode = "max", padding_idx = 0>,
        bag_sum: EmbeddingBag<10, 4, 1.0, 1.5, mode = "sum">,
        emb: Embedding<10, 3, max_norm = 1.0>,
        lp: LPPool2d<2, 3, stride = 2, ceil_mode = true>,
        lp_1d: LPPool1d<1.5, 2>,
    }
    fn forward(&self, ids: [B, 5], img: [N, 3, 7, W], seq: [2, 9]) -> (
        [B, 4], [B, 4], [B, 5, 3], [N, 3, 3, { (W - 2) / 2 + 1 }], [2, 4],
    ) {
        (
            self.bag(ids),
            self.bag_sum(ids),
            self.emb(ids),
            self.lp(img),
            self.lp_1d(seq),
        )
    }
}

#[test]
fn model_rows_build_the_runtime_layers_with_their_options() {
    let t = BagTable::new(&Device::Cpu);
    let ids = Tensor::from_vec((0..15).map(|i| (i * 7) % 10).collect::<Vec<i64>>(), &[3, 5]);
    for w in [8, 9] {
        let img = Tensor::rand(&[2, 3, 7, w]);
        let out = t.forward(&ids, &img, &Tensor::rand(&[2, 9]));
        let shapes = [&out.0, &out.1, &out.2, &out.3, &out.4].map(|t| t.shape().to_vec());
        assert_eq!(
            shapes,
            [
                vec![3, 4],
                vec![3, 4],
                vec![3, 5, 3],
                vec![2, 3, 3, (w - 2) / 2 + 1],
                vec![2, 4]
            ]
        );
    }
    assert_eq!(
        [
            t.bag.repr(),
            t.bag_sum.repr(),
            t.emb.repr(),
            t.lp.repr(),
            t.lp_1d.repr()
        ],
        [
            "EmbeddingBag(10, 4, mode='max', padding_idx=0)",
            "EmbeddingBag(10, 4, max_norm=1.0, norm_type=1.5, mode='sum')",
            "Embedding(10, 3, max_norm=1.0)",
            "LPPool2d(norm_type=2, kernel_size=3, stride=2, ceil_mode=True)",
            "LPPool1d(norm_type=1.5, kernel_size=2, stride=None, ceil_mode=False)",
        ]
    );
}

tapir::model! {
    /// PReLU (one slope, and one per channel), Softmax2d, constant padding.
    pub struct ActivationRows {
        prelu: PReLU,
        prelu_channels: PReLU<3, init = 0.1>,
        softmax2d: Softmax2d,
        pad: ConstantPad2d<1, 2.5>,
        pad_1d: ConstantPad1d<2, value = -1.0>,
    }
    fn forward(&self, img: [N, 3, 4, 5], seq: [2, 7]) -> (
        [N, 3, 4, 5], [N, 3, 4, 5], [N, 3, 4, 5], [N, 3, 6, 7], [2, 11],
    ) {
        (
            self.prelu(img),
            self.prelu_channels(img),
            self.softmax2d(img),
            self.pad(img),
            self.pad_1d(seq),
        )
    }
}

#[test]
fn activation_and_padding_rows_build_their_layers() {
    let t = ActivationRows::new(&Device::Cpu);
    let img = Tensor::from_vec(
        (0..60).map(|i| i as f32 - 30.0).collect::<Vec<_>>(),
        &[1, 3, 4, 5],
    );
    let out = t.forward(&img, &Tensor::zeros(&[2, 7]));
    assert_eq!(out.1.shape(), &[1, 3, 4, 5]);
    assert_eq!(out.0.to_vec::<f32>()[0], -30.0 * 0.25);
    assert_eq!(out.1.to_vec::<f32>()[0], -30.0 * 0.1);
    let channel_sums = out.2.sum_dims(&[1], false).to_vec::<f32>();
    assert!(channel_sums.iter().all(|s| (s - 1.0).abs() < 1e-5));
    assert_eq!(out.3.to_vec::<f32>()[0], 2.5);
    assert_eq!(out.4.to_vec::<f32>()[..2], [-1.0, -1.0]);
    assert_eq!(
        [
            t.prelu_channels.repr(),
            t.softmax2d.repr(),
            t.pad.repr(),
            t.pad_1d.repr()
        ],
        [
            "PReLU(num_parameters=3)",
            "Softmax2d()",
            "ConstantPad2d(padding=(1, 1, 1, 1), value=2.5)",
            "ConstantPad1d(padding=(2, 2), value=-1.0)",
        ]
    );
}

tapir::model! {
    /// An LSTM with a projection (h and the output at its width, c at the
    /// hidden one), a channel shuffle and local response normalisation.
    pub struct ChannelRows {
        lstm: LSTM<4, 6, 2, bidirectional = true, proj_size = 3>,
        shuffle: ChannelShuffle<3>,
        lrn: LocalResponseNorm<3, beta = 0.5>,
    }
    fn forward(&self, seq: [T, B, 4], img: [B, 6, 5, 5]) -> (
        [T, B, 6], [4, B, 3], [4, B, 6], [B, 6, 5, 5], [B, 6, 5, 5],
    ) {
        let (out, (h, c)) = self.lstm(seq);
        (out, h, c, self.shuffle(img), self.lrn(img))
    }
}

#[test]
fn projection_shuffle_and_lrn_rows_build_their_layers() {
    let t = ChannelRows::new(&Device::Cpu);
    let img = Tensor::randn(&[2, 6, 5, 5]);
    let o = t.forward(&Tensor::randn(&[7, 2, 4]), &img);
    let shapes = [&o.0, &o.1, &o.2, &o.3, &o.4].map(|t| t.shape().to_vec());
    assert_eq!(
        shapes,
        [
            vec![7, 2, 6],
            vec![4, 2, 3],
            vec![4, 2, 6],
            vec![2, 6, 5, 5],
            vec![2, 6, 5, 5]
        ]
    );
    assert!(o.4.allclose(
        &tapir::nn::local_response_norm(&img, 3, 1e-4, 0.5, 1.0),
        0.0,
        0.0
    ));
    assert_eq!(
        [t.lstm.repr(), t.shuffle.repr(), t.lrn.repr()],
        [
            "LSTM(4, 6, proj_size=3, num_layers=2, bidirectional=True)",
            "ChannelShuffle(groups=3)",
            "LocalResponseNorm(3, alpha=0.0001, beta=0.5, k=1.0)",
        ]
    );
}

tapir::model! {
    /// A small volumetric network: every 3-D row, a cube kernel each.
    pub struct VolumeRows {
        conv: Conv3d<2, 4, 3, padding = 1>,
        norm: InstanceNorm3d<4, affine = true>,
        pool: MaxPool3d<2, ceil_mode = true>,
        avg: AvgPool3d<3, stride = 1, padding = 1, count_include_pad = false>,
        up: ConvTranspose3d<4, 2, 2, stride = 2>,
        pad: ReplicationPad3d<1>,
        fill: ConstantPad3d<1, 0.5>,
        gap: AdaptiveAvgPool3d<1, output_height = 2, output_width = 3>,
        gmp: AdaptiveMaxPool3d<2>,
    }
    fn forward(&self, x: [N, 2, 4, 6, 7]) -> (
        [N, 2, 6, 8, 10], [N, 2, 6, 8, 10], [N, 2, 1, 2, 3], [N, 2, 2, 2, 2],
    ) {
        let u = self.up(self.avg(self.pool(self.norm(self.conv(x)).relu())));
        (self.pad(u), self.fill(u), self.gap(u), self.gmp(u))
    }
}

#[test]
fn volume_rows_build_the_3d_layers() {
    use tapir::nn::*;
    let t = VolumeRows::new(&Device::Cpu);
    let x = Tensor::randn(&[3, 2, 4, 6, 7]);
    let out = t.forward(&x);
    let shapes = [&out.0, &out.1, &out.2, &out.3].map(|t| t.shape().to_vec());
    assert_eq!(
        shapes,
        [
            vec![3, 2, 6, 8, 10],
            vec![3, 2, 6, 8, 10],
            vec![3, 2, 1, 2, 3],
            vec![3, 2, 2, 2, 2]
        ]
    );
    // The same forward through the functions, with the rows' weights.
    let h = conv3d(
        &x,
        &t.conv.weight,
        t.conv.bias.as_ref(),
        Conv3dOptions::default().padding(1),
    );
    let h = t.norm.forward(&h).relu();
    let h = max_pool3d(&h, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), true);
    let h = avg_pool3d(&h, (3, 3, 3), (1, 1, 1), (1, 1, 1), false, false, None);
    let u = conv_transpose3d(
        &h,
        &t.up.weight,
        t.up.bias.as_ref(),
        Conv3dOptions::default().stride(2),
        (0, 0, 0),
    );
    let want = adaptive_max_pool3d(&u, (2, 2, 2));
    assert_eq!(out.3.to_vec::<f32>(), want.to_vec::<f32>());
    assert_eq!(
        [
            t.conv.repr(),
            t.norm.repr(),
            t.pool.repr(),
            t.avg.repr(),
            t.up.repr(),
            t.pad.repr(),
            t.fill.repr(),
            t.gap.repr()
        ],
        [
            "Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1))",
            "InstanceNorm3d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=False)",
            "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=True)",
            "AvgPool3d(kernel_size=3, stride=1, padding=1)",
            "ConvTranspose3d(4, 2, kernel_size=(2, 2, 2), stride=(2, 2, 2))",
            "ReplicationPad3d((1, 1, 1, 1, 1, 1))",
            "ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=0.5)",
            "AdaptiveAvgPool3d(output_size=(1, 2, 3))",
        ]
    );
}
