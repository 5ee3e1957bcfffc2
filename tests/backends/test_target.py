"""Target strings: parsing, canonical form, host detection, defaults, flags and errors."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autosched.hardware import compiler_arch, host_arch, host_hardware, parse_size
from autosched.target import Target, TargetError, target_kinds

SPECS = [
    "c",
    "c -mcpu=znver3",
    "c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72",
    "c -cc=clang",
    "c -num-threads=1",
    "c -vector-bytes=32 -cores=2 -l1=32768 -l2=524288 -l3=8M",
    "c -cc=clang -mtriple=aarch64-linux-gnu",
    "c -cc=arm-linux-gnueabihf-gcc -mcpu=cortex-a7 -mfpu=neon-vfpv4",
    "c -cflags='-funroll-loops -DNAME=\"a b\"'",
    "cuda",
    "cuda -arch=sm_80 -max-threads-per-block=512 -shared-memory-bytes=96K -warp-size=32",
    "opencl",
    "opencl -max-threads-per-block=128 -warp-size=8",
]


@pytest.mark.parametrize("spec", SPECS)
def test_canonical_string_round_trips(spec: str) -> None:
    t = Target.parse(spec)
    assert Target.parse(str(t)) == t
    assert str(Target.parse(str(t))) == str(t)
    assert hash(Target.parse(spec)) == hash(t)


def test_kinds_registered() -> None:
    assert {"c", "cuda", "opencl"} <= set(target_kinds())


def test_host_defaults_come_from_the_machine() -> None:
    t = Target.parse("c")
    hw = host_hardware()
    assert (t.kind, t.cc, t.mcpu) == ("c", "gcc", None)
    assert (t.cores, t.vector_bytes, t.l1, t.l2, t.l3) == (hw.cores, hw.vector_bytes, hw.l1, hw.l2, hw.l3)
    assert t.num_threads == t.cores
    assert not t.is_cross
    assert t.machine == host_arch()
    assert Target.host() == t


# The host detection checked against what other tools say about this machine: /proc/cpuinfo's flags
# line (read here, not through autosched), coreutils' nproc and util-linux's lscpu.


def _cpuinfo_flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text()
    lines = [line for line in text.splitlines() if line.split(":")[0].strip() == "flags"]
    if not lines:
        pytest.skip("needs an x86 /proc/cpuinfo with a flags line (Linux on x86)")
    return set(lines[0].split(":", 1)[1].split())


@pytest.mark.skipif(host_arch() not in ("x86_64", "x86"), reason="x86 ISA flags: needs an x86 host")
def test_host_vector_width_agrees_with_the_cpuinfo_flags() -> None:
    flags = _cpuinfo_flags()
    widest = 64 if "avx512f" in flags else 32 if "avx" in flags or "avx2" in flags else 16
    assert host_hardware().vector_bytes == widest, sorted(f for f in flags if f.startswith(("avx", "sse")))


@pytest.mark.requires("gcc")
@pytest.mark.skipif(host_arch() not in ("x86_64", "x86"), reason="x86 ISA macros: needs an x86 host")
def test_host_vector_width_agrees_with_gcc_march_native() -> None:
    """The width kernels are compiled for (-march=native) is the detected one."""
    out = subprocess.run(["gcc", "-march=native", "-dM", "-E", "-x", "c", "/dev/null"],
                         capture_output=True, text=True, check=True, timeout=60)
    macros = set(re.findall(r"^#define (\w+)", out.stdout, re.MULTILINE))
    widest = 64 if "__AVX512F__" in macros else 32 if "__AVX__" in macros else 16
    assert host_hardware().vector_bytes == widest


@pytest.mark.skipif(shutil.which("nproc") is None, reason="needs nproc (apt-get install coreutils)")
def test_host_cores_agree_with_nproc() -> None:
    out = subprocess.run(["nproc"], capture_output=True, text=True, check=True, timeout=30)
    assert host_hardware().cores == int(out.stdout)


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="needs lscpu (apt-get install util-linux)")
def test_host_cache_sizes_agree_with_lscpu() -> None:
    out = subprocess.run(["lscpu", "--json", "--bytes", "--caches=NAME,ONE-SIZE,TYPE,LEVEL"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        pytest.skip(f"lscpu cannot list caches here: {out.stderr.strip()}")
    sizes = {1: 0, 2: 0, 3: 0}
    for cache in json.loads(out.stdout)["caches"]:
        if int(cache["level"]) in sizes and cache["type"] in ("Data", "Unified"):
            sizes[int(cache["level"])] = int(cache["one-size"])
    if not sizes[1] or not sizes[2]:
        pytest.skip(f"lscpu reports no L1d/L2 size here: {out.stdout}")
    hw = host_hardware()
    assert (hw.l1, hw.l2, hw.l3) == (sizes[1], sizes[2], sizes[3])


def test_options_override_detection() -> None:
    t = Target.parse("c -vector-bytes=32 -cores=2 -l1=32768 -l2=512K -l3=0 -num-threads=1")
    assert (t.vector_bytes, t.cores, t.l1, t.l2, t.l3, t.num_threads) == (32, 2, 32768, 524288, 0, 1)
    assert Target.parse("c -cores=3").num_threads == 3


def test_cross_target_uses_arch_defaults() -> None:
    t = Target.parse("c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72")
    assert t.machine == "aarch64"
    assert t.is_cross == (host_arch() != "aarch64")
    if t.is_cross:
        assert (t.vector_bytes, t.cores, t.l1, t.l2) == (16, 4, 32 << 10, 1 << 20)
        assert t.num_threads == 4
    assert Target.parse("c -cc=aarch64-linux-gnu-gcc -cores=8 -l2=2M").l2 == 2 << 20
    assert Target.parse("c -cc=clang -mtriple=aarch64-linux-gnu").machine == "aarch64"


def test_vector_lanes() -> None:
    t = Target.parse("c -vector-bytes=32")
    assert t.vector_lanes("float32") == 8
    assert t.vector_lanes("float64") == 4
    assert t.vector_lanes("float16") == 16
    assert t.vector_lanes("int8") == 32
    with pytest.raises(TargetError, match="no SIMD width"):
        Target.parse("cuda").vector_lanes("float32")


def test_cflags_host_and_explicit_cpu() -> None:
    t = Target.parse("c")
    flags = t.cflags()
    for f in ("-O3", "-std=gnu11", "-fPIC", "-shared", "-fopenmp", "-ffp-contract=fast"):
        assert f in flags
    assert "-ffast-math" not in flags
    assert "-shared" not in t.cflags(shared=False)
    if host_arch() == "x86_64":
        assert "-march=native" in flags
        assert Target.parse("c -mcpu=znver3").cflags()[-2:] == ["-march=znver3", "-mtune=znver3"]


def test_cflags_cross_and_extras() -> None:
    arm = Target.parse("c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72").cflags()
    assert "-mcpu=cortex-a72" in arm and not any(f.startswith("-march") for f in arm)
    assert not any("native" in f for f in Target.parse("c -cc=aarch64-linux-gnu-gcc").cflags())
    clang = Target.parse("c -cc=clang -mtriple=aarch64-linux-gnu").cflags()
    assert "--target=aarch64-linux-gnu" in clang and "-fopenmp=libgomp" in clang  # the cross gcc's OpenMP
    assert "-fopenmp" in Target.parse("c -cc=clang").cflags()  # natively: LLVM's libomp
    armv7 = Target.parse("c -cc=arm-linux-gnueabihf-gcc -mcpu=cortex-a7 -mfpu=neon-vfpv4")
    assert armv7.machine == "arm" and armv7.cflags()[-2:] == ["-mcpu=cortex-a7", "-mfpu=neon-vfpv4"]
    with pytest.raises(TargetError, match="-mfpu is for 32-bit ARM compilers"):
        Target.parse("c -mfpu=neon")
    extra = Target.parse("c -cflags='-funroll-loops -DNAME=\"a b\"'")
    assert extra.extra_cflags == ("-funroll-loops", "-DNAME=a b")
    assert extra.cflags()[-2:] == ["-funroll-loops", "-DNAME=a b"]


def test_gpu_kinds_carry_parameters() -> None:
    cuda = Target.parse("cuda -arch=sm_90a -shared-memory-bytes=96K")
    assert (cuda.gpu_arch, cuda.max_threads_per_block, cuda.shared_memory_bytes, cuda.warp_size) == (
        "sm_90a", 1024, 96 << 10, 32)
    assert cuda.cc is None and cuda.cores is None and not cuda.is_cross
    ocl = Target.parse("opencl -max-threads-per-block=256 -shared-memory-bytes=32K "
                       "-warp-size=1 -compute-units=2")
    assert (ocl.max_threads_per_block, ocl.shared_memory_bytes, ocl.warp_size) == (256, 32 << 10, 1)
    with pytest.raises(TargetError, match="not built with a C compiler"):
        cuda.cflags()


def test_compiler_arch_from_name_prefix() -> None:
    assert compiler_arch("aarch64-linux-gnu-gcc") == "aarch64"
    assert compiler_arch("arm-linux-gnueabihf-gcc") == "arm"
    assert compiler_arch("no-such-compiler-anywhere") == host_arch()


def test_parse_accepts_a_target() -> None:
    t = Target.parse("c -num-threads=1")
    assert Target.parse(t) is t


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty target string; known kinds: c, cuda, opencl"),
        ("llvm", "unknown target kind 'llvm'; known kinds: c, cuda, opencl"),
        ("c -bogus=1", "unknown option -bogus for c targets; accepted: -cc, -mcpu"),
        ("cuda -cc=gcc", "unknown option -cc for cuda targets; accepted: -arch"),
        ("opencl -arch=sm_80", "unknown option -arch for opencl targets"),
        ("c -num-threads", "malformed option '-num-threads'.*expected -name=value"),
        ("c cores=2", "malformed option 'cores=2'"),
        ("c -num-threads=0", r"bad value -num-threads='0'.*positive integer"),
        ("c -cores=two", r"bad value -cores='two'.*positive integer"),
        ("c -l1=lots", r"bad value -l1='lots'.*byte count"),
        ("c -vector-bytes=-8", "bad value -vector-bytes"),
        ("c -cc=", "bad value -cc=''"),
        ("c -cores=2 -cores=4", "option -cores given twice"),
        ("cuda -arch=turing", r"bad value -arch='turing'.*sm_NN"),
        ("c -cflags='unbalanced", "cannot read target"),
    ],
)
def test_bad_target_strings(spec: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        Target.parse(spec)


def test_target_error_is_a_value_error() -> None:
    assert issubclass(TargetError, ValueError)


def test_direct_construction_is_validated() -> None:
    t = Target.parse("c")
    assert dataclasses.replace(t, num_threads=1).num_threads == 1
    with pytest.raises(TargetError, match="take no gpu_arch"):
        dataclasses.replace(t, gpu_arch="sm_80")
    with pytest.raises(TargetError, match="c target without num_threads: build targets with Target.parse"):
        Target("c", cc="gcc")
    with pytest.raises(TargetError, match="unknown target kind"):
        Target("fpga")


def test_parse_size() -> None:
    assert [parse_size(s) for s in ("0", "32768", "48K", "2048K", "1M", "1g", "64KB")] == [
        0, 32768, 48 << 10, 2 << 20, 1 << 20, 1 << 30, 64 << 10]
    with pytest.raises(ValueError, match="byte count"):
        parse_size("1.5M")
