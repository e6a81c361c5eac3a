"""The CUPTI tracer without a GPU: it builds with this machine's nvcc and CUPTI, exports the injection
entry point, is cached, writes its meta and end lines, formats every record kind as documented, and
missing CUPTI pieces are reported with the fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _cupti import build_with_cupti

from kernelscope.config import Settings
from kernelscope.errors import NotAvailable
from kernelscope.measure import cupti
from kernelscope.measure.cupti import LIBRARY_NAME, CuptiPaths, build_tracer, cupti_paths, tracer_env

REAL_WHEEL_ROOTS = cupti._wheel_roots
KINDS = {"concurrent_kernel", "memcpy", "memset", "runtime", "driver", "synchronization", "marker"}


@pytest.fixture(scope="module")
def tracer(cupti_build_paths: CuptiPaths, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cupti-home")
    return build_tracer(Settings(home=home, allowed_roots=[home]))


def _run_python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def _env_without_trace_dir() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("KERNELSCOPE_TRACE_DIR", "CUDA_INJECTION64_PATH")}


def test_tracer_builds_and_exports_the_injection_entry(tracer: Path, tmp_path: Path) -> None:
    assert tracer.name == LIBRARY_NAME and tracer.read_bytes()[:4] == b"\x7fELF"
    key = tracer.parent.name
    assert tracer.parent.parent.parts[-2:] == ("cache", "cupti") and len(key) == 16 and int(key, 16) >= 0
    assert not [p for p in tracer.parent.parent.iterdir() if p.name.startswith(".build-")]  # no leftovers
    if shutil.which("nm"):
        syms = subprocess.run(["nm", "-D", "--defined-only", str(tracer)], capture_output=True, text=True).stdout
        assert any(line.split()[-1] == "InitializeInjection" for line in syms.splitlines() if line.strip())
    code = f"""
        import ctypes, os
        lib = ctypes.CDLL({str(tracer)!r}, mode=os.RTLD_LAZY)
        print(hasattr(lib, "InitializeInjection"))
    """
    r = _run_python(code, _env_without_trace_dir(), tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr


def test_second_build_is_the_cached_library(tracer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tracer.parent.parent.parent.parent
    before = tracer.stat().st_mtime_ns

    def no_compile(*_: object) -> None:
        raise AssertionError("the cached library was rebuilt")

    monkeypatch.setattr(cupti, "_compile", no_compile)
    again = build_tracer(Settings(home=home, allowed_roots=[home]))
    assert again == tracer and tracer.stat().st_mtime_ns == before


def test_without_trace_dir_the_injection_does_nothing(tracer: Path, tmp_path: Path) -> None:
    code = f"""
        import ctypes, os
        lib = ctypes.CDLL({str(tracer)!r})
        print(lib.InitializeInjection())
    """
    r = _run_python(code, _env_without_trace_dir(), tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr
    assert not list(tmp_path.rglob("trace-*.jsonl")) and "kernelscope-trace" not in r.stderr


def test_injection_writes_meta_first_and_end_last_and_survives_fork(tracer: Path, tmp_path: Path) -> None:
    """No GPU here: CUPTI may refuse every activity kind, which must be recorded, never fatal."""
    tdir = tmp_path / "trace"
    tdir.mkdir()
    code = f"""
        import ctypes, os, sys
        lib = ctypes.CDLL({str(tracer)!r})
        print(lib.InitializeInjection(), lib.InitializeInjection(), os.getpid(), flush=True)
        child = os.fork()
        if child == 0:
            sys.exit(0)  # the child's exit handler must neither hang nor write
        os.waitpid(child, 0)
    """
    r = _run_python(code, {**_env_without_trace_dir(), "KERNELSCOPE_TRACE_DIR": str(tdir)}, tmp_path)
    assert r.returncode == 0, r.stderr
    first, second, pid = r.stdout.split()
    assert first == second == "1"
    assert [p.name for p in tdir.iterdir()] == [f"trace-{pid}.jsonl"]
    lines = (tdir / f"trace-{pid}.jsonl").read_text(encoding="utf-8").splitlines()
    recs = [json.loads(ln) for ln in lines]
    meta, end = recs[0], recs[-1]
    assert set(meta) == {"t", "pid", "cupti_api", "ts", "disabled", "cupti"} and meta["t"] == "meta"
    assert "libcupti" in meta["cupti"]
    assert meta["pid"] == int(pid) and meta["cupti_api"] > 0 and isinstance(meta["ts"], int)
    assert set(meta["disabled"]) <= KINDS
    assert end == {"t": "end", "ts": end["ts"]} and end["ts"] >= meta["ts"]
    assert all(rec["t"] in ("dropped", "kernel", "memcpy", "memset", "api", "sync", "marker") for rec in recs[1:-1])
    for line in r.stderr.splitlines():
        assert line.startswith("kernelscope-trace: "), line
    for kind in meta["disabled"]:
        assert f"cuptiActivityEnable({kind})" in r.stderr


HARNESS = r"""
#include "cupti_trace.cpp"
#include <iostream>

