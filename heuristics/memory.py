"""Memory-family rules over Nsight Compute profiles: uncoalesced global access, DRAM saturation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernelscope.heuristics.registry import rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile

EXCESS = "derived__memory_l2_theoretical_sectors_global_excessive"
TOTAL = "memory_l2_theoretical_sectors_global"



def hottest_line(k: KernelProfile, counter: str) -> str | None:
    best = max(k.source_lines, key=lambda s: s.counters.get(counter, 0.0), default=None)
    if best is None or best.counters.get(counter, 0.0) <= 0:
        return None
    return f"{best.file}:{best.line}" + (f"  `{best.code}`" if best.code else "")


@rule("memory.uncoalesced-global-access", family="memory", scope="ncu",
      description="Global accesses touch more 32-byte sectors than the data they use needs.",
      thresholds={"warning_excess_pct": 20.0, "high_excess_pct": 50.0, "sectors_per_request": 8.0})
def _uncoalesced(k: KernelProfile, th: Mapping[str, float], ctx: Mapping[str, Any]) -> Iterable[Finding]:
    excess, total = k.num(EXCESS), k.num(TOTAL)
    spr = k.global_load_sectors_per_request
    if excess is not None and total:
        pct = 100.0 * excess / total
        if pct < th["warning_excess_pct"]:
            return
        value, metric, threshold = round(pct, 1), "excessive_global_sectors_pct", th["warning_excess_pct"]
        sev = "high" if pct >= th["high_excess_pct"] else "warning"
        what = f"{pct:.0f}% of the {total:,.0f} L2 sectors its global accesses move are excess"
    elif spr is not None and spr > th["sectors_per_request"]:
        value, metric, threshold = spr, "global_load_sectors_per_request", th["sectors_per_request"]
        sev = "high" if spr >= 16 else "warning"
        what = f"each warp-wide global load touches {spr:.1f} sectors (4 for coalesced 32-bit loads)"
    else:
        return
    line = hottest_line(k, EXCESS)
    yield Finding(
        rule="memory.uncoalesced-global-access", family="memory", severity=sev, kernel=k.name,  # type: ignore[arg-type]
        title="Uncoalesced global memory access",
        diagnosis=(f"{k.name}: {what}; neighbouring threads read addresses far apart, so most of every sector "
                   "fetched is wasted bandwidth" + (f" (worst line {line})" if line else "") + "."),
        evidence=[Evidence(metric=metric, value=value, threshold=threshold, source="ncu", kernel=k.name, line=line),
                  Evidence(metric="global_load_sectors_per_request", value=spr, source="ncu", kernel=k.name)],
        fixes=[
            Fix(action="Make consecutive threads touch consecutive addresses (index with threadIdx.x in the "
                       "fastest-varying dimension; transpose the loop or the data layout, e.g. AoS -> SoA).",
                expected_effect="sectors per request fall toward 4; DRAM traffic and time drop by up to the "
                                "excess factor"),
            Fix(action="Stage the access through shared memory: load a tile coalesced, then read it in the "
                       "scattered order (pad to avoid bank conflicts).",
                expected_effect="global traffic becomes coalesced; the irregular part moves on-chip"),
        ],
    )


@rule("memory.dram-saturated", family="memory", scope="ncu",
      description="The kernel runs at the DRAM roof: only moving fewer bytes helps.",
      thresholds={"memory_throughput_pct": 80.0})
def _dram(k: KernelProfile, th: Mapping[str, float], ctx: Mapping[str, Any]) -> Iterable[Finding]:
    mem = k.memory_throughput_pct
    if mem is None or mem < th["memory_throughput_pct"]:
        return
    yield Finding(
        rule="memory.dram-saturated", family="memory", severity="info", kernel=k.name,
        title="Memory system near its peak",
        diagnosis=(f"{k.name} keeps the memory system at {mem:.0f}% of peak: it is as fast as its traffic allows. "
                   "Further speed must come from moving fewer bytes, not from more parallelism."),
        evidence=[Evidence(metric="gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", value=mem,
                           threshold=th["memory_throughput_pct"], unit="%", source="ncu", kernel=k.name)],
        fixes=[
            Fix(action="Fuse this kernel with its producer or consumer so intermediates stay on chip.",
                expected_effect="saves one write and one read of every intermediate"),
            Fix(action="Reuse data through shared memory or L2-friendly tiling; read each input once.",
                expected_effect="fewer DRAM bytes per result"),
            Fix(action="Use narrower types where the accuracy policy allows (fp16/bf16 storage, fp32 math).",
                expected_effect="up to 2x fewer bytes"),
        ],
    )
