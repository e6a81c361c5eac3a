"""Isolation (issue 28): the bind lists as data, and attacks through a real MCP client. A secret planted
outside the workspace and a write outside it, tried from compile (preprocessor routes the text filter
does not see, an assembler .incbin, a symlink in the source folder) and from a CPU `run` candidate
(Python file reads, /proc, other jobs' state, /tmp): each is refused or sees nothing. The attack tests
need bubblewrap (skipped with the reason without it; CI sets KERNELSCOPE_REQUIRE_BWRAP=1 to fail instead),
and the memory-cap test runs two preprocessor bombs at once."""

from __future__ import annotations

import ast
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from _settings import override_settings
from mcp import Client

from kernelscope.config import Settings, get_settings
from kernelscope.sandbox.isolation import (
    JOB_KINDS,
    Binds,
    binds_for,
    bwrap_argv,
    infer_kind,
    isolation_status,
    plan_job,
    python_paths,
)
from kernelscope.sandbox.process import Limits, run_process
from kernelscope.server.app import mcp
from kernelscope.toolkit.toolchain import locate
from kernelscope.tools.capabilities import capability_report, render_report

pytestmark = pytest.mark.anyio

SECRET = f"TOPSECRET-{uuid.uuid4().hex}"


def _need_bwrap() -> None:
    st = isolation_status()
    if not st.available:
        if os.environ.get("KERNELSCOPE_REQUIRE_BWRAP"):
            pytest.fail(f"bubblewrap is required here: {st.detail}")
        pytest.skip(f"no isolation here: {st.detail}")


def _text(result) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(getattr(b, "text", "") for b in result.content) + repr(result.structured_content)


@pytest.fixture
def planted(tmp_path: Path, kernelscope_home: Path) -> Iterator[dict[str, Path]]:
    """A secret file and a source folder (the only allowed root) side by side in tmp_path; isolation
    required. The previous settings come back afterwards."""
    secret = tmp_path / "secret" / "token.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n")
    src = tmp_path / "src"
    src.mkdir()
    with override_settings(allowed_roots=[src], isolation="required"):
        yield {"secret": secret, "src": src, "outside": tmp_path / "written-from-the-job", "home": kernelscope_home}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp, raise_exceptions=True) as c:
        yield c


# -- the binds, as data -------------------------------------------------------------------------------------
def _binds(kind: str, ws: Path, **kw: object) -> Binds:
    return binds_for(kind, ws, argv=["nvcc"], env={"PATH": "/usr/bin:/bin"}, **kw)  # type: ignore[arg-type]


def test_every_kind_binds_the_system_read_only_and_only_its_workspace_writable(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for kind in JOB_KINDS:
        b = _binds(kind, ws)
        assert b.kind == kind and b.rw[0] == ws, b
        assert Path("/usr") in b.ro and not any(p == Path("/") for p in b.ro)
        assert Path(sys.prefix) in b.ro or any(Path(sys.prefix).is_relative_to(p) for p in b.ro)
        assert not any(p == Path.home() for p in b.ro + b.rw), "the home directory is never bound whole"
        assert Path("/etc/passwd") in b.ro and Path("/etc") not in b.ro and Path("/etc/shadow") not in b.ro
    assert _binds("compile", ws).devices == () and _binds("sass", ws).devices == ()
    assert not _binds("compile", ws).network and not _binds("compile", ws).sys
    gpu = _binds("eval", ws)
    assert gpu.sys and set(gpu.devices) == set(p for p in Path("/dev").glob("nvidia*"))


def test_only_compile_and_sass_read_the_allowed_roots_and_server_state_is_masked(tmp_path: Path) -> None:
    ws, roots, home = tmp_path / "home" / "workspaces" / "job", tmp_path / "roots", tmp_path / "home"
    ws.mkdir(parents=True)
    roots.mkdir()
    for kind in ("compile", "sass"):
        assert roots in _binds(kind, ws, readable=[roots]).ro
    for kind in ("eval", "program", "profile"):
        assert roots not in _binds(kind, ws, readable=[roots]).ro
    # a root holding the server's home: the home is masked, the job's workspace bound again above it
    b = _binds("compile", ws, readable=[tmp_path], server_state=[home])
    assert b.masked == (home,) and b.rw == (ws,)
    argv = bwrap_argv("bwrap", b, cwd=ws)
    assert argv.index(str(home)) < argv.index("--bind") and argv[-3:] == ["--chdir", str(ws), "--"]
    assert "--share-net" not in argv and "--unshare-all" in argv and "--die-with-parent" in argv


def test_sass_reads_the_one_binary_it_disassembles(tmp_path: Path) -> None:
    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    store.mkdir()
    (store / "k.cubin").write_bytes(b"x")
    (store / "other.cubin").write_bytes(b"y")
    b = binds_for("sass", ws, argv=["nvdisasm", "-c", str(store / "k.cubin")], env={})
    assert store / "k.cubin" in b.ro and store not in b.ro and store / "other.cubin" not in b.ro
    # a program's arguments are the user's: a path among them is never bound
    assert store / "k.cubin" not in binds_for("program", ws, argv=["./p", str(store / "k.cubin")], env={}).ro


def test_eval_binds_its_cache_directories_writable(tmp_path: Path) -> None:
    ws, cache = tmp_path / "ws", tmp_path / "cache" / "torch-ext"
    ws.mkdir()
    b = binds_for("eval", ws, argv=[sys.executable], env={"TORCH_EXTENSIONS_DIR": str(cache)})
    assert cache in b.rw and cache.is_dir()
    assert cache not in binds_for("program", ws, argv=["x"], env={"TORCH_EXTENSIONS_DIR": str(cache)}).rw


def test_kinds_from_the_command_line() -> None:
    assert infer_kind(["/usr/local/cuda/bin/nvcc", "-c"], untrusted=False) == "compile"
    assert infer_kind(["cuobjdump", "-sass"], untrusted=False) == "sass"
    assert infer_kind(["ncu", "--csv"], untrusted=True) == "profile"
    assert infer_kind([sys.executable, "-s", "-m", "kernelscope.harness", "c", "r"], untrusted=True) == "eval"
    assert infer_kind(["./prog"], untrusted=True) == "program"


def test_untrusted_runs_are_refused_without_isolation_unless_turned_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernelscope_home: Path) -> None:
    monkeypatch.setenv("KERNELSCOPE_BWRAP", str(tmp_path / "no-such-bwrap"))
    with override_settings(isolation="required"):
        with pytest.raises(Exception, match=r"not available here.*no bwrap binary.*--no-isolation"):
            run_process([sys.executable, "-c", "print(1)"], cwd=tmp_path, limits=Limits(isolate_network=True))
        # a compile of the user's own file still runs, with the warning in its log
        r = run_process(["nvcc", "--version"], cwd=tmp_path)
        assert r.isolation is None and r.warning and "WITHOUT isolation" in r.stderr
    with override_settings(isolation="off"):
        r = run_process([sys.executable, "-c", "print(1)"], cwd=tmp_path, limits=Limits(isolate_network=True))
        assert r.ok and r.stdout.strip() == "1" and "--no-isolation" in (r.warning or "")
        report = render_report(capability_report(probe=False))
        assert "Sandbox (bubblewrap) for every job: NO: OFF" in report


