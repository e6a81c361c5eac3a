import pytest

from kernelscope.errors import InputError
from kernelscope.sandbox.flags import arch_from_flags, check_nvcc_flags, is_library_flag, normalize_arch


def test_allowed_flags_are_normalised() -> None:
    out = check_nvcc_flags(["-O3", "-use_fast_math", "-maxrregcount", "64", "-DBLOCK=256", "-std=c++17",
                            "-Xptxas", "-v,-O3", "--extra-device-vectorization", "-gencode",
                            "arch=compute_90a,code=sm_90a", "-lineinfo"])
    assert out == ["-O3", "-use_fast_math", "-maxrregcount=64", "-DBLOCK=256", "-std=c++17", "-Xptxas=-v",
                   "-Xptxas=-O3", "--extra-device-vectorization", "-gencode=arch=compute_90a,code=sm_90a",
                   "-lineinfo"]
    assert arch_from_flags(out) == "sm_90a"


@pytest.mark.parametrize("flag", [
    "-o", "-o/etc/passwd", "-I/etc", "-Xcompiler", "-ccbin=/bin/sh", "--options-file=x", "@flags.txt",
    "-include=/etc/passwd", "-DX=$(rm -rf /)", "-DX;rm", "-O3 -o x", "-maxrregcount=9999", "-arch=sm_90;ls",
    "--keep", "-L/tmp", "-lssl", "-Xptxas=--dont-merge", "-std=gnu++17", "-D", "-Xlinker",
])
def test_refused_flags_name_the_flag(flag: str) -> None:
    with pytest.raises(InputError) as e:
        check_nvcc_flags([flag])
    assert "refused" in str(e.value)


def test_flag_needing_value_at_end() -> None:
    with pytest.raises(InputError, match="needs a value"):
        check_nvcc_flags(["-maxrregcount"])


def test_too_many_flags() -> None:
    with pytest.raises(InputError, match="at most"):
        check_nvcc_flags(["-O3"] * 100)


@pytest.mark.parametrize("given,want", [("sm_90", "sm_90"), ("90", "sm_90"), ("9.0", "sm_90"),
                                        ("sm_90a", "sm_90a"), ("compute_80", "sm_80"), ("SM_100", "sm_100")])
def test_normalize_arch(given: str, want: str) -> None:
    assert normalize_arch(given) == want


@pytest.mark.parametrize("bad", ["", "hopper", "sm_9", "sm_90;rm", "../sm_90"])
def test_bad_arch(bad: str) -> None:
    with pytest.raises(InputError, match="not a GPU architecture"):
        normalize_arch(bad)


# nvcc options spelled with -l (nvcc 13 --help): only -l<library> links a library.
@pytest.mark.parametrize("flag", ["-lineinfo", "--generate-line-info", "-lto", "--lto", "-ltoir", "--ltoir",
                                  "-lib", "--lib", "-link", "--link", "-ldir=/tmp", "--libdevice-directory=/tmp",
                                  "-lcublas", "-lm"])
def test_only_library_flags_are_taken_for_libraries(flag: str) -> None:
    assert is_library_flag(flag) is (flag in ("-lcublas", "-lm"))


def test_lineinfo_is_allowed_and_no_library() -> None:
    assert check_nvcc_flags(["-lineinfo", "--generate-line-info"]) == ["-lineinfo", "--generate-line-info"]
    assert not any(is_library_flag(f) for f in check_nvcc_flags(["-lineinfo", "-O3"]))
    assert [f for f in check_nvcc_flags(["-lineinfo", "-lcublas"]) if is_library_flag(f)] == ["-lcublas"]


@pytest.mark.parametrize("flag,why", [
    ("-lto", "not on the allowlist"), ("-ltoir", "not on the allowlist"), ("-lib", "not on the allowlist"),
    ("--lib", "not on the allowlist"), ("-link", "not on the allowlist"), ("-lssl", "not on the allowlist"),
    ("-ldir=/tmp", "include/library paths"), ("--libdevice-directory=/tmp", "include/library paths"),
])
def test_other_l_options_are_refused_for_what_they_are(flag: str, why: str) -> None:
    with pytest.raises(InputError, match=why):
        check_nvcc_flags([flag])
