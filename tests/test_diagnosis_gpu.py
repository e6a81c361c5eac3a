"""The three feedback arms on the GPU, through the real server over stdio: a scripted OpenAI-compatible
endpoint proposes softmax candidates (the knob settings recorded in tests/fixtures/optimize/softmax), the
server evaluates and profiles them, and the prompts carry what each arm promises: the server's analyze
summary (diagnosis), the measured counters only (raw), or no profile and no `analyze` at all (none)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("openai")

import test_diagnosis as cpu_case

from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.diagnosis import estimate_tokens
from kernelscope.agent.loop import optimize

pytestmark = [pytest.mark.gpu, pytest.mark.anyio]
REPO = Path(__file__).resolve().parent.parent
SOFTMAX, Proposals, recorded = cpu_case.SOFTMAX, cpu_case.Proposals, cpu_case.recorded
scripted_endpoint = cpu_case.endpoint  # a fixture: the scripted OpenAI-compatible server


@pytest.mark.parametrize("feedback", ["diagnosis", "raw", "none"])
async def test_the_three_arms_on_the_gpu(feedback: str, tmp_path: Path,
                                         scripted_endpoint: tuple[str, list[cpu_case.Proposals]]) -> None:
    sources, _, _ = recorded(SOFTMAX)
    url, holder = scripted_endpoint
    holder.append(Proposals([sources[3], sources[2], sources[7]]))
    start = tmp_path / "start.py"
    start.write_text(sources[0])
    cfg = OptimizeConfig(reference=REPO / "examples/problems/softmax/reference.py", candidate=start,
                         out=tmp_path / "run", budget=4, device="cuda", proposer="openai", model="m", base_url=url,
                         strategy="greedy", timing_budget_s=0.3, trials=2, feedback=feedback,
                         analyze="auto" if feedback == "none" else "always", confirm=False)
    s = await optimize(cfg)
    prompts = holder[-1].prompts
    assert s.evaluations == 4 and len(prompts) == 3
    assert all("## Target GPU\nNVIDIA H" in p and "CudaKernel(source, name" in p for p in prompts)
    kept = [json.loads(p.read_text()) for p in (cfg.out / "analysis").glob("*.json")]
    print(f"{feedback}: best {s.best_speedup}x, {len(kept)} profiles; first prompt "
          f"{estimate_tokens(prompts[0])} tokens (estimated)")
    if feedback == "none":
        assert not kept and s.analyses == 0 and "## Profile" not in "".join(prompts)
        return
    assert len(kept) >= 3 and all(r["summary"].startswith("Analyzed ") for r in kept)  # reference, start, best
    assert len({r["key"] for r in kept}) == len(kept)  # each source once
    m = re.search(r"^## Profile of the current candidate \(.*?; at most (\d+) tokens\)\n(.*?)^## ", prompts[0],
                  re.S | re.M)
    assert m and estimate_tokens(m.group(2).strip()) <= int(m.group(1))
    if feedback == "diagnosis":
        assert "Analyzed " in m.group(2) and "confidence" in m.group(2)
    else:
        assert m.group(2).startswith("kernel softmax_knobs") and "gpu__time_duration.sum = " in m.group(2)
