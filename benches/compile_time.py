#!/usr/bin/env python3
"""Compile time of `model!`: `cargo check` of a crate holding a 50-layer model
written with `model!`, against the same model written by hand.

    python3 benches/compile_time.py [--layers 50] [--runs 5]

Writes a scratch crate under target/compile-bench (its own target dir, so the
dependencies are checked once), then times `cargo check` after touching the
model's file, best and median of --runs, for each variant."""

import argparse
import os
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def macro_model(n):
    fields = "\n".join(f"        l{i}: Linear<64, 64>," for i in range(n))
    body = "\n".join(f"        let h = self.l{i}(h).relu();" for i in range(n))
    return f"""tapir::model! {{
    pub struct Deep {{
{fields}
    }}
    fn forward(&self, x: [B, 64]) -> [B, 64] {{
        let h = x;
{body}
        h
    }}
}}

pub fn build() -> Deep {{
    Deep::new(&tapir::Device::Cpu)
}}
"""


def hand_model(n):
    fields = "\n".join(f"    pub l{i}: Linear," for i in range(n))
    inits = "\n".join(f"            l{i}: Linear::new(64, 64, true)," for i in range(n))
    body = "\n".join(f"        let h = self.l{i}.forward(&h).relu();" for i in range(n))
    visits = "\n".join(f'        visit_child("l{i}", &self.l{i}, f);' for i in range(n))
    visits_mut = "\n".join(f'        visit_child_mut("l{i}", &mut self.l{i}, f);' for i in range(n))
    reprs = ", ".join(f'("l{i}", &self.l{i} as &dyn Module)' for i in range(n))
    return f"""use tapir::nn::{{Forward, Linear, Module, TensorKind, repr_children, visit_child, visit_child_mut}};
use tapir::Tensor;

pub struct Deep {{
{fields}
}}

impl Deep {{
    pub fn new() -> Deep {{
        Deep {{
{inits}
        }}
    }}
}}

impl Forward for Deep {{
    fn forward(&self, x: &Tensor) -> Tensor {{
        assert_eq!(x.ndim(), 2);
        assert_eq!(x.shape()[1], 64);
        let h = x.clone();
{body}
        h
    }}
}}

impl Module for Deep {{
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {{
{visits}
    }}
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {{
{visits_mut}
    }}
    fn repr(&self) -> String {{
        repr_children("Deep", &[{reprs}])
    }}
}}

pub fn build() -> Deep {{
    Deep::new()
}}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-incremental", action="store_true", help="CARGO_INCREMENTAL=0")
    a = ap.parse_args()
    crate = os.path.join(ROOT, "target", "compile-bench")
    os.makedirs(os.path.join(crate, "src"), exist_ok=True)
    with open(os.path.join(crate, "Cargo.toml"), "w") as f:
        f.write(f"""[package]
name = "compile-bench"
version = "0.0.0"
edition = "2024"

[dependencies]
tapir = {{ path = "{ROOT}" }}

[workspace]

[profile.dev.package."*"]
opt-level = 3
""")
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(crate, "target"))
    if a.no_incremental:
        env["CARGO_INCREMENTAL"] = "0"
    results = {}
    for name, text in [("model!", macro_model(a.layers)), ("hand-written", hand_model(a.layers))]:
        with open(os.path.join(crate, "src", "lib.rs"), "w") as f:
            f.write(text)
        subprocess.run(["cargo", "check", "-q"], cwd=crate, env=env, check=True)
        times = []
        for run in range(a.runs):
            # A new comment changes the file, so cargo must check it again.
            with open(os.path.join(crate, "src", "lib.rs"), "w") as f:
                f.write(f"// run {run}\n" + text)
            t = time.perf_counter()
            subprocess.run(["cargo", "check", "-q"], cwd=crate, env=env, check=True)
            times.append(time.perf_counter() - t)
        results[name] = times
        print(f"{name:13} {a.layers} layers: cargo check best {min(times):.2f} s, median {statistics.median(times):.2f} s")
    extra = min(results["model!"]) - min(results["hand-written"])
    print(f"model! costs {extra:+.2f} s of cargo check over the hand-written model (best of {a.runs})")


if __name__ == "__main__":
    main()
