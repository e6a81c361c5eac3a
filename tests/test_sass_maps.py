"""tools.sass_maps: the SASS that the CUPTI collector's per-instruction records are read against. The modules a
deep launch ran from come from the collector's output folder, which the profiled program can write into too: a
cubin is read only by the collector's own name for it, never through a link, within a size limit, and a map
that does not hold every recorded offset is not used. Real cubins are built here with nvcc (skipped without it);
tests/fixtures/collector/eval/ holds what analyze's run left for two eval candidates on the H100."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelscope.tools import sass_maps
from kernelscope.tools.sass_maps import covering, instructions_by_offset, ran_instructions

NAME = "cubin-00000000deadbeef.cubin"
BARRIER = "smsp__pcsamp_warps_issue_stalled_barrier"
SOURCE = r"""
extern "C" __global__ void gather(const float* __restrict__ x, const int* __restrict__ idx, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[idx[i]];
}
"""


@pytest.fixture(scope="module")
def cubin(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed here")
    tmp = tmp_path_factory.mktemp("sass-maps")
    (tmp / "k.cu").write_text(SOURCE)
    subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-lineinfo", "-o", str(tmp / "k.cubin"), str(tmp / "k.cu")],
                   check=True, capture_output=True, timeout=300)
    return (tmp / "k.cubin").read_bytes()


def test_a_cubin_in_the_folder_gives_its_kernels_instructions(tmp_path: Path, cubin: bytes) -> None:
    (tmp_path / NAME).write_bytes(cubin)
    maps = ran_instructions(tmp_path, {"gather": NAME, "absent": NAME})
    assert list(maps) == ["gather"]  # a kernel the module does not hold gets nothing
    code = maps["gather"]
    assert code[0].startswith("LDC") and any(t.startswith("LDG") for t in code.values())
    assert all(a % 16 == 0 for a in code)


def test_a_cubin_one_byte_short_is_made_whole(tmp_path: Path, cubin: bytes) -> None:
    (tmp_path / NAME).write_bytes(cubin[:-1])  # as CuPy's getCUBIN hands a cubin over
    assert "gather" in ran_instructions(tmp_path, {"gather": NAME})


@pytest.mark.parametrize("plant", ["link", "directory", "not-elf", "host-elf", "too-large", "other-name"])
def test_what_the_program_could_plant_in_the_folder_is_not_read(tmp_path: Path, plant: str, cubin: bytes,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside.cubin"
    outside.write_bytes(cubin)
    folder = tmp_path / "metrics"
    folder.mkdir()
    name = NAME
    if plant == "link":
        (folder / NAME).symlink_to(outside)
    elif plant == "directory":
        (folder / NAME).mkdir()
    elif plant == "not-elf":
        (folder / NAME).write_bytes(b"not a cubin" * 100)
    elif plant == "host-elf":
        (folder / NAME).write_bytes(Path(shutil.which("true") or "/bin/true").read_bytes())
    elif plant == "too-large":
        monkeypatch.setattr(sass_maps, "CUBIN_MAX_BYTES", 1024)
        (folder / NAME).write_bytes(cubin)
    else:  # a name the collector never writes: a path out of the folder, or another file
        name = "../outside.cubin"
    assert ran_instructions(folder, {"gather": name}) == {}


def test_a_map_that_misses_a_recorded_offset_is_not_used() -> None:
    maps = {"k": {0: "LDC R1, c[0x0][0x28]", 16: "EXIT"}, "j": {0: "EXIT"}}
    kept = covering(maps, {"k": [0, 16], "j": [0, 32], "none": [0]})
    assert kept == {"k": maps["k"]}  # j's build is not the one that ran (offset 32), none has no map


def test_the_listing_is_read_the_same_from_the_folder_and_from_nvdisasm(tmp_path: Path, cubin: bytes) -> None:
    from kernelscope.tools.sass import disassemble

    (tmp_path / NAME).write_bytes(cubin)
    (tmp_path / "k.cubin").write_bytes(cubin)
    assert ran_instructions(tmp_path, {"gather": NAME}) == instructions_by_offset(disassemble(tmp_path / "k.cubin"))


EVAL = Path(__file__).parent / "fixtures" / "collector" / "eval"


@pytest.mark.parametrize(("case", "kernel"), [("row-sum-nvrtc", "row_sum_naive"),
                                              ("softmax-load-inline", "softmax_rows")])
def test_an_eval_candidates_records_read_against_the_module_it_ran_from(case: str, kernel: str) -> None:
    """Recorded on the H100 by analyze's default path (tests/fixtures/collector/capture_eval.py): a fast-path
    kernel built by NVRTC and a load_inline extension, both built with line tables. The module each ran from
    holds every instruction the collector recorded, and with it the lines carry the SASS-derived counters."""
    from kernelscope.measure.collector import collected_profile, load_collected
    from kernelscope.models.profile import GLOBAL_LOAD_INST

    got = load_collected(EVAL / case)
    [src] = got.sources
    assert src.name == kernel and src.cubin and (EVAL / case / src.cubin).is_file()
    maps = covering(ran_instructions(EVAL / case, {src.name: src.cubin}), {kernel: [pc.pc for pc in src.pcs]})
    assert set(maps) == {kernel}
    assert all(pc.file and pc.line for pc in src.pcs if pc.stall and sum(pc.stall) > 100)  # -lineinfo builds
    read = next(k for k in collected_profile(got, sass=maps).kernels if k.name == kernel)
    blind = next(k for k in collected_profile(got).kernels if k.name == kernel)
    loads = {s.line: s.counters[GLOBAL_LOAD_INST] for s in read.source_lines if s.counters.get(GLOBAL_LOAD_INST)}
    barrier = {s.line for s in read.source_lines if s.counters.get(BARRIER)}
    blind_barrier = {s.line for s in blind.source_lines if s.counters.get(BARRIER)}
    assert not any(s.counters.get(GLOBAL_LOAD_INST) for s in blind.source_lines)  # nothing derived without it
    if case == "row-sum-nvrtc":  # NVRTC names the source <kernel>.cu; line 8 of it reads x: 8192 rows x 8192 loads
        assert loads == {8: 8192 * 8192 / 32} and read.source_lines[0].file.endswith("/row_sum_naive.cu")
    else:  # the two __syncthreads() (cuda.cu 65, 75): their deferred waits counted on them, not on the next line
        assert barrier == {65, 75} and blind_barrier == {66, 76}


def test_the_module_that_ran_comes_first_and_the_artifacts_listing_fills_in(tmp_path: Path, cubin: bytes) -> None:
    from kernelscope.measure.collector import Collected, CollectedPc, CollectedSource
    from kernelscope.tools.sass_maps import run_instructions

    (tmp_path / NAME).write_bytes(cubin)
    ran = ran_instructions(tmp_path, {"gather": NAME})["gather"]
    pcs = [CollectedPc(pc=pc) for pc in sorted(ran)[:4]]
    got = Collected(sources=[CollectedSource(seq=1, name="gather", cubin=NAME, pcs=pcs),
                             CollectedSource(seq=2, name="other", pcs=[CollectedPc(pc=0)]),
                             CollectedSource(seq=3, name="stale", pcs=[CollectedPc(pc=64)])])
    static = {"gather": {0: "EXIT"}, "other": {0: "EXIT"}, "stale": {0: "EXIT"}}
    maps = run_instructions(tmp_path, got, static)
    assert maps["gather"] == ran  # the module it ran from, not the listing
    assert maps["other"] == {0: "EXIT"}  # no module written: the artifact's listing
    assert "stale" not in maps  # the listing lacks a recorded offset: another build
