"""Export a tuned CUDA or OpenCL program: its kernels and a small host program that launches them.

``gpu_export_files(record)`` gives, besides the C export's ``main.c`` and ``reference.c/.h``
(random inputs, the unscheduled workload in portable C as the independent check, then timing)::

    kernel.h                     int NAME(T* a0, ...): copy in, launch every kernel, copy out
    kernel.cu                    CUDA: the measured kernels and NAME (``make`` builds with nvcc)
    kernel.cl, kernel_host.c     OpenCL: the measured kernels, and NAME (the kernels embedded as a
                                 string, built on the first call; ``make`` links -lOpenCL)
    Makefile, README             how to build and run; what the times include

Each call of NAME copies the arrays to the device and back, so main.c's times include the
transfers (the tuner timed the kernels alone). Argument names in the generated host code are
``a0..an`` (tensor names are never spelled there); the kernel source is the printer's, embedded
in a C string with every character escaped.
"""

from __future__ import annotations

import math

from ..backends import backend_for
from ..backends.gpu import GpuBackend
from ..dtypes import dtype as dtype_info
from ..expr import static_shape
from ..ops import Workload
from ..records.check import logged_target
from ..records.log import Record
from ..runner.gpu_program import GpuProgram
from ..target import Target
from ..task import Task
from .kernel import EXECUTABLE, function_params, header_text, main_c, with_header
from .makefile import make_comment, make_words

#: a target's -device as an OpenCL device type
CL_TYPES = {t: f"CL_DEVICE_TYPE_{t.upper()}" for t in ("cpu", "gpu", "accelerator")}


def gpu_export_files(record: Record, *, name: str | None = None) -> dict[str, str]:
    """The files of a CUDA or OpenCL record's export, by name (nothing is written). Raises
    ``ValueError`` (or a subclass) for a record that cannot be exported."""
    if not record.ok:
        raise ValueError(f"record of {record.workload_key} has no valid measurement ({record.error_no.name})")
    target, _ = logged_target(record.target)
    backend = backend_for(target)
    if not isinstance(backend, GpuBackend):
        raise ValueError(f"{target.kind} records are exported as C (gpu_export_files is for GPU targets)")
    wl = Workload.from_json(record.workload)
    task = Task(wl, target=target)
    program = backend.program(task.lowered(record.steps).func(), target)
    host = Task(wl, target=Target.parse("c"))
    kernel = _c_name(name or f"{wl.name}_kernel")
    reference = f"{kernel}_reference" if name else _c_name(f"{wl.name}_reference")
    ref_src = host.source((), name=reference, portable=True)
    specs = task.arg_specs()
    params = ", ".join(f"{dtype_info(s.dtype).c_name}* a{k}" for k, s in enumerate(specs))
    doc = [
        f"{kernel}: {wl}, a {target.kind} program exported by autosched from a tuning log.",
        f"target: {record.target}",
        f"measured on the device: {record.median * 1e3:.6f} ms per run (kernels only)",
        "Copies the arrays (inputs, then outputs; C-contiguous) to the device, runs the kernels,",
        "copies the outputs back; returns 0, or -1 if the device API fails.",
    ]
    files = {
        "kernel.h": header_text(f"{kernel.upper()}_H", kernel, params, doc),
        "reference.c": with_header(ref_src, reference, "reference.h"),
        "reference.h": header_text(
            f"{reference.upper()}_H",
            reference,
            function_params(ref_src, reference),
            [f"{reference}: the check"],
        ),
        "main.c": main_c(host, kernel, reference),
        "README": _readme(target, record, kernel),
    }
    sizes = [math.prod(static_shape(s.shape)) * dtype_info(s.dtype).bytes for s in specs]
    sizes += [n * dtype_info(dt).bytes for dt, n in program.temps]
    inputs = [k for k, s in enumerate(specs) if not s.is_output]
    outputs = [k for k, s in enumerate(specs) if s.is_output]
    if target.kind == "cuda":
        files["kernel.cu"] = _cuda_host(program, kernel, params, sizes, inputs, outputs)
        files["Makefile"] = _makefile(record, "NVCC ?= nvcc\nNVCCFLAGS ?= -O3" + _arch(target), "nvcc")
    else:
        files["kernel.cl"] = program.source
        files["kernel_host.c"] = _opencl_host(program, target, kernel, params, sizes, inputs, outputs)
        files["Makefile"] = _makefile(record, "CC ?= cc\nCFLAGS ?= -O2", "cc")
    return files


def _sizes(sizes: list[int]) -> str:
    return ", ".join(f"{b}u" for b in sizes)


def _c_name(text: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in text)
    return out if out and not out[0].isdigit() else f"k_{out}"


def _arch(target: Target) -> str:
    return f" -arch={target.gpu_arch}" if target.gpu_arch else ""


