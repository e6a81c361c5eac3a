from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kernelscope.measure.cupti import CuptiPaths

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def _gpu_absent_reason() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            n = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception as e:  # NVML missing or no driver
        return f"no NVIDIA GPU here (NVML: {e}); gpu tests run on the device machine"
    return None if n > 0 else "NVML sees 0 GPUs; gpu tests run on the device machine"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _gpu_absent_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def kernelscope_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test session gets its own artifact store; the repo and tmp dirs are allowed roots."""
    from kernelscope.config import set_settings, settings_from_env

    home = tmp_path_factory.mktemp("kshome")
    roots = [str(REPO), str(tmp_path_factory.getbasetemp())]
    os.environ["KERNELSCOPE_HOME"] = str(home)
    os.environ["KERNELSCOPE_ALLOWED_ROOTS"] = os.pathsep.join(roots)
    set_settings(settings_from_env(home=home, roots=roots))
    return home


@pytest.fixture(scope="module")
def cupti_build_paths() -> CuptiPaths:
    """The CUPTI headers and library to build the collector or the tracer against, with nvcc to build them;
    the test is skipped, saying which is missing, where either is."""
    from kernelscope.errors import NotAvailable
    from kernelscope.measure.cupti import cupti_paths
    from kernelscope.toolkit.toolchain import ToolMissing, require

    try:
        require("nvcc")
        return cupti_paths()
    except ToolMissing as e:
        pytest.skip(f"no nvcc here to build CUPTI code with: {e.note}")
    except NotAvailable as e:
        pytest.skip(f"CUPTI is not installed here ({e.why})")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def nominal_speedups(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests/agentcases/chunked_sum: each correct candidate's speedup is its nominal one (the
    reference waits 50 ms a call, a candidate 1 ms a slice: 50 / CHUNKS), not the one timed here.

    The candidates still go through the real server (build, correctness, the op audit), but which node
    the search expands next, and so which reply the model gives to which prompt, must not depend on how
    busy the machine is: timed on a loaded CPU, a candidate with a quarter of its parent's slices was
    measured slower than its parent, and the model was then asked about another node than the test meant."""
    import re

    from kernelscope.agent.client import Evaluation, ServerPeer

    evaluate = ServerPeer.evaluate

    async def nominal(self: ServerPeer, source: str, **kw: object) -> Evaluation:
        ev = await evaluate(self, source, **kw)
        m = re.search(r"^CHUNKS = (\d+)", source, re.M)
        if ev.outcome.ok and m:
            ev.outcome.speedup = 50.0 / int(m.group(1))
            ev.outcome.ci_low = ev.outcome.ci_high = ev.outcome.speedup
            ev.outcome.verdict = "faster" if ev.outcome.speedup > 1 else "slower"
        return ev

    monkeypatch.setattr(ServerPeer, "evaluate", nominal)
