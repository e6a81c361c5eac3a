"""Scoring on the GPU through the real server: a candidate that hands the main op back to PyTorch
(`torch.sum`, flagged `reference-ops` invalid by the server) is timed far faster than the correct naive
kernel, and still never ends as the run's best; the best is confirmed by the longer measurement.

The model is scripted (no network): its proposals are the cheat, then the problem's naive.py and
better.py; its repair turn gives the cheat back unchanged."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.loop import optimize

pytestmark = [pytest.mark.gpu, pytest.mark.anyio]
ROW_SUM = Path(__file__).resolve().parent.parent / "examples" / "problems" / "row_sum"
CHEAT = '''import torch


class ModelNew(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)
'''


class ScriptedClient:
    def __init__(self, proposals: list[str]) -> None:
        self.proposals = proposals
        self.prompts: list[str] = []

    def complete(self, system: str, user: str, tools: Sequence[Any] = (),
                 call_tool: Any = None) -> tuple[str, dict[str, int]]:
        self.prompts.append(user)
        if "## Repair" in user:
            return f"Unchanged.\n```python\n{CHEAT}```", {"input": 1, "output": 1}
        n = sum("## Repair" not in p for p in self.prompts) - 1
        code = self.proposals[min(n, len(self.proposals) - 1)]
        return f"Proposal {n}.\n```python\n{code}```", {"input": 1, "output": 1}


async def test_a_cheat_never_ends_as_best_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelscope.agent.proposers import factory

    client = ScriptedClient([CHEAT, (ROW_SUM / "naive.py").read_text(), (ROW_SUM / "better.py").read_text()])
    monkeypatch.setattr(factory, "_llm_client", lambda cfg, name: client)
    cfg = OptimizeConfig(reference=ROW_SUM / "reference.py", out=tmp_path / "run", budget=4, device="cuda",
                         proposer="openai", model="scripted", strategy="greedy", timing_budget_s=0.3, trials=2,
                         analyze="never")
    s = await optimize(cfg)
    nodes = json.loads((tmp_path / "run" / "tree.json").read_text())
    flat = [nodes, *nodes["children"], *(g for c in nodes["children"] for g in c["children"])]
    assert any(n["status"] == "invalid" for n in flat)  # the cheat was measured and rejected
    assert "torch.sum" not in (tmp_path / "run" / "best.py").read_text()
    assert any("reference-ops" in p for p in client.prompts if "## Repair" in p)
    assert s.best_status == "correct" and s.confirmed and s.best_ci and s.best_ci[0] <= s.best_speedup
    print(f"row_sum: best node {s.best_id} {s.best_speedup:.3f}x (95% CI {s.best_ci}); {s.confirm_note}")
