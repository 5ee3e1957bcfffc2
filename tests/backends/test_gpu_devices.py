"""GPU hardware parameters: read from the device a target selects when one is present (PoCL's CPU
device in CI), given by flags when cross-compiling; ``-device`` / ``-platform`` select the OpenCL
device (a platform name is checked and only compared with the driver's names); a selection that
matches nothing is a one-line error."""

from __future__ import annotations

import shlex

import numpy as np
import pytest

import autosched as asc
from autosched.backends.cuda.device import cuda_limits
from autosched.backends.opencl import OpenCLUnavailable
from autosched.target import Target, TargetError


def _pocl() -> object:
    cl = pytest.importorskip("pyopencl", reason="pip install pyopencl pocl-binary-distribution")
    for p in cl.get_platforms():
        if "portable" in p.name.lower():
            return p.get_devices()[0]
    pytest.skip("no PoCL platform: pip install pocl-binary-distribution")


@pytest.mark.requires("pyopencl")
def test_opencl_targets_read_their_limits_from_the_selected_device() -> None:
    device = _pocl()
    t = Target.parse("opencl -device=cpu -platform='Portable Computing'")
    assert (t.max_threads_per_block, t.shared_memory_bytes, t.compute_units) == (
        device.max_work_group_size, device.local_mem_size, device.max_compute_units)  # type: ignore[attr-defined]
    assert Target.parse(str(t)) == t and "-platform='Portable Computing'" in str(t)
    # a flag wins over the device; flags for every parameter need no device (cross-compiling)
    assert Target.parse("opencl -device=cpu -max-threads-per-block=64").max_threads_per_block == 64
    cross = Target.parse("opencl -platform=Elsewhere -max-threads-per-block=128 -shared-memory-bytes=16K "
                         "-warp-size=32 -compute-units=80")
    assert (cross.max_threads_per_block, cross.compute_units, cross.platform) == (128, 80, "Elsewhere")


@pytest.mark.requires("pyopencl")
def test_a_selection_that_matches_nothing_is_one_line_naming_the_devices_there() -> None:
    _pocl()
    cl = pytest.importorskip("pyopencl", reason="pip install pyopencl pocl-binary-distribution")
    if any(d.type & cl.device_type.GPU for p in cl.get_platforms() for d in p.get_devices()):
        pytest.skip("an OpenCL GPU is visible here: this test is for machines without one")
    for spec, asked in (("opencl -device=gpu", "-device=gpu"),
                        ("opencl -platform='No Such Vendor'", "-platform='No Such Vendor'")):
        with pytest.raises(TargetError) as info:
            Target.parse(spec)
        message = str(info.value)
        assert f"no OpenCL device matches {asked}; devices here: Portable Computing Language (cpu)" in message
        assert "\n" not in message


@pytest.mark.parametrize("name", ["a;rm -rf /", "$(id)", "x" * 65, "`id`", "a\nb", ""])
def test_platform_names_are_checked_before_anything_uses_them(name: str) -> None:
    with pytest.raises(TargetError, match="bad value -platform=.*expected a platform name"):
        Target.parse(f"opencl -platform={shlex.quote(name)}")
    with pytest.raises(TargetError, match="bad value -device='fpga'.*cpu, gpu, accelerator"):
        Target.parse("opencl -device=fpga")


def test_without_a_device_opencl_targets_keep_portable_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    # no platform is named like this: as on a machine without OpenCL, the defaults stand
    monkeypatch.setenv("AUTOSCHED_OPENCL_PLATFORM", "no platform has this name")
    t = Target.parse("opencl")
    limits = (t.max_threads_per_block, t.shared_memory_bytes, t.warp_size, t.compute_units)
    assert limits == (256, 32 << 10, 1, None)


def test_cuda_targets_use_defaults_without_a_driver_and_flags_always() -> None:
    if cuda_limits():
        pytest.skip("a CUDA device is visible here: its own limits apply")
    t = Target.parse("cuda -arch=sm_90")
    limits = (t.max_threads_per_block, t.shared_memory_bytes, t.warp_size, t.gpu_arch)
    assert limits == (1024, 48 << 10, 32, "sm_90")
    assert Target.parse("cuda -compute-units=132").compute_units == 132


@pytest.mark.requires("pyopencl")
def test_the_runner_uses_the_selected_device() -> None:
    _pocl()
    X = asc.placeholder((100,), name="X")
    Y = asc.compute((100,), lambda i: X[i] * 3.0, name="Y")
    s = asc.create_schedule(Y)
    bo, ti = s[Y].split(Y.op.axis[0], factor=32)
    s[Y].bind(bo, asc.thread_axis("blockIdx.x"))
    s[Y].bind(ti, asc.thread_axis("threadIdx.x"))
    x = np.arange(100, dtype=np.float32)
    y = np.zeros(100, dtype=np.float32)
    asc.build(s, [X, Y], target="opencl -device=cpu -platform=portable")(x, y)
    np.testing.assert_array_equal(y, x * 3)
    flags = "-max-threads-per-block=64 -shared-memory-bytes=1K -warp-size=1 -compute-units=1"
    with pytest.raises(OpenCLUnavailable, match="no OpenCL device matches -platform='Elsewhere'"):
        asc.build(s, [X, Y], target=f"opencl -platform=Elsewhere {flags}")
