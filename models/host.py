"""What a host can do: GPUs, CUDA tools, CUTLASS, the evaluation pool."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field


# --------------------------------------------------------------------------- capabilities
class ToolInfo(BaseModel):
    name: str
    found: bool
    path: str | None = None
    version: str | None = None
    origin: Literal["PATH", "CUDA_HOME", "default-install", "nvidia-wheel", "nsight-install"] | None = None
    usable: bool = Field(False, description="Found and answered its version query.")
    note: str | None = Field(None, description="Why it is missing or limited, and the fix.")


class GpuInfo(BaseModel):
    index: int
    name: str
    uuid: str | None = None
    compute_capability: str | None = Field(None, description="e.g. '9.0'")
    sm_arch: str | None = Field(None, description="e.g. 'sm_90'")
    memory_total_bytes: int | None = None
    sm_count: int | None = None
    power_limit_w: float | None = None
    energy_counter: bool | None = Field(None, description="NVML total-energy counter readable.")


class CutlassInfo(BaseModel):
    """Where the CUTLASS/CuTe headers come from (compile(cutlass=true), search_cutlass, read_cutlass_file)."""

    found: bool
    root: str | None = Field(None, description="The CUTLASS root (holds include/cute; examples/ where shipped).")
    origin: Literal["env", "wheel"] | None = Field(
        None, description="env: KERNELSCOPE_CUTLASS_ROOT (a checkout); wheel: NVIDIA's nvidia-cutlass wheel.")
    version: str | None = Field(None, description="From include/cutlass/version.h.")
    include_dirs: list[str] = Field(default_factory=list, description="Added with -I by compile(cutlass=true).")
    searched_dirs: list[str] = Field(default_factory=list, description="Folders search_cutlass indexes.")
    has_examples: bool = False
    note: str | None = Field(None, description="Why it is missing or limited, and the fix.")


# --------------------------------------------------------------------------- the evaluation pool
class WorkerStatus(BaseModel):
    name: str = Field(description="gpu<N> (N: its CUDA_VISIBLE_DEVICES value), cpu<N> or build<N>.")
    kind: Literal["gpu", "cpu", "build"]
    busy: bool
    jobs: int = Field(description="Jobs finished on it since the server started.")
    busy_s: float = Field(description="Seconds it has been busy.")
    cache_dir: str | None = Field(None, description="Its own cache for what is compiled while evaluating.")


class PoolStatus(BaseModel):
    backend: Literal["local", "ray"]
    workers: list[WorkerStatus] = Field(default_factory=list)
    queued: int = Field(0, description="Evaluations waiting for a worker.")
    build_cache: str | None = Field(None, description="The shared, content-keyed build cache (local).")
    ray_address: str | None = None
    ray_resources: dict[str, float] = Field(default_factory=dict, description="The Ray cluster's total resources.")
    note: str | None = None

    @computed_field(description="GPUs evaluations can run on at once: the local GPU workers, or the Ray "  # type: ignore[prop-decorator]
                                "cluster's GPUs.")
    @property
    def gpu_workers(self) -> int:
        return sum(w.kind == "gpu" for w in self.workers) if self.backend == "local" else \
            int(self.ray_resources.get("GPU", 0))


class CapabilityReport(BaseModel):
    kernelscope_version: str
    platform: str
    python: str
    gpus: list[GpuInfo] = Field(default_factory=list)
    gpu_note: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    tools: list[ToolInfo] = Field(default_factory=list)
    default_arch: str = Field(description="Arch used when a compile request names none.")
    counters_readable: bool | None = Field(
        None, description="GPU performance counters readable by this user (None: not checked/unknown)."
    )
    counters_note: str | None = None
    nsys_can_report: bool | None = None
    nsys_note: str | None = None
    network_isolation: bool = False
    network_isolation_note: str | None = None
    isolation: bool = False
    isolation_note: str | None = None
    cutlass: CutlassInfo | None = None
    pool: PoolStatus | None = Field(None, description="Where `run` evaluations execute: the workers and their load.")
    can: dict[str, bool] = Field(default_factory=dict, description="Feature -> available here.")
    reasons: dict[str, str] = Field(default_factory=dict, description="Feature -> why not, and the fix.")