template <class R> void put(std::string& out, R& r) { format_record(out, reinterpret_cast<CUpti_Activity*>(&r)); }

int main() {
    std::string out;
    const char* tricky[] = {"quote\" back\\slash /", "ctl\x01\x1f\n\r\t\b\f",
                            "utf8 \xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80", "bad \xff x \xe2\x82"};
    for (const char* t : tricky) Line(out, "str").s("v", t).close();
    Line(out, "str").s("v", nullptr).close();

    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL; k.name = "_Z5saxpyifPKfPf";
    k.start = 1000; k.end = 2000; k.deviceId = 1; k.contextId = 2; k.streamId = 7; k.correlationId = 42;
    k.gridX = 256; k.gridY = 1; k.gridZ = 1; k.blockX = 128; k.blockY = 2; k.blockZ = 1;
    k.registersPerThread = 32; k.staticSharedMemory = 1024; k.dynamicSharedMemory = 2048;
    k.localMemoryPerThread = 16; k.graphId = 3;
    put(out, k);
    k.name = "not_mangled \"x\"";
    put(out, k);

    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY; m.copyKind = 1; m.srcKind = 1; m.dstKind = 3;
    m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC; m.bytes = 4096; m.start = 10; m.end = 20; m.contextId = 1;
    m.streamId = 13; m.correlationId = 5;
    put(out, m);

    CUpti_ActivityMemset4 s{};
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET; s.value = 255; s.bytes = 512; s.memoryKind = 3; s.start = 30; s.end = 40;
    s.contextId = 1; s.streamId = 7; s.correlationId = 6; s.graphId = 9;
    put(out, s);

    CUpti_ActivityAPI a{};
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME; a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    a.start = 5; a.end = 9; a.threadId = 1234; a.correlationId = 42;
    put(out, a);
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER; a.cbid = CUPTI_DRIVER_TRACE_CBID_cuProfilerStop; a.returnValue = 3;
    put(out, a);

    CUpti_ActivitySynchronization2 y{};
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION; y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    y.start = 50; y.end = 60; y.contextId = 1; y.correlationId = 8;
    y.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE; y.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    put(out, y);

    CUpti_ActivityMarker2 mk{};
    mk.kind = CUPTI_ACTIVITY_KIND_MARKER; mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_START; mk.timestamp = 70; mk.id = 4;
    mk.name = "range \"one\""; mk.domain = "dom";
    put(out, mk);
    mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_END; mk.timestamp = 80; mk.name = nullptr; mk.domain = nullptr;
    put(out, mk);

    CUpti_Activity other{};
    other.kind = CUPTI_ACTIVITY_KIND_DEVICE;  // a kind the tracer does not write: skipped
    put(out, other);
    std::cout << out;
    return 0;
}
"""


def test_record_formats_and_json_escaping(cupti_build_paths: CuptiPaths, tmp_path: Path) -> None:
    """Compile the tracer's own formatting code into a small program and feed it synthetic records."""
    exe = build_with_cupti(cupti_build_paths, tmp_path, "harness", HARNESS, cupti.SOURCE.parent, timeout_s=300)
    r = subprocess.run([str(exe)], capture_output=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(ln) for ln in r.stdout.decode("utf-8").splitlines()]  # strict UTF-8: must decode
    strs = [x["v"] for x in recs if x["t"] == "str"]
    assert strs == ['quote" back\\slash /', "ctl\x01\x1f\n\r\t\b\f", "utf8 é → 😀", "bad \ufffd x \ufffd\ufffd", None]
    rest = [x for x in recs if x["t"] != "str"]
    kernel = {"t": "kernel", "name": "saxpy(int, float, float const*, float*)", "mangled": "_Z5saxpyifPKfPf",
              "start": 1000, "end": 2000, "dev": 1, "ctx": 2, "stream": 7, "corr": 42, "grid": [256, 1, 1],
              "block": [128, 2, 1], "regs": 32, "ssmem": 1024, "dsmem": 2048, "lmem": 16, "graph": 3}
    assert rest[0] == kernel
    assert rest[1] == {**kernel, "name": 'not_mangled "x"', "mangled": 'not_mangled "x"'}
    assert rest[2] == {"t": "memcpy", "kind": 1, "src": 1, "dst": 3, "bytes": 4096, "start": 10, "end": 20, "dev": 0,
                       "ctx": 1, "stream": 13, "corr": 5, "async": 1, "graph": 0}
    assert rest[3] == {"t": "memset", "bytes": 512, "value": 255, "mem": 3, "start": 30, "end": 40, "dev": 0,
                       "ctx": 1, "stream": 7, "corr": 6, "async": 0, "graph": 9}
    rt, drv = rest[4], rest[5]
    assert rt == {"t": "api", "dom": "rt", "cbid": 211, "name": rt["name"], "start": 5, "end": 9, "tid": 1234,
                  "corr": 42, "ret": 0}
    assert rt["name"].startswith("cudaLaunchKernel")
    assert drv["dom"] == "drv" and drv["cbid"] == 309 and drv["name"] == "cuProfilerStop" and drv["ret"] == 3
    assert rest[6] == {"t": "sync", "type": 4, "start": 50, "end": 60, "ctx": 1, "stream": -1, "corr": 8, "event": -1}
    assert rest[7] == {"t": "marker", "flags": 2, "ts": 70, "id": 4, "name": 'range "one"', "domain": "dom"}
    assert rest[8] == {"t": "marker", "flags": 4, "ts": 80, "id": 4, "name": None, "domain": None}
    assert len(rest) == 9  # the unknown kind wrote nothing


