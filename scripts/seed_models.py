"""The seed MLP in PyTorch, as examples/common/seed.rs writes it by hand:
Linear(784, 256), 4 residual blocks x + Seq(Linear, LayerNorm, GELU,
Linear)(x), Linear(256, 10). Shared by the golden generators."""
from torch import nn


class ResBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d), nn.GELU(), nn.Linear(d, d))

    def forward(self, x):
        return x + self.net(x)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(784, 256)
        self.blocks = nn.ModuleList([ResBlock(256) for _ in range(4)])
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        h = self.stem(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h)