def test_capabilities_report_the_sandbox_in_force(kernelscope_home: Path) -> None:
    report = capability_report(probe=False)
    st = isolation_status()
    assert report.isolation == st.available and report.isolation_note
    if st.available:
        assert st.bwrap and st.bwrap in report.isolation_note and st.user_namespaces
    else:
        assert "Fix:" in report.isolation_note


def test_compilers_get_an_address_space_cap_and_cuda_jobs_none(tmp_path: Path) -> None:
    s: Settings = get_settings()
    plan = plan_job(["nvcc", "-c", "x.cu"], cwd=tmp_path, env={})
    assert plan.kind == "compile" and plan.address_space_bytes == s.compiler_memory_bytes
    assert s.compiler_memory_bytes and s.compiler_memory_bytes <= 8 << 30
    assert plan_job(["cuobjdump", "-sass"], cwd=tmp_path, env={}).address_space_bytes == s.compiler_memory_bytes
    if isolation_status().available or s.isolation == "off":
        assert plan_job(["./prog"], cwd=tmp_path, env={}, isolate_network=True).address_space_bytes is None


# -- attacks through a real MCP client ------------------------------------------------------------------------
async def _compile(client: Client, args: dict[str, object]) -> str:
    r = await client.call_tool("compile", args)
    return _text(r)


async def test_compile_preprocessor_routes_see_nothing(client: Client, planted: dict[str, Path]) -> None:
    _need_bwrap()
    if locate("nvcc")[0] is None:
        pytest.skip("nvcc is not installed")
    secret = planted["secret"]
    routes = [
        f'#line 1 "{secret}"\n#error boom\n',  # the diagnostic would quote line 1 of the "source"
        f'#/**/include "{secret}"\n__global__ void k() {{}}\n',  # a comment hides the include from the filter
        f'#  /* x */ include <{secret}>\n__global__ void k() {{}}\n',
        # the host assembler embeds the whole file in the object
        f'asm(".section .rodata\\n.incbin \\"{secret}\\"\\n.previous");\n__global__ void k() {{}}\n',
    ]
    for src in routes:
        for output in ("cubin", "executable"):
            text = await _compile(client, {"source": src, "output": output})
            assert SECRET not in text, (src, text)


async def test_compile_symlink_in_the_source_folder_sees_nothing(client: Client, planted: dict[str, Path]) -> None:
    _need_bwrap()
    if locate("nvcc")[0] is None:
        pytest.skip("nvcc is not installed")
    src = planted["src"]
    (src / "evil.h").symlink_to(planted["secret"])
    (src / "main.cu").write_text('#/**/include "evil.h"\n__global__ void k() {}\n')
    text = await _compile(client, {"path": str(src / "main.cu")})
    assert SECRET not in text


