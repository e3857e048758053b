"""PyTorch's module trees: `named_modules()` names and class names of a few
models, for `tests/suite/module_tree.rs`.

    python3 scripts/gen_module_goldens.py   # -> tests/goldens/modules.json
"""
import json
import os
import sys

import torch
from seed_models import Mlp  # the seed (examples/common/seed.rs)
from torch import nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "goldens")


def tree(m):
    return [[name, type(sub).__name__] for name, sub in m.named_modules()]


models = {
    "seed_mlp": Mlp(),
    "encoder": nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16), 2, norm=nn.LayerNorm(8), enable_nested_tensor=False),
    "decoder_layer": nn.TransformerDecoderLayer(8, 2, 16),
    "transformer": nn.Transformer(8, 2, 1, 1, 16),
    "cnn": nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Sequential(nn.Dropout(0.1), nn.Flatten()), nn.Linear(8 * 14 * 14, 10)),
    "lstm_head": nn.ModuleDict({"rnn": nn.LSTM(4, 8), "head": nn.Linear(8, 2)}),
}

out = {"torch": torch.__version__, "models": {k: tree(m) for k, m in models.items()}}
os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "modules.json"), "w") as f:
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in out["models"].items()]
    f.write('{"torch": %s, "models": {\n%s\n}}\n' % (json.dumps(out["torch"]), ",\n".join(lines)))
print({k: len(v) for k, v in out["models"].items()}, file=sys.stderr)
