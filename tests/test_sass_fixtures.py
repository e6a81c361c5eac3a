"""The committed cubins (built here with nvcc, see tests/fixtures/sass/regenerate.py) give the
recorded statistics with this machine's disassembler, and, on the device, with the device's own
cuobjdump/nvdisasm and nvcc: the same artifact gives the same SASS statistics everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelscope.models.requests import CompileRequest
from kernelscope.toolkit.toolchain import tool_info
from kernelscope.tools.compile import compile_cuda
from kernelscope.tools.sass import sass_for_artifact, sass_for_cubin_bytes

FIX = Path(__file__).parent / "fixtures" / "sass"
REPO = Path(__file__).resolve().parent.parent
RECORDED = json.loads((FIX / "stats.json").read_text())
NAMES = sorted(RECORDED["kernels"])


def _comparable(res) -> list[dict]:  # type: ignore[no-untyped-def]
    keys = ("instructions", "opcodes", "memory", "tensor_core_instructions", "local_loads", "local_stores",
            "fp64_instructions", "special_function_instructions", "atomics", "barriers", "registers")
    return [{k: s[k] for k in keys} for s in (k.model_dump(mode="json") for k in res.kernels)]


@pytest.mark.parametrize("name", NAMES)
def test_committed_cubin_gives_recorded_stats(name: str) -> None:
    res = sass_for_cubin_bytes((FIX / f"{name}.cubin").read_bytes())
    assert _comparable(res) == RECORDED["kernels"][name]["stats"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_device_build_gives_same_stats(name: str) -> None:
    entry = RECORDED["kernels"][name]
    if tool_info("nvcc").version != RECORDED["nvcc"]:
        pytest.skip(f"device nvcc {tool_info('nvcc').version} differs from the recorded {RECORDED['nvcc']}")
    r = compile_cuda(CompileRequest(path=str(REPO / "examples" / "kernels" / f"{name}.cu"), arch="sm_90",
                                    flags=entry["flags"]))
    assert r.success and r.artifact_id
    assert _comparable(sass_for_artifact(r.artifact_id)) == entry["stats"]
