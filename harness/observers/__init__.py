"""The harness' observers: pluggable measurements around the timed rounds (see ``base.Observer``).

``default_observers`` is the set a job runs with: on a GPU the host cover and the L2 flush probe (in
that order: the cover's wait comes before the flush on the GPU), the L2-persistence reset (before the
flush), the side-stream check, the speed-of-light check, and energy where asked for."""

from __future__ import annotations

from kernelscope.harness.observers.base import Measured, Observer, Round, TimingRun, WarmUp
from kernelscope.harness.observers.energy import Energy
from kernelscope.harness.observers.flush_probe import FlushProbe
from kernelscope.harness.observers.host_cover import HostCover
from kernelscope.harness.observers.l2_persistence import L2Persistence
from kernelscope.harness.observers.side_streams import SideStreams
from kernelscope.harness.observers.speed_of_light import SpeedOfLight
from kernelscope.harness.protocol import Config

__all__ = ["Energy", "FlushProbe", "HostCover", "L2Persistence", "Measured", "Observer", "Round", "SideStreams",
           "SpeedOfLight", "TimingRun", "WarmUp", "default_observers"]


def default_observers(cfg: Config, cuda: bool) -> list[Observer]:
    observers: list[Observer] = []
    if cuda:
        observers.append(HostCover(cfg.host_cover_us))
        observers.append(L2Persistence())  # before the flush: persisting lines reset, so the flush evicts them
        if cfg.flush_l2:
            observers.append(FlushProbe(cfg.flush_mb))
    observers.append(SideStreams())
    if cuda:
        observers.append(SpeedOfLight())
    if cuda and cfg.measure_energy:
        observers.append(Energy(cfg.energy_window_s))
    return observers
