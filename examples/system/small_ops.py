"""system/small_ops: a PyTorch model of many small kernels, run eagerly (launch-bound: the GPU waits for
the host to launch each of ~150 tiny kernels per step) or replayed as one CUDA graph per step.

    python small_ops.py [--graph] [--steps 200]

Prints one JSON line: the mode, the measured time per step (host wall clock over the steps, synchronized)
and the kernels per step. The timed steps run inside cudaProfilerStart/Stop, each in an NVTX range, so a
tracer's region is exactly the timed loop.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

LAYERS = 50  # x * w + b then tanh: 3 kernels per layer


def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for _ in range(LAYERS):
        x = torch.tanh(x * w + 0.1)
    return x


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", action="store_true", help="replay the step as a CUDA graph")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda")
    w = torch.rand(64, 256, device="cuda")
    if not args.graph:
        def run() -> torch.Tensor:
            return step(x, w)
    else:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step(x, w)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = step(x, w)

        def run() -> torch.Tensor:
            g.replay()
            return out

    for _ in range(args.warmup):
        torch.cuda.nvtx.range_push("warm-up")  # NVTX initializes (and loads any tool) on its first call
        run()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    ref = step(x, w)
    torch.cuda.profiler.start()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        y = run()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    torch.cuda.profiler.stop()
    assert torch.allclose(y, ref), "graph replay and eager disagree"
    print(json.dumps({"mode": "graph" if args.graph else "eager", "step_us": round(1e6 * dt / args.steps, 2),
                      "steps": args.steps, "kernels_per_step": 3 * LAYERS}))


if __name__ == "__main__":
    main()
