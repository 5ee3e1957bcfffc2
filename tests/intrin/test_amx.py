"""AMX tile intrinsics (int8 ``_tile_dpbusd``, bf16 ``_tile_dpbf16ps``) through tensorize, and the
low-precision matmul workload whose default schedule picks AMX, VNNI or the portable path."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import autosched as asc
from autosched.intrin.amx import amx_intrin
from autosched.intrin.dot import numpy_reference, pack_b, packed_tensors
from autosched.intrin.isa import request_amx
from autosched.intrin.lowp import matmul_lowp
from autosched.ops.registry import Workload
from autosched.ops.schedules import default_schedule
from autosched.runner.load import _LOADED, kernel_extensions

RNG = np.random.default_rng(11)


def _path_of(f: object) -> str:
    return next(key[0] for key, (_, lib) in _LOADED.items() if lib is f._lib)  # type: ignore[attr-defined]


def test_amx_intrin_checks_its_shape() -> None:
    with pytest.raises(ValueError, match="mr must be 16, 32, 48 or 64"):
        amx_intrin("vnni", 24, 128)
    with pytest.raises(ValueError, match="kc must be a positive multiple of 64 for vnni, got 96"):
        amx_intrin("vnni", 32, 96)
    assert amx_intrin("bf16", 16, 96).requires == ("amx_bf16", "amx_tile")


def test_amx_kernels_keep_only_the_c_path_in_portable_builds() -> None:
    T = packed_tensors(32, 16, 64, "vnni")
    s = matmul_lowp(T, "c", path="amx", mr=32, kc=64)
    assert "_tile_dpbusd" in asc.emit(s, T, target="c")
    portable = asc.emit(s, T, target="c", portable=True)
    assert "_tile_" not in portable and "asc_cpu_extensions" not in portable


@pytest.mark.requires("gcc", "amx")
@pytest.mark.parametrize("m, mr, kc", [(80, 32, 128), (64, 64, 256), (16, 16, 64)])
def test_amx_int8_matmul_is_bit_exact(m: int, mr: int, kc: int) -> None:
    a = RNG.integers(0, 256, (m, 256)).astype(np.uint8)
    b = RNG.integers(-128, 128, (256, 48)).astype(np.int8)
    a[1, :], b[:, 1] = 255, -128
    T = packed_tensors(m, 48, 256, "vnni")
    f = asc.build(matmul_lowp(T, "c -num-threads=2", path="amx", mr=mr, kc=kc), T, "c -num-threads=2")
    c = np.zeros((m, 48), np.int32)
    f(a, pack_b(b, 4), c)
    np.testing.assert_array_equal(c, numpy_reference(a, pack_b(b, 4), "vnni"))
    assert kernel_extensions(_path_of(f)) == ("amx_int8", "amx_tile")


@pytest.mark.requires("gcc", "amx")
def test_amx_bf16_matmul_accumulates_in_float32() -> None:
    a = RNG.standard_normal((48, 160)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((160, 32)).astype(ml_dtypes.bfloat16)
    T = packed_tensors(48, 32, 160, "bf16")
    f = asc.build(matmul_lowp(T, "c", path="amx", mr=32, kc=64), T, "c")  # a k tail of 32 too
    c = np.zeros((48, 32), np.float32)
    f(a, pack_b(b, 2), c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-4)
    assert kernel_extensions(_path_of(f)) == ("amx_bf16", "amx_tile")


@pytest.mark.requires("amx")
def test_the_tile_permission_is_granted_once_per_process() -> None:
    request_amx()
    request_amx()  # cached: one request per process
    assert request_amx.cache_info().hits >= 1


@pytest.mark.requires("gcc")
def test_matmul_lowp_workload_default_schedule_follows_the_target() -> None:
    wl = Workload("matmul_lowp", (40, 32, 128, "vnni"))
    s, name = default_schedule(wl, "c -mattr=none")
    assert name.endswith("matmul_lowp") and "portable" in s.steps[-1].intrin
    f = asc.build(s, wl.tensors(), "c -mattr=none")
    a = RNG.integers(0, 256, (40, 128)).astype(np.uint8)
    bp = pack_b(RNG.integers(-128, 128, (128, 32)).astype(np.int8), 4)
    c = np.zeros((40, 32), np.int32)
    f(a, bp, c)
    np.testing.assert_array_equal(c, numpy_reference(a, bp, "vnni"))
    s, _ = default_schedule(wl, "c -mattr=amx_tile,amx_int8")
    assert s.steps[-1].intrin.startswith("amx_vnni")