def test_tracer_env(cupti_build_paths: CuptiPaths, tmp_path: Path) -> None:
    lib = tmp_path / LIBRARY_NAME
    env = tracer_env(lib, tmp_path / "trace")
    assert env == {"CUDA_INJECTION64_PATH": str(lib), "NVTX_INJECTION64_PATH": str(lib),
                   "KERNELSCOPE_TRACE_DIR": str(tmp_path / "trace")}


# ------------------------------------------------------------------------------ discovery, faked
def _fake_roots(monkeypatch: pytest.MonkeyPatch, *roots: Path) -> None:
    monkeypatch.setattr(cupti, "_toolkit_roots", lambda: list(roots))
    monkeypatch.setattr(cupti, "_wheel_roots", lambda: [])


def test_missing_cupti_is_not_available_with_a_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_roots(monkeypatch, tmp_path)
    with pytest.raises(NotAvailable) as e:
        cupti_paths()
    assert "cupti.h and libcupti.so" in e.value.why and str(tmp_path) in e.value.why
    assert "nvidia-cuda-cupti" in e.value.fix and "CUPTI" in e.value.fix

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cupti.h").write_text("")
    with pytest.raises(NotAvailable) as e:
        cupti_paths()
    assert "libcupti.so was not found" in e.value.why and "cupti.h" not in e.value.why

    home = tmp_path / "home"
    with pytest.raises(NotAvailable, match=r"libcupti|nvcc"):  # nvcc is looked for first
        build_tracer(Settings(home=home, allowed_roots=[home]))


def test_discovery_layouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Toolkit targets/<triple>/ layout with only versioned libraries, and a wheel with include/ and lib/."""
    tk = tmp_path / "cuda"
    (tk / "targets" / "x86_64-linux" / "include").mkdir(parents=True)
    (tk / "targets" / "x86_64-linux" / "include" / "cupti.h").write_text("")
    (tk / "targets" / "x86_64-linux" / "lib").mkdir()
    for v in ("12", "13", "13.0.85"):
        (tk / "targets" / "x86_64-linux" / "lib" / f"libcupti.so.{v}").write_bytes(b"")
    _fake_roots(monkeypatch, tk)
    p = cupti_paths()
    assert p.include_dir == tk / "targets" / "x86_64-linux" / "include"
    assert p.library.name == "libcupti.so.13.0.85" and p.lib_dir == p.library.parent

    wheel = tmp_path / "site" / "nvidia" / "cuda_cupti"
    (wheel / "include").mkdir(parents=True)
    (wheel / "include" / "cupti.h").write_text("")
    (wheel / "lib").mkdir()
    (wheel / "lib" / "libcupti.so.13").write_bytes(b"")
    site = str(tmp_path / "site")
    monkeypatch.setattr(cupti, "_toolkit_roots", lambda: [tmp_path / "empty"])
    monkeypatch.setattr(cupti, "_wheel_roots", REAL_WHEEL_ROOTS)
    monkeypatch.setattr(cupti.sysconfig, "get_paths", lambda: {"purelib": site, "platlib": site})
    monkeypatch.setattr(sys, "path", [site])
    p = cupti_paths()
    assert p.include_dir == wheel / "include" and p.library == wheel / "lib" / "libcupti.so.13"


def test_compiler_errors_are_not_available_with_the_output(cupti_build_paths: CuptiPaths, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "cupti_trace.cpp"
    broken.write_text('#include <cupti.h>\nextern "C" int InitializeInjection(void) { return no_such_name; }\n')
    monkeypatch.setattr(cupti, "SOURCE", broken)
    home = tmp_path / "home"
    with pytest.raises(NotAvailable) as e:
        build_tracer(Settings(home=home, allowed_roots=[home]))
    assert "did not build" in e.value.why and "no_such_name" in e.value.why
    assert not [p for p in (home / "cache" / "cupti").iterdir()]  # the failed build left nothing behind