CANDIDATE = '''
import os, torch
found = []
def probe(name, fn):
    try:
        found.append(f"{{name}}=" + repr(repr(fn()))[:300].replace("|", "/"))
    except Exception as e:
        found.append(f"{{name}}!" + type(e).__name__)
probe("secret", lambda: open({secret!r}).read())
probe("secretdir", lambda: os.listdir({secretdir!r}))
probe("artifacts", lambda: os.listdir({artifacts!r}))
probe("home", lambda: os.listdir({home!r}))
probe("passwd", lambda: str(len(open("/etc/passwd").read())))
probe("environ1", lambda: open("/proc/1/environ", "rb").read())
probe("server_environ", lambda: open("/proc/{server}/environ", "rb").read())
probe("write", lambda: open({outside!r}, "w").write("x"))
probe("tmpwrite", lambda: open({tmpfile!r}, "w").write("x"))
raise RuntimeError("PROBE " + " | ".join(found))

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


async def test_run_candidate_on_cpu_sees_no_secret_and_writes_nowhere(
        client: Client, planted: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _need_bwrap()
    pytest.importorskip("torch", reason="the eval harness needs torch")
    marker = f"SERVERENV-{uuid.uuid4().hex}"
    monkeypatch.setenv("KS_ISOLATION_MARKER", marker)
    tmpfile = Path("/tmp") / f"ks-escape-{uuid.uuid4().hex}"
    cand = CANDIDATE.format(secret=str(planted["secret"]), secretdir=str(planted["secret"].parent),
                            artifacts=str(planted["home"] / "artifacts"), home=str(Path.home()),
                            server=os.getpid(), outside=str(planted["outside"]), tmpfile=str(tmpfile))
    ref = (Path(__file__).parent / "evalcases" / "ref_softmax.py").read_text()
    r = await client.call_tool("run", {"mode": "eval", "reference": ref, "candidate": cand, "device": "cpu",
                                       "trials": 1, "timing_budget_s": 0.1})
    text = _text(r)
    assert SECRET not in text and marker not in text, text
    error = r.structured_content["eval"]["error"] or ""
    assert "PROBE " in error, text
    seen = dict(item.replace("!", "=", 1).split("=", 1) for item in error.split("PROBE ", 1)[1].split(" | "))
    for name in ("secret", "secretdir", "artifacts", "write", "server_environ"):
        assert seen[name].startswith(("FileNotFoundError", "PermissionError", "OSError")), (name, seen)
    # the home directory is not there: at most the folders leading to the bound Python installation
    bound = {p.relative_to(Path.home()).parts[0] for p in python_paths() if p.is_relative_to(Path.home())}
    if not seen["home"].startswith("FileNotFoundError"):
        assert set(ast.literal_eval(ast.literal_eval(seen["home"]))) <= bound, seen["home"]
    assert ast.literal_eval(ast.literal_eval(seen["passwd"])).isdigit()  # system files are readable
    assert "KS_ISOLATION_MARKER" not in seen["environ1"]  # /proc/1 is the sandbox's own init
    assert not planted["outside"].exists() and not tmpfile.exists()  # the job's /tmp was private


async def test_two_compile_bombs_at_once_are_stopped_and_the_server_answers(
        client: Client, kernelscope_home: Path) -> None:
    if locate("nvcc")[0] is None:
        pytest.skip("nvcc is not installed")
    levels = "\n".join(f"#define A{i} " + ",".join([f"A{i - 1}"] * 10) for i in range(1, 8))
    bomb = "#define A0 1,1,1,1,1,1,1,1,1,1\n" + levels + "\n__device__ int t[] = {{ A7, A7, A7, {n} }};\n" \
        "__global__ void k(int* o) {{ o[0] = t[threadIdx.x]; }}\n"
    answers: list[str] = []
    with override_settings(compiler_memory_bytes=512 << 20):
        async def one(n: int) -> None:
            answers.append(await _compile(client, {"source": bomb.format(n=n)}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 1)
            tg.start_soon(one, 2)
        ok = await client.call_tool("compile", {"source": "__global__ void k(int* o) { o[0] = 1; }\n"})
    assert len(answers) == 2
    for text in answers:
        assert "compiler memory cap: 512 MiB" in text and "resident" in text, text[-2000:]
    assert not ok.is_error and ok.structured_content["success"] is True


def test_the_servers_own_probes_are_trusted_and_labelled_runs_are_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not plan_job(["nvidia-smi", "-L"], cwd=tmp_path, env={}).warning or get_settings().isolation == "off"
    assert plan_job(["cu++filt", "_Z1kv"], cwd=tmp_path, env={}).kind == "sass"
    monkeypatch.setenv("KERNELSCOPE_BWRAP", str(tmp_path / "none"))
    with override_settings(isolation="required"):
        assert plan_job(["nvidia-smi", "-L"], cwd=tmp_path, env={}).prefix == ()  # a probe still runs
        for kw in ({"kind": "program"}, {"isolate_network": True}):
            with pytest.raises(Exception, match="not available here"):
                plan_job(["./prog"], cwd=tmp_path, env={}, **kw)  # type: ignore[arg-type]
        with pytest.raises(Exception, match="not available here"):
            plan_job([sys.executable, "-s", "-m", "kernelscope.harness", "c", "r"], cwd=tmp_path, env={})
