"""The ``kernelscope`` command: ``serve`` (the MCP server), ``doctor`` (the capability report), ``optimize``
(the reference agent) and ``bench`` (the agent over a suite of problems)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Sequence

import uvicorn

from kernelscope._version import __version__
from kernelscope.agent.bench import config_from_args as bench_config
from kernelscope.agent.bench import run_cli as bench_cli
from kernelscope.agent.optimize import run_cli
from kernelscope.config import ensure_dirs, get_settings, set_settings, settings_from_env
from kernelscope.errors import KernelscopeError
from kernelscope.sandbox.pool import configure_pool
from kernelscope.server.app import create_server
from kernelscope.server.http import build_app, is_loopback, listen_message, read_token
from kernelscope.tools.capabilities import capability_report, isolation_in_force, render_report
from kernelscope.tools.run import prewarm


def _apply_settings(args: argparse.Namespace) -> None:
    roots = args.root or None
    s = settings_from_env(home=args.home, roots=roots)
    missing = [str(r) for r in s.allowed_roots if not r.is_dir()]
    if missing:
        raise SystemExit(f"kernelscope: --root must name existing directories; not found: {', '.join(missing)}")
    set_settings(s)
    ensure_dirs(s)


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more")
    return n


def _apply_isolation(args: argparse.Namespace) -> None:
    """The server requires isolation for untrusted runs unless started with --no-isolation (or
    KERNELSCOPE_ISOLATION names another mode); it says so loudly at start."""
    s = get_settings()
    if args.no_isolation:
        mode = "off"
    else:
        mode = os.environ.get("KERNELSCOPE_ISOLATION", "").strip() or ("off" if s.isolation == "off" else "required")
    set_settings(s.model_copy(update={"isolation": mode}))
    ok, note = isolation_in_force()
    if mode == "off" or not ok:
        print(f"kernelscope: WARNING: sandbox: {note}", file=sys.stderr, flush=True)


def cmd_serve(args: argparse.Namespace) -> int:
    _apply_settings(args)
    before = get_settings()
    _apply_isolation(args)
    code = _serve(args)
    if code != 0:  # a refused start (in-process callers: tests) leaves the isolation mode as it was
        set_settings(before)
    return code


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        configure_pool(args.pool, ray_address=args.ray_address, cpu_workers=args.cpu_workers,
                       build_workers=args.build_workers)
    except KernelscopeError as e:
        print(f"kernelscope: {e}", file=sys.stderr)
        return 2
    server = create_server()
    if not args.no_prewarm:
        threading.Thread(target=prewarm, name="prewarm-eval", daemon=True).start()
    if args.transport == "stdio":
        print(f"kernelscope {__version__}: serving MCP over stdio (this process's stdin and stdout)", file=sys.stderr,
              flush=True)
        server.run("stdio")
        return 0
    try:
        raw = os.environ.get("KERNELSCOPE_HTTP_TOKEN")
        if args.token_file:
            with open(args.token_file) as f:
                raw = f.readline()
        token = read_token(raw)
    except (OSError, ValueError) as e:
        print(f"kernelscope: {e}", file=sys.stderr)
        return 2
    if not is_loopback(args.host) and token is None:
        print(
            f"kernelscope: refusing to bind {args.host} without a bearer token: give one with --token-file FILE or "
            "KERNELSCOPE_HTTP_TOKEN (at least 16 characters), or bind a loopback address (127.0.0.1, ::1, "
            "localhost) and tunnel.",
            file=sys.stderr,
        )
        return 2
    app = build_app(server, host=args.host, port=args.port, path=args.path, token=token,
                    allow_origins=args.allow_origin or [], allow_hosts=args.allow_host or [])
    print(f"kernelscope {__version__}: {listen_message(args.host, args.port, args.path, token=token is not None)}",
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower())
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    _apply_settings(args)
    report = capability_report(probe=not args.no_probe)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(render_report(report))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelscope", description="GPU performance tools for LLM agents, over MCP.")
    p.add_argument("--version", action="version", version=f"kernelscope {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    _serve_parser(sub.add_parser("serve", help="run the MCP server (stdio by default)"))
    d = sub.add_parser("doctor", help="print what this host can do, and why not")
    _common(d)
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.add_argument("--no-probe", action="store_true", help="skip the active ncu/nsys probes (faster)")
    d.set_defaults(fn=cmd_doctor)
    _optimize_parser(sub.add_parser(
        "optimize", help="tree search over candidate kernels, through the MCP tools",
        description="Optimize a problem: a directory with reference.py and a starting candidate (candidate.py, "
                    "else naive.py), or a reference module and an optional candidate."))
    _bench_parser(sub.add_parser(
        "bench", help="the optimize agent over a suite: a KernelBench checkout or a folder of problems",
        description="Run `optimize` on every selected problem (one run directory each, resumable) and write the "
                    "suite's table: correctness, fast_p, geomean speedups over eager PyTorch and torch.compile, "
                    "tokens and cost (docs/bench.md)."))
    return p


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--root", action="append", metavar="DIR",
                    help="directory clients may read files from (repeatable; default: the current directory, "
                         "or KERNELSCOPE_ALLOWED_ROOTS)")
    sp.add_argument("--home", metavar="DIR",
                    help="artifact store and workspaces (default: KERNELSCOPE_HOME or ~/.cache/kernelscope)")


def _serve_parser(s: argparse.ArgumentParser) -> None:
    _common(s)
    s.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    s.add_argument("--no-isolation", action="store_true",
                   help="DANGEROUS: run every job without the bubblewrap sandbox and accept untrusted runs (eval, "
                        "programs, profiles) on a host without it; candidates then run with the server's rights "
                        "(docs/isolation.md)")
    s.add_argument("--host", default="127.0.0.1",
                   help="HTTP bind address (default loopback; any other address needs --token-file)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--path", default="/mcp", help="HTTP endpoint path")
    s.add_argument("--token-file", metavar="FILE",
                   help="HTTP: require `Authorization: Bearer <first line of FILE>` (or set KERNELSCOPE_HTTP_TOKEN); "
                        "required to bind a non-loopback address")
    s.add_argument("--allow-origin", action="append", metavar="ORIGIN",
                   help="HTTP: a browser Origin to accept besides loopback ones (repeatable)")
    s.add_argument("--allow-host", action="append", metavar="HOST[:PORT]",
                   help="HTTP on loopback: a Host header to accept besides loopback ones, e.g. behind a proxy "
                        "(repeatable; bound to another address with a token, every Host is accepted)")
    s.add_argument("--pool", choices=["local", "ray"], default=os.environ.get("KERNELSCOPE_POOL", "local"),
                   help="where `run` evaluations execute: this host's GPUs (one worker per GPU), or a Ray cluster")
    s.add_argument("--ray-address", default=os.environ.get("KERNELSCOPE_RAY_ADDRESS"), metavar="ADDRESS",
                   help="--pool ray: the cluster (HOST:PORT, ray://HOST:10001, auto), or 'local' to start one "
                        "on this host with the server")
    s.add_argument("--cpu-workers", type=_positive, metavar="N",
                   help="evaluations on the CPU at once (device='cpu'; default half the cores, at least 2)")
    s.add_argument("--build-workers", type=_positive, metavar="N",
                   help="candidate builds on the CPU at once, ahead of their GPU turn (default half the cores, "
                        "1 to 4)")
    s.add_argument("--no-prewarm", action="store_true",
                   help="do not start the evaluation worker (torch imported once) at startup")
    s.add_argument("--log-level", default=os.environ.get("KERNELSCOPE_LOG_LEVEL", "WARNING"),
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    s.set_defaults(fn=cmd_serve)


def _optimize_parser(o: argparse.ArgumentParser) -> None:
    o.add_argument("problem", help="problem directory, or a KernelBench-style reference module (Model, get_inputs, "
                                   "get_init_inputs)")
    o.add_argument("candidate", nargs="?", help="starting candidate defining ModelNew (knob-annotated with "
                                                "`@knob NAME v1 v2 ...` lines for the offline proposer)")
    o.add_argument("--out", required=True, help="run directory (reused to resume an interrupted run)")
    o.add_argument("--budget", type=int, default=20, help="evaluations, the starting candidate included")
    o.add_argument("--time", type=float, metavar="SECONDS", help="wall-clock budget (the search stops after the "
                                                                 "evaluation under way)")
    o.add_argument("--cost", type=float, metavar="USD", help="stop once the model calls' estimated cost reaches "
                                                              "this (list price, or KERNELSCOPE_LLM_PRICE)")
    o.add_argument("--strategy", choices=["mcts", "greedy", "beam", "random"], default="mcts")
    o.add_argument("--parallel", type=_positive, metavar="N",
                   help="evaluations in flight at once (several tree nodes expanded per round, with virtual loss); "
                        "default: one per GPU worker of the server's evaluation pool")
    o.add_argument("--seed", type=int, default=0, help="seeds MCTS's initial design and random search")
    o.add_argument("--uct-c", type=float, default=0.7, help="MCTS exploration constant (on log2-speedup rewards)")
    o.add_argument("--server", help="URL of a running server, or a command starting one over stdio "
                                    "(default: this Python's `kernelscope serve`)")
    o.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    o.add_argument("--timing-budget", type=float, default=0.5, help="seconds of timed runs per evaluation")
    o.add_argument("--trials", type=int, default=3, help="correctness trials per evaluation")
    o.add_argument("--tolerance", choices=["strict", "default", "kernelbench"], default="default")
    o.add_argument("--proposer", choices=["auto", "offline", "anthropic", "openai"], default="auto",
                   help="auto: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY, else offline "
                        "knob tuning")
    o.add_argument("--model", help="LLM model (OpenAI-compatible endpoints: required, the name the endpoint serves)")
    o.add_argument("--base-url", metavar="URL", help="the LLM endpoint, e.g. a local vLLM or ollama server's "
                                                     "http://localhost:8000/v1 (default: OPENAI_BASE_URL or "
                                                     "ANTHROPIC_BASE_URL, else the provider's)")
    o.add_argument("--cutlass-tools", choices=["auto", "never"], default="auto",
                   help="auto: the model may call search_cutlass/read_cutlass_file while it writes (its endpoint "
                        "must accept tools); never: no tools are offered")
    o.add_argument("--analyze", choices=["auto", "always", "never"], default="auto",
                   help="profile the reference, the start and each candidate within reach of the best with the "
                        "analyze tool (auto: when the server can run Nsight Compute)")
    o.add_argument("--analyze-max", type=int, default=32, help="profiles at most per invocation")
    o.add_argument("--feedback", choices=["none", "raw", "diagnosis"], default="diagnosis",
                   help="what the model sees of the profiles: none (no profiling at all), raw (the measured "
                        "counters only), diagnosis (the server's analyze summary; default)")
    o.add_argument("--feedback-tokens", type=int, default=1200, metavar="N",
                   help="estimated tokens of a candidate's profile in a prompt (the reference's: half)")
    o.add_argument("--profile-within", type=float, default=0.10, metavar="F",
                   help="profile every correct candidate whose speedup is at least (1 - F) x the best lower "
                        "confidence bound so far")
    o.add_argument("--objective", choices=["speed", "energy"], default="speed",
                   help="energy: measure joules per call too and reward energy gains after speed")
    o.add_argument("--live", action=argparse.BooleanOptionalAction, default=None,
                   help="the live panel (default: when stdout is a terminal)")
    o.set_defaults(fn=cmd_optimize)


def _bench_parser(b: argparse.ArgumentParser) -> None:
    b.add_argument("source", help="a KernelBench checkout (KernelBench/levelN/NN_Name.py), or a folder of problem "
                                  "modules / problem directories")
    b.add_argument("--level", action="append", metavar="N", help="KernelBench level(s): 1, 2, 3 (repeatable or "
                                                                   "comma-separated; default all)")
    b.add_argument("--problems", metavar="IDS", help="problem ids or ranges, e.g. 1-10,19 (default all)")
    b.add_argument("--candidates", metavar="DIR", help="starting candidates named like the problems "
                                                        "(DIR/levelN/NN_Name.py or DIR/NN_Name.py)")
    b.add_argument("--out", required=True, help="suite directory (reused to resume)")
    b.add_argument("--jobs", type=_positive, help="problems at once (default: one per GPU worker of the pool)")
    b.add_argument("--parallel", type=_positive, help="evaluations in flight per problem (default: the pool's "
                                                      "GPU workers shared among the jobs)")
    b.add_argument("--budget", type=_positive, default=10, help="evaluations per problem")
    b.add_argument("--time", type=float, metavar="SECONDS", help="wall-clock budget per problem")
    b.add_argument("--cost", type=float, metavar="USD", help="estimated model dollars per problem")
    b.add_argument("--compile-baseline", choices=["auto", "always", "never"], default="auto",
                   help="time the reference under torch.compile beside the best (auto: not with --device cpu)")
    b.add_argument("--strategy", choices=["mcts", "greedy", "beam", "random"])
    b.add_argument("--seed", type=int)
    b.add_argument("--server", help="URL of a running server, or a command starting one over stdio")
    b.add_argument("--device", choices=["auto", "cuda", "cpu"])
    b.add_argument("--timing-budget", type=float, default=0.5, help="seconds of timed runs per evaluation")
    b.add_argument("--trials", type=int)
    b.add_argument("--tolerance", choices=["strict", "default", "kernelbench"], default="kernelbench")
    b.add_argument("--proposer", choices=["auto", "offline", "anthropic", "openai"])
    b.add_argument("--model")
    b.add_argument("--analyze", choices=["auto", "always", "never"])
    b.add_argument("--analyze-max", type=int)
    b.set_defaults(fn=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        return bench_cli(bench_config(args))
    except ValueError as e:  # no such folder, level or ids; bad settings
        print(f"kernelscope bench: {e}", file=sys.stderr)
        return 2


def cmd_optimize(args: argparse.Namespace) -> int:
    if args.candidate is not None and not os.path.isfile(args.candidate):
        print(f"kernelscope optimize: {args.candidate} is not a file", file=sys.stderr)
        return 2
    try:
        return run_cli(args)
    except ValueError as e:  # no such problem, no knobs, bad knob values, bad settings
        print(f"kernelscope optimize: {e}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
