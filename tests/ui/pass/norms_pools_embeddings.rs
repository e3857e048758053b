// BatchNorm2d, average and adaptive pooling, RMSNorm, Embedding with padding.
tapir::model! {
    pub struct Mixed {
        conv: Conv2d<3, 8, 3, stride = 2, padding = 1, bias = false>,
        bn: BatchNorm2d<8>,
        avg: AvgPool2d<2>,
        gap: AdaptiveAvgPool2d<1>,
        flat: Flatten,
        emb: Embedding<10, 8, padding_idx = 0>,
        norm: RMSNorm<8>,
        act: LeakyReLU<0.2>,
    }
    fn forward(&self, img: [N, 3, 32, 32], ids: [N]) -> [N, 8] {
        let h = self.avg(self.bn(self.conv(img)));
        let pooled = self.flat(self.gap(h));
        self.act(self.norm(pooled + self.emb(ids)))
    }
}

fn main() {
    let m = Mixed::new(&tapir::Device::Cpu);
    let ids = tapir::Tensor::zeros(&[2]).to_dtype(tapir::DType::I64);
    let y = m.forward(&tapir::Tensor::zeros(&[2, 3, 32, 32]), &ids);
    assert_eq!(y.shape(), &[2, 8]);
}
