"""The knob-annotated candidates in examples/problems (`candidate.py`): what the offline proposer
tunes. Every knob value appears in a configuration that nvcc compiles here for sm_90 with the
candidate's own -D options; in the memory-bound spaces every configuration of a covering set compiles
without spills, while the matmul space is hard on purpose (tilings that exceed 48 KiB of static shared
memory fail to build, warp tiles that are not multiples of 16 are refused at import). The GPU test runs
the covering set against the reference on the device. The whole spaces' timings are in
benchmarks/strategies.py."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from kernelscope.agent.search.knobs import apply_knobs, default_config, parse_knobs

REPO = Path(__file__).resolve().parent.parent
PROBLEMS = REPO / "examples" / "problems"
KNOBBED = sorted(p.name for p in PROBLEMS.iterdir() if (p / "candidate.py").is_file())
HARD = {"matmul_fp16"}  # spaces with configurations that are invalid by construction


def covering(problem: str) -> list[dict[str, str]]:
    """Configurations in which every value of every knob appears (row i takes each knob's i-th value,
    wrapping), the default first."""
    knobs = parse_knobs((PROBLEMS / problem / "candidate.py").read_text())
    rows = max(len(k.values) for k in knobs)
    out = [default_config(knobs)]
    for i in range(rows):
        cfg = {k.name: k.values[(i * (j + 1)) % len(k.values)] for j, k in enumerate(knobs)}
        if cfg not in out:
            out.append(cfg)
    seen = {(k.name, v) for c in out for k in knobs for v in [c[k.name]]}
    for k in knobs:
        for v in k.values:
            if (k.name, v) not in seen:
                out.append({**default_config(knobs), k.name: v})
    return out


def load(problem: str, cfg: dict[str, str], tmp: Path) -> ModuleType:
    src = apply_knobs((PROBLEMS / problem / "candidate.py").read_text(), cfg)
    path = tmp / f"{problem}_{abs(hash(tuple(sorted(cfg.items()))))}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_at_least_three_problems_declare_knobs() -> None:
    assert len(KNOBBED) >= 3, KNOBBED
    for p in KNOBBED:
        knobs = parse_knobs((PROBLEMS / p / "candidate.py").read_text())
        size = 1
        for k in knobs:
            size *= len(k.values)
        assert len(knobs) >= 3 and size >= 50, (p, size)


@pytest.mark.parametrize("problem", KNOBBED)
def test_every_knob_value_compiles(problem: str, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    pytest.importorskip("torch", reason="loading the problems' candidates needs torch (its CPU build is enough)")
    mods = []
    for cfg in covering(problem):
        try:
            mods.append((cfg, load(problem, cfg, tmp_path)))
        except ValueError as e:  # refused at import: only where the space is hard by design
            assert problem in HARD, f"{problem} {cfg}: {e}"
            assert "not a multiple of 16" in str(e)

    def build(item: tuple[dict[str, str], ModuleType]) -> tuple[dict[str, str], int, str]:
        cfg, mod = item
        (k,) = mod.KERNELS
        with tempfile.TemporaryDirectory() as d:
            cu = Path(d) / "k.cu"
            cu.write_text(k.source)
            defines = [o for o in k.options if o.startswith("-D")]
            proc = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-std=c++17", "-Xptxas", "-v", *defines,
                                   "-o", str(Path(d) / "k.cubin"), str(cu)], capture_output=True, text=True,
                                  timeout=300)
        return cfg, proc.returncode, proc.stdout + proc.stderr

    built = []
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for cfg, rc, log in pool.map(build, mods):
            default = cfg == mods[0][0]
            if rc != 0:
                assert problem in HARD and not default, f"{problem} {cfg}:\n{log}"
                assert "too much shared data" in log, f"{problem} {cfg}: unexpected failure\n{log}"
                continue
            built.append(cfg)
            spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
            if problem not in HARD or default:
                assert spills and all(s == ("0", "0") for s in spills), f"{problem} {cfg} spills:\n{log}"
    knobs = parse_knobs((PROBLEMS / problem / "candidate.py").read_text())
    for k in knobs:  # every value of every knob builds in some configuration
        assert {c[k.name] for c in built} == set(k.values), (k.name, [c[k.name] for c in built])


@pytest.mark.gpu
@pytest.mark.parametrize("problem", KNOBBED)
def test_covering_configurations_match_the_reference_on_gpu(problem: str, tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    spec = importlib.util.spec_from_file_location(f"ref_{problem}", PROBLEMS / problem / "reference.py")
    assert spec and spec.loader
    ref = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ref
    spec.loader.exec_module(ref)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref.get_inputs()]
    expected = ref.Model(*ref.get_init_inputs()).cuda()(*inputs)
    checked = 0
    for cfg in covering(problem):
        try:
            mod = load(problem, cfg, tmp_path)
            got = mod.ModelNew(*ref.get_init_inputs()).cuda()(*inputs)
        except Exception as e:  # invalid by construction (import refusal, too much shared memory)
            assert problem in HARD, f"{problem} {cfg}: {e}"
            continue
        checked += 1
        torch.cuda.synchronize()
        rtol, atol = {"softmax": (1e-4, 1e-7), "matmul_fp16": (1e-2, 1e-2)}.get(problem, (1e-4, 1e-4))
        torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, msg=lambda m, c=cfg: f"{problem} {c}: {m}")
    assert checked >= 3
