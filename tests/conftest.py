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
