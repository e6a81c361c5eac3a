"""`kernelscope bench` on the GPU with the offline proposer: the knob-annotated KernelBench candidates in
examples/kernelbench tuned on the tiny fixture problems, against eager PyTorch and torch.compile; and,
where a KernelBench checkout is packed in .whl/kernelbench (benchmarks/pack_kernelbench.sh), on its own
level-1 problems of the same names."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from kernelscope.agent.bench import BenchConfig, bench

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "tests" / "fixtures" / "kernelbench"
CANDIDATES = REPO / "examples" / "kernelbench"
PACKED = REPO / ".whl" / "kernelbench"


def _bench(source: Path, out: Path, ids: str) -> object:
    cfg = BenchConfig(source=source, levels=[1], problems=ids, candidates=CANDIDATES, out=out, budget=4,
                      compile_baseline="always",
                      options={"proposer": "offline", "device": "cuda", "timing_budget_s": 0.3, "trials": 2,
                               "tolerance": "kernelbench", "analyze": "never"})
    return anyio.run(lambda: bench(cfg))


def test_offline_bench_on_the_fixtures(tmp_path: Path) -> None:
    s = _bench(FIX, tmp_path / "suite", "19")
    [r] = s.results  # type: ignore[attr-defined]
    assert r.status == "done" and r.correct and r.speedup_eager and r.evaluations == 4
    assert r.reference_compile_us is not None and r.compile_note is not None
    assert (tmp_path / "suite" / "suite.html").is_file()


def test_offline_bench_on_kernelbench(tmp_path: Path) -> None:
    if not (PACKED / "KernelBench" / "level1").is_dir():
        pytest.skip("no KernelBench checkout packed in .whl/kernelbench (benchmarks/pack_kernelbench.sh)")
    s = _bench(PACKED, tmp_path / "suite", "19-22,25")
    assert s.problems == 5 and s.done == 5  # type: ignore[attr-defined]
    assert s.correct == 5, [(r.key, r.best_status, r.note) for r in s.results]  # type: ignore[attr-defined]
