"""Validates ONNX files written by tests/onnx.rs: onnx's full checker, then
onnxruntime's CPU outputs against tapir's (rtol = atol = 1e-5).

usage: check_onnx.py CASES.json   (written by the test: model path, and per
batch size the inputs and tapir's outputs as flat lists with shapes)
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort

DTYPES = {"f32": np.float32, "i64": np.int64}


def array(t):
    return np.array(t["data"], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])


def main(path):
    failures = 0
    for case in json.load(open(path)):
        model = onnx.load(case["model"])
        onnx.checker.check_model(model, full_check=True)
        sess = ort.InferenceSession(case["model"], providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        for run in case["runs"]:
            feeds = {n: array(t) for n, t in zip(names, run["inputs"])}
            got = sess.run(None, feeds)
            for k, (g, want) in enumerate(zip(got, run["outputs"])):
                want = array(want)
                diff = float(np.max(np.abs(g - want))) if g.size else 0.0
                ok = g.shape == want.shape and np.allclose(g, want, rtol=1e-5, atol=1e-5)
                print(f"{case['name']}: inputs {[list(f.shape) for f in feeds.values()]} output {k} "
                      f"{list(g.shape)} max |ort - tapir| = {diff:.3g} {'ok' if ok else 'MISMATCH'}")
                failures += not ok
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main(sys.argv[1])
