"""Speed of light: no candidate can move the problem's minimum bytes faster than the GPU's peak DRAM
bandwidth allows. The minimum is the inputs read once (the L2 flush before every call leaves none of
them in L2) plus the outputs written once, less what L2 can hold of the outputs (written back after the
timed window). A median below that floor is ``invalid``, with the numbers; a reference below it as well
means the byte count does not fit the problem (it reads part of its inputs), and only a note is left."""

from __future__ import annotations

from typing import Any

import torch

from kernelscope.harness.correctness import flatten
from kernelscope.harness.observers.base import Measured, Observer

# Peak DRAM bandwidth (GB/s) by device name, from NVIDIA's datasheets: used where the device's properties
# give no memory clock and bus width. The harness may not import kernelscope's heuristics (classify.PEAKS).
PEAK_GBPS: dict[str, float] = {
    "H100 80GB HBM3": 3350, "H100 PCIe": 2000, "H100 NVL": 3900, "H200": 4800, "B200": 8000, "GH200": 4000,
    "A100-SXM4-80GB": 2039, "A100 80GB PCIe": 1935, "A100-SXM4-40GB": 1555, "A100-PCIE-40GB": 1555,
    "L40S": 864, "L40": 864, "L4": 300, "A10": 600, "RTX 4090": 1008, "V100": 900, "T4": 320,
}
#: the floor is a bound: leave room for the datasheet's rounding and clock variation
MARGIN = 0.95


def peak_gbps(name: str, props: Any = None) -> float | None:
    """The device's peak DRAM bandwidth: from its memory clock and bus width (double data rate) where the
    properties give them, else from the table (longest matching name first)."""
    clock_khz = getattr(props, "memory_clock_rate", 0) or 0
    bus_bits = getattr(props, "memory_bus_width", 0) or 0
    if clock_khz and bus_bits:
        return 2.0 * clock_khz * 1e3 * bus_bits / 8 / 1e9
    for key in sorted(PEAK_GBPS, key=len, reverse=True):
        if key.lower() in name.lower():
            return PEAK_GBPS[key]
    return None


def nbytes(values: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def floor_us(in_bytes: int, out_bytes: int, gbps: float, l2_bytes: int = 0) -> float:
    """The least time (µs) to read the inputs once and write what of the outputs L2 cannot hold."""
    moved = in_bytes + max(out_bytes - l2_bytes, 0)
    return moved / (gbps * 1e3)


def judge(cand_us: float, ref_us: float, in_bytes: int, out_bytes: int, gbps: float,
          l2_bytes: int = 0) -> tuple[str | None, dict[str, Any]]:
    """("invalid" | "note" | None, evidence): a pure function of the numbers."""
    floor = floor_us(in_bytes, out_bytes, gbps, l2_bytes)
    ev = {"candidate_median_us": round(cand_us, 3), "reference_median_us": round(ref_us, 3),
          "floor_us": round(floor, 3), "input_bytes": in_bytes, "output_bytes": out_bytes,
          "l2_bytes": l2_bytes, "peak_gbps": round(gbps, 1)}
    if floor <= 0 or cand_us >= MARGIN * floor:
        return None, ev
    return ("note" if ref_us < MARGIN * floor else "invalid"), ev


class SpeedOfLight(Observer):
    def __init__(self, gbps: float | None = None) -> None:
        self.gbps = gbps

    def after_timing(self, measured: Measured) -> None:
        if not self.ctx.cuda or not self.ctx.cfg.flush_l2:  # without the flush, inputs may sit in L2
            return
        props = torch.cuda.get_device_properties(self.ctx.device)
        gbps = self.gbps or peak_gbps(props.name, props)
        if gbps is None:
            self.ctx.findings.notes.append(f"speed-of-light check skipped: no peak bandwidth known for {props.name}")
            return
        with torch.no_grad():
            outs = flatten(measured.models["reference"](*measured.inputs))
        verdict, ev = judge(measured.timings["candidate"]["median_us"], measured.timings["reference"]["median_us"],
                            nbytes(measured.inputs), nbytes(outs), gbps, int(getattr(props, "L2_cache_size", 0)))
        if verdict == "invalid":
            self.ctx.findings.flag_once(
                "speed-of-light", "invalid",
                f"the candidate's median {ev['candidate_median_us']} µs is below the {ev['floor_us']} µs this GPU "
                f"needs to read the inputs ({ev['input_bytes']} B) and write the outputs ({ev['output_bytes']} B) "
                f"at its peak {ev['peak_gbps']} GB/s: it cannot have done the work in the timed window.", ev)
        elif verdict == "note":
            self.ctx.findings.notes.append(f"speed of light: the reference itself runs below the byte floor "
                                           f"({ev['reference_median_us']} < {ev['floor_us']} µs), so the floor does "
                                           "not fit this problem and was not applied")
