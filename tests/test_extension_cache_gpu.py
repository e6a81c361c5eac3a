"""On the GPU: analyze of a CUDA load_inline candidate loads the extension `run` built (issue 29, item 4: its
light stage paid the build again). The evidence is ninja's own "no work to do" in every capture's program
output (the candidate builds verbosely) and the cache entry unchanged, byte for byte and time for time."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.config import get_settings
from kernelscope.models.requests import AnalyzeRequest, EvalRequest
from kernelscope.sandbox import extcache
from kernelscope.tools.analyze import analyze
from kernelscope.tools.run import eval_candidate, job_env

pytestmark = pytest.mark.gpu

REF = Path(__file__).parent / "evalcases" / "ref_relu.py"
CANDIDATE = '''
import torch
from torch.utils.cpp_extension import load_inline

CUDA = """
__global__ void relu_k(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor my_relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
_ext = load_inline(name="ks_gpu_cache_probe", cpp_sources=["torch::Tensor my_relu(torch::Tensor x);"],
                   cuda_sources=[CUDA], functions=["my_relu"], verbose=True)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.my_relu(x.contiguous())
'''


def _snapshot(entry: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(entry)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(entry.rglob("*"))
            if p.is_file()}


def test_analyze_of_a_load_inline_candidate_reuses_runs_build(tmp_path: Path) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text(CANDIDATE)
    r = eval_candidate(EvalRequest(reference_path=str(REF), candidate_path=str(cand), device="cuda", trials=2,
                                   timeout_s=600))
    assert r.status == "ok" and r.correctness and r.correctness.correct, (r.error, r.build_note, r.stderr_tail)
    s = get_settings()
    entry = Path(job_env(tmp_path, s.home, None, candidate=CANDIDATE)["TORCH_EXTENSIONS_DIR"])
    assert extcache.is_sealed(entry)
    before = _snapshot(entry)
    # the default path (the CUPTI collector in the harness' own run) loads the same build
    res = analyze(AnalyzeRequest(reference_path=str(REF), candidate_path=str(cand), timeout_s=600))
    assert res.status == "ok", (res.explanation, res.stages)
    assert [s.tool for s in res.stages if s.name in ("light", "deep")] == ["cupti", "cupti"], res.notes
    assert _snapshot(entry) == before
    # and each Nsight Compute capture's program output shows ninja finding nothing to build
    res = analyze(AnalyzeRequest(reference_path=str(REF), candidate_path=str(cand), timeout_s=600, light="ncu"))
    assert res.status == "ok", (res.explanation, res.stages)
    outputs = [st.capture.program_output or "" for st in res.stages if st.capture is not None]
    assert outputs and all("ninja: no work to do." in o and "nvcc" not in o for o in outputs), outputs
    assert _snapshot(entry) == before
