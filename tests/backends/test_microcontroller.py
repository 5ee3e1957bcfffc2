"""Bare-metal Cortex-M targets: their options, the hardware filled from the core, their flags."""

from __future__ import annotations

import pytest

from autosched.backends.c.microcontroller import check_float_support
from autosched.target import Target, TargetError


def test_hardware_comes_from_the_core() -> None:
    m4 = Target.parse("c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=hard")
    m55 = Target.parse("c -cc=arm-none-eabi-gcc -mcpu=cortex-m55")
    m3 = Target.parse("c -cc=arm-none-eabi-gcc -mcpu=cortex-m3 -ram=256K")
    assert (m4.num_threads, m4.cores, m4.vector_bytes, m4.float_abi) == (1, 1, 4, "hard")
    assert (m55.vector_bytes, m55.float_abi) == (16, "hard")  # Helium: 128-bit vectors
    assert (m3.vector_bytes, m3.float_abi, m3.ram) == (4, "soft", 256 << 10)
    for t in (m4, m55, m3):
        assert Target.parse(str(t)) == t and t.machine == "arm" and t.is_cross


def test_flags_have_no_openmp_runtime_nor_pic() -> None:
    flags = Target.parse("c -cc=arm-none-eabi-gcc -mcpu=cortex-m7 -mfloat-abi=softfp").cflags()
    assert {"-mthumb", "-mcpu=cortex-m7", "-mfloat-abi=softfp", "-fopenmp-simd"} <= set(flags)
    assert not {"-fopenmp", "-fPIC", "-shared"} & set(flags)


@pytest.mark.parametrize(("spec", "message"), [
    ("c -cc=arm-none-eabi-gcc", "names its core with -mcpu="),
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-a53", "names its core with -mcpu="),
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-m0 -mfloat-abi=hard", "cortex-m0 has no floating-point unit"),
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -num-threads=2", "one core running no OS"),
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=fast", "expected soft, softfp or hard"),
    ("c -mfloat-abi=hard", "for bare-metal targets"),
    ("c -cc=aarch64-linux-gnu-gcc -ram=1M", "for bare-metal targets"),
])
def test_bad_targets_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(TargetError, match=message) as caught:
        Target.parse(spec)
    assert "\n" not in str(caught.value)


def test_float_support_by_fpu() -> None:
    m4 = Target.parse("c -cc=arm-none-eabi-gcc -mcpu=cortex-m4")
    check_float_support(m4, ["float32", "int8"])
    with pytest.raises(TargetError, match="single precision"):
        check_float_support(m4, ["float64"])
    check_float_support(Target.parse("c -cc=arm-none-eabi-gcc -mcpu=cortex-m7"), ["float64"])
    soft = Target.parse("c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=soft")
    with pytest.raises(TargetError, match="built with -mfloat-abi=soft"):
        check_float_support(soft, ["float32"])
    check_float_support(Target.parse("c -cc=arm-none-eabi-gcc -mcpu=cortex-m0"), ["int32", "uint8"])
    check_float_support(Target.parse("c -cc=gcc"), ["float64"])  # not bare metal: nothing to refuse
