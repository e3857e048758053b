#!/usr/bin/env python3
"""PyTorch <-> tapir checkpoint fixtures (tests/goldens/interop/).

1. torch_tiny.safetensors: a PyTorch `Tiny` state dict (after 3 train-mode
   batches, so BatchNorm's running stats and int64 num_batches_tracked are set),
   and torch_tiny_io.safetensors: an input and PyTorch's eval-mode output.
2. tapir_tiny.safetensors is written by tapir
   (`cargo test --test checkpoint -- --ignored write_tapir_interop_fixture`);
   this script loads it into PyTorch strictly and writes
   tapir_tiny_torch_output.safetensors with PyTorch's output.

    python3 scripts/gen_interop.py      # needs torch and safetensors
"""

import os

import torch
from safetensors.torch import load_file, save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens", "interop")


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.bn = torch.nn.BatchNorm1d(16)
        self.norm = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.bn(self.fc1(x)))))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    m = Tiny()
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(32, 8))
    m.eval()
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, os.path.join(OUT, "torch_tiny.safetensors"))
    x = torch.randn(5, 8)
    with torch.no_grad():
        save_file({"input": x, "output": m(x)}, os.path.join(OUT, "torch_tiny_io.safetensors"))

    tapir_file = os.path.join(OUT, "tapir_tiny.safetensors")
    if os.path.exists(tapir_file):
        t = Tiny()
        t.load_state_dict(load_file(tapir_file), strict=True)
        t.eval()
        with torch.no_grad():
            save_file({"input": x, "output": t(x)}, os.path.join(OUT, "tapir_tiny_torch_output.safetensors"))
        print("loaded tapir_tiny.safetensors in PyTorch (strict) and wrote its output")
    else:
        print("tapir_tiny.safetensors missing: run the ignored test write_tapir_interop_fixture first")


if __name__ == "__main__":
    main()