def _copies(inputs: list[int], outputs: list[int], to: str, back: str) -> tuple[list[str], list[str]]:
    """Lines copying the inputs to the device and the outputs back (formats of ``k``)."""
    return [to.format(k=k) for k in inputs], [back.format(k=k) for k in outputs]


def _cuda_host(
    program: GpuProgram, kernel: str, params: str, sizes: list[int], inputs: list[int], outputs: list[int]
) -> str:
    """kernel.cu: the kernels, then ``kernel`` allocating, copying and launching."""
    n = len(sizes)
    source = program.source.replace("#define INFINITY", "#undef INFINITY\n#define INFINITY")
    source = source.replace("#define NAN", "#undef NAN\n#define NAN")
    types = _param_types(program)
    cast = lambda k: f"({types[k]}*)d[{k}]"  # noqa: E731
    to, back = _copies(
        inputs,
        outputs,
        "  if (rc == 0) rc = ok(cudaMemcpy(d[{k}], a{k}, bytes[{k}], cudaMemcpyHostToDevice));",
        "  if (rc == 0) rc = ok(cudaMemcpy(a{k}, d[{k}], bytes[{k}], cudaMemcpyDeviceToHost));",
    )
    args = ", ".join(cast(k) for k in range(n))
    launches = [f"    {k.name}<<<dim3{k.grid}, dim3{k.block}>>>({args});" for k in program.launches]
    return "\n".join(
        [
            "/* generated by autosched: the measured CUDA kernels and their host launcher */",
            "#include <cuda_runtime.h>",
            '#include "kernel.h"',
            "",
            source,
            "static int ok(cudaError_t e) { return e == cudaSuccess ? 0 : -1; }",
            "",
            f'extern "C" int {kernel}({params}) {{',
            f"  void* d[{n}] = {{0}};",
            f"  const size_t bytes[{n}] = {{{_sizes(sizes)}}};",
            "  int rc = 0;",
            f"  for (int k = 0; k < {n} && rc == 0; ++k)",
            "    rc = ok(cudaMalloc(&d[k], bytes[k] ? bytes[k] : 1));",
            *to,
            "  if (rc == 0) {",
            *launches,
            "    rc = ok(cudaGetLastError());",
            "    if (rc == 0) rc = ok(cudaDeviceSynchronize());",
            "  }",
            *back,
            f"  for (int k = 0; k < {n}; ++k) cudaFree(d[k]);",
            "  return rc;",
            "}",
            "",
        ]
    )


def _param_types(program: GpuProgram) -> list[str]:
    """The kernel parameters' element types, read from the first kernel's signature."""
    head = program.source[program.source.index(f"{program.launches[0].name}(") :]
    params = head[head.index("(") + 1 : head.index(")")].split(",")
    return [p.strip().split("*")[0].strip() for p in params]


def _c_string(text: str) -> str:
    """``text`` as C string literals, one per line of it, every other character octal-escaped."""
    return "\n".join(f"  {_c_literal(line + chr(10))}" for line in text.split("\n"))


def _c_literal(text: str) -> str:
    """``text`` as one C string literal: letters, digits and plain punctuation kept, the rest escaped."""
    return '"' + "".join(c if c.isalnum() or c in _PLAIN else f"\\{ord(c):03o}" for c in text) + '"'


_PLAIN = frozenset(" _(){}[];,.+-*/%<>=!&|^~:#")


def _opencl_host(
    program: GpuProgram,
    target: Target,
    kernel: str,
    params: str,
    sizes: list[int],
    inputs: list[int],
    outputs: list[int],
) -> str:
    """kernel_host.c: the kernels as a string, built on the first call; ``kernel`` launching them."""
    n, nk = len(sizes), len(program.launches)
    device = CL_TYPES.get(target.device_type or "", "CL_DEVICE_TYPE_ALL")
    platform = _c_literal(target.platform or "")
    names = ", ".join(f'"{launch.name}"' for launch in program.launches)
    to, back = _copies(
        inputs,
        outputs,
        "  if (rc == 0) rc = ok(clEnqueueWriteBuffer(queue, d[{k}], CL_TRUE, 0, bytes[{k}], a{k}, 0, 0, 0));",
        "  if (rc == 0) rc = ok(clEnqueueReadBuffer(queue, d[{k}], CL_TRUE, 0, bytes[{k}], a{k}, 0, 0, 0));",
    )
    launches = []
    for i, launch in enumerate(program.launches):
        glob = ", ".join(str(g) for g in launch.global_size)
        local = ", ".join(str(b) for b in launch.block)
        launches.append(f"  {{ const size_t global[3] = {{{glob}}}, local[3] = {{{local}}};")
        launches.append(f"    for (int k = 0; k < {n} && rc == 0; ++k)")
        launches.append(f"      rc = ok(clSetKernelArg(kernels[{i}], k, sizeof(cl_mem), &d[k]));")
        enqueue = f"clEnqueueNDRangeKernel(queue, kernels[{i}], 3, NULL, global, local, 0, 0, 0)"
        launches.append(f"    if (rc == 0) rc = ok({enqueue}); }}")
    return OPENCL_HOST.format(
        source=_c_string(program.source), platform=platform, device=device, nk=nk, names=names,
        kernel=kernel, params=params, n=n, bytes=_sizes(sizes),
        body="\n".join([*to, *launches, *back]),
    )  # fmt: skip


