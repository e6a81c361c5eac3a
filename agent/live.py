"""What `kernelscope optimize` shows while it runs: a live panel on a terminal (rich), one line per
evaluation elsewhere (logs, CI, pipes)."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table

from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.problems import problem_name
from kernelscope.agent.search.strategies import SearchState
from kernelscope.agent.search.tree import Node


def _result(n: Node) -> str:
    o = n.outcome
    return f"{o.speedup:.3f}x" if o.ok and o.speedup else o.status


class PlainView:
    """One line per evaluation: `[i/budget] node id change: result; best ...`."""

    def __init__(self, budget: int, stream: TextIO | None = None) -> None:
        self.budget = budget
        self.stream = stream or sys.stdout

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def activity(self, text: str) -> None:
        return None  # the per-evaluation line says enough in a log

    def step(self, st: SearchState) -> None:
        n, best = st.nodes[-1], st.best
        print(f"[{len(st.nodes)}/{self.budget}] node {n.id} {n.change}: {_result(n)}; best {_result(best)} "
              f"(node {best.id})", file=self.stream, flush=True)


class LiveView:
    """A rich panel redrawn in place: evaluations against the budget (and time against the time budget),
    the best candidate, what is running now, and the latest results."""

    def __init__(self, budget: int, time_s: float | None, title: str, console: Any | None = None) -> None:
        self.budget, self.time_s, self.title = budget, time_s, title
        self.console = console or Console()
        self.t0 = time.monotonic()
        self.now = "starting the server"
        self.st: SearchState | None = None
        self._lock = threading.Lock()
        self._live: Any = None

    def __rich__(self) -> Any:
        with self._lock:
            st, now = self.st, self.now
        done = len(st.nodes) if st else 0
        elapsed = time.monotonic() - self.t0
        head = Table.grid(padding=(0, 2))
        head.add_row("evaluations", ProgressBar(total=self.budget, completed=done, width=30), f"{done}/{self.budget}")
        if self.time_s:
            head.add_row("time", ProgressBar(total=self.time_s, completed=min(elapsed, self.time_s), width=30),
                         f"{elapsed:.0f}/{self.time_s:.0f} s")
        else:
            head.add_row("time", "", f"{elapsed:.0f} s")
        if st is not None:
            b = st.best
            head.add_row("best", f"node {b.id}: {_result(b)}", b.change[:60])
            if b.outcome.bottleneck:
                head.add_row("bottleneck", b.outcome.bottleneck, ", ".join(b.outcome.findings[:3]))
        head.add_row("now", now, "")
        recent = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        for col in ("node", "parent", "change", "result"):
            recent.add_column(col)
        for n in (st.nodes[-6:] if st else []):
            recent.add_row(str(n.id), str(n.parent.id) if n.parent else "-", n.change[:70], _result(n))
        return Panel(Group(head, recent), title=self.title, border_style="cyan")

    def __enter__(self) -> LiveView:
        self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        with self._lock:
            self.now = "stopped: " + type(e).__name__ if e is not None else "done"
        self._live.__exit__(et, e, tb)
        if not self.console.is_terminal:
            self.console.line()  # the last frame ends without one off a terminal

    def activity(self, text: str) -> None:
        with self._lock:
            self.now = text

    def step(self, st: SearchState) -> None:
        with self._lock:
            self.st = st
            self.now = "choosing the next candidate"


def make_view(cfg: OptimizeConfig, *, live: bool | None = None) -> PlainView | LiveView:
    """The live panel when ``live`` (default: stdout is a terminal), else plain lines."""
    if live is None:
        live = sys.stdout.isatty()
    if not live:
        return PlainView(cfg.budget)
    return LiveView(cfg.budget, cfg.time_s, f"kernelscope optimize: {problem_name(cfg.reference)} ({cfg.strategy})")
