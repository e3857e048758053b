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