OPENCL_HOST = """\
/* generated by autosched: the measured OpenCL kernels (kernel.cl) and their host launcher */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>
#include "kernel.h"

static const char* SOURCE =
{source};

static cl_context ctx;
static cl_command_queue queue;
static cl_kernel kernels[{nk}];

static int ok(cl_int e) {{ return e == CL_SUCCESS ? 0 : -1; }}

/* the first device of type {device} on the first platform whose name contains {platform} */
static int setup(void) {{
  static const char* names[{nk}] = {{{names}}};
  cl_platform_id platforms[16];
  cl_uint count = 0;
  cl_device_id device = NULL;
  cl_int err;
  if (clGetPlatformIDs(16, platforms, &count) != CL_SUCCESS) return -1;
  for (cl_uint p = 0; p < count && device == NULL; ++p) {{
    char name[256] = {{0}};
    clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    if (strstr(name, {platform}) && clGetDeviceIDs(platforms[p], {device}, 1, &device, NULL) != CL_SUCCESS)
      device = NULL;
  }}
  if (device == NULL) {{
    fprintf(stderr, "no OpenCL device of type {device} on a platform named like %s\\n", {platform});
    return -1;
  }}
  ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  if (err != CL_SUCCESS) return -1;
  queue = clCreateCommandQueue(ctx, device, 0, &err);
  if (err != CL_SUCCESS) return -1;
  cl_program program = clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
  if (err != CL_SUCCESS) return -1;
  if (clBuildProgram(program, 1, &device, "", NULL, NULL) != CL_SUCCESS) {{
    static char log[65536];
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    fprintf(stderr, "OpenCL build failed:\\n%s\\n", log);
    return -1;
  }}
  for (int i = 0; i < {nk}; ++i) {{
    kernels[i] = clCreateKernel(program, names[i], &err);
    if (err != CL_SUCCESS) return -1;
  }}
  return 0;
}}

int {kernel}({params}) {{
  static int ready = 0;
  if (!ready) {{
    if (setup() != 0) return -1;
    ready = 1;
  }}
  cl_mem d[{n}] = {{0}};
  const size_t bytes[{n}] = {{{bytes}}};
  int rc = 0;
  cl_int err = CL_SUCCESS;
  for (int k = 0; k < {n} && rc == 0; ++k) {{
    d[k] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes[k] ? bytes[k] : 1, NULL, &err);
    rc = ok(err);
  }}
{body}
  if (rc == 0) rc = ok(clFinish(queue));
  for (int k = 0; k < {n}; ++k)
    if (d[k]) clReleaseMemObject(d[k]);
  return rc;
}}
"""


def _makefile(record: Record, settings: str, kind: str) -> str:
    if kind == "nvcc":
        build = "\t$(NVCC) $(NVCCFLAGS) -o $@ main.c reference.c kernel.cu -lm"
        sources = "main.c reference.c kernel.cu"
    else:
        build = "\t$(CC) $(CFLAGS) -o $@ main.c reference.c kernel_host.c -lOpenCL -lm"
        sources = "main.c reference.c kernel_host.c"
    return f"""\
# generated by autosched: {make_comment(record.workload_key)} tuned for {make_comment(record.target)}
#   make       build ./{EXECUTABLE}
#   make run   check the kernels against the reference, then time them (transfers included)
{settings}
.PHONY: all run clean

all: {EXECUTABLE}

{EXECUTABLE}: {make_words(sources.split())} kernel.h reference.h
{build}

run: {EXECUTABLE}
\t./{EXECUTABLE}

clean:
\trm -f {EXECUTABLE}
"""


def _readme(target: Target, record: Record, kernel: str) -> str:
    tool = "an OpenCL driver (-lOpenCL)"
    if target.kind == "cuda":
        tool = "nvcc (the CUDA toolkit) and an NVIDIA GPU"
    return f"""\
{kernel}: exported by autosched from a {target.kind} tuning log.

Build with `make` (needs {tool}), run with `make run`: main.c fills random inputs, runs the
unscheduled workload in portable C (reference.c) as the independent check, compares, then times
{kernel}. Each call copies the arrays to the device and back, so these times include the
transfers; the tuner measured the kernels alone ({record.median * 1e3:.6f} ms per run).
"""
