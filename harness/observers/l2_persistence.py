"""L2 persistence: a candidate that sets a persisting L2 access-policy window (``cudaStreamSetAttribute``
with ``cudaAccessPropertyPersisting``, under a ``cudaLimitPersistingL2CacheSize`` carve-out) keeps its data
resident in L2 across the harness' flush. Before every timed call the persisting carve-out is checked;
once a candidate has set one, the carve-out is set back to 0 and the persisting lines reset before every
call (so the flush evicts them), and the candidate is refused."""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any

from kernelscope.harness.observers.base import Measured, Observer, TimingRun

LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize


class CudaRuntime:
    """The three runtime calls this check needs, through the process' own libcudart."""

    def __init__(self) -> None:
        self.lib = self._load()

    @staticmethod
    def _load() -> Any:
        names = ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]
        try:
            import torch
            here = os.path.dirname(torch.__file__)  # torch's own lib, or the CUDA runtime wheel beside it
            for pattern in (os.path.join(here, "lib", "libcudart*.so*"),
                            os.path.join(here, "..", "nvidia", "cuda_runtime", "lib", "libcudart.so*")):
                names += sorted(glob.glob(pattern))
        except ImportError:  # not needed where the runtime is on the loader's path
            pass
        for n in names:
            try:
                return ctypes.CDLL(n)
            except OSError:
                continue
        raise OSError("no libcudart found")

    def persisting_limit(self) -> int:
        v = ctypes.c_size_t(0)
        rc = self.lib.cudaDeviceGetLimit(ctypes.byref(v), LIMIT_PERSISTING_L2)
        return int(v.value) if rc == 0 else 0

    def clear(self) -> None:
        """No carve-out, and every persisting line back to normal."""
        self.lib.cudaDeviceSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(0))
        self.lib.cudaCtxResetPersistingL2Cache()


class L2Persistence(Observer):
    def __init__(self, runtime: Any = None) -> None:
        self.runtime = runtime
        self.baseline = 0
        self.seen: int | None = None  # the carve-out the candidate set, in bytes
        self.resets = 0

    def register(self, ctx: Any) -> None:
        super().register(ctx)
        if self.runtime is None and ctx.cuda:
            try:
                self.runtime = CudaRuntime()
            except OSError as e:
                ctx.findings.notes.append(f"L2 persistence check unavailable: {e}")
        if self.runtime is not None:
            self.baseline = self.runtime.persisting_limit()

    def check(self) -> None:
        if self.runtime is None:
            return
        limit = self.runtime.persisting_limit()
        if limit > self.baseline or (self.seen is not None and limit > 0):
            if self.seen is None:
                self.seen = limit
                self.ctx.findings.flag_once(
                    "l2-persistence", "invalid",
                    f"the candidate set a persisting L2 carve-out of {limit / 2**20:.1f} MiB (an access-policy "
                    "window keeps its data resident across the L2 flush); it is reset before every timed call "
                    "and the candidate is refused.", {"persisting_bytes": limit})
            self.runtime.clear()
            self.resets += 1

    def before_warm_up(self, run: TimingRun) -> None:
        self.check()  # the correctness trials and the audits ran the candidate already

    def before_call(self, name: str, first: bool) -> None:
        self.check()

    def after_timing(self, measured: Measured) -> None:
        self.check()

    def results(self) -> dict[str, Any]:
        return {}
