"""Energy from NVML's total-energy counter over a window of seconds, for the candidate and the
reference (``measure_energy``). pynvml is optional: without it the reading says why."""

from __future__ import annotations

from typing import Any

import torch

from kernelscope.harness.observers.base import Measured, Observer
from kernelscope.harness.protocol import perf_counter


class Energy(Observer):
    phase = "energy"

    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self.readings: dict[str, dict[str, Any]] | None = None

    def after_timing(self, measured: Measured) -> None:
        if not self.ctx.cuda:
            return
        self.readings = {n: self.measure(measured.models[n], measured.inputs) for n in ("candidate", "reference")}

    def results(self) -> dict[str, Any]:
        return {} if self.readings is None else {"energy": self.readings}

    def measure(self, fn: Any, inputs: list[Any]) -> dict[str, Any]:
        try:
            import pynvml
        except ImportError:
            return {"available": False, "note": "pynvml (nvidia-ml-py) is not importable"}
        try:
            pynvml.nvmlInit()
        except Exception as e:
            return {"available": False, "note": f"NVML: {e}"}
        try:
            handle = self._nvml_handle(pynvml)
            with torch.no_grad():
                joules, secs, calls = self._window(pynvml, handle, fn, inputs)
            return {"available": True, "calls": calls, "window_s": secs, "energy_j": joules,
                    "joules_per_call": joules / calls, "avg_power_w": joules / secs if secs else None,
                    "note": ("NVML total-energy counter (mJ); it advances about every 100 ms on H100-class GPUs, "
                             f"so over {secs:.2f} s the figure is good to roughly ±{100 * 0.1 / secs:.0f}%; it "
                             "covers the whole board, idle power included.")}
        except Exception as e:
            return {"available": False, "note": f"NVML energy counter: {e}"}
        finally:
            pynvml.nvmlShutdown()

    def _window(self, pynvml: Any, handle: Any, fn: Any, inputs: list[Any]) -> tuple[float, float, int]:
        """Calls in batches of 8 (synchronised every 64) for at least the window: joules, seconds, calls."""
        fn(*inputs)
        self.ctx.sync()
        e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        t0 = perf_counter()
        calls = 0
        while True:
            for _ in range(8):
                fn(*inputs)
            calls += 8
            if calls % 64 == 0:
                self.ctx.sync()
                if perf_counter() - t0 >= self.window_s:
                    break
        self.ctx.sync()
        t1 = perf_counter()
        e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        return (e1 - e0) / 1000.0, t1 - t0, calls

    def _nvml_handle(self, pynvml: Any) -> Any:
        device = self.ctx.device
        props = torch.cuda.get_device_properties(device)
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            want = str(uuid)
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                u = pynvml.nvmlDeviceGetUUID(h)
                u = u.decode() if isinstance(u, bytes) else u
                if u.replace("GPU-", "") == want.replace("GPU-", ""):
                    return h
        return pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
