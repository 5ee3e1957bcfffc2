"""Safe C identifiers for tensor, buffer and loop names: nothing a user names can inject code."""

from __future__ import annotations

import re

# Identifiers a user's name must never become: C/GNU keywords, the names and macros of the headers
# the emitted code includes, predefined macros, and words of the OpenCL/CUDA dialects.
RESERVED = frozenset(
    """
    auto break case char const continue default do double else enum extern float for goto if inline int
    long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while _Bool _Complex _Imaginary bool true false asm typeof __asm__ __typeof__ NULL main
    kernel global local constant private half linux unix i386 i686 x86_64 __linux__ errno exp expf log
    logf sqrt sqrtf tanh tanhf fabs fabsf abs llabs pow powf erf erff floor floorf ceil ceilf sin cos
    tan fmin fmax fminf fmaxf INFINITY NAN HUGE_VAL M_PI isnan isinf malloc free calloc realloc
    aligned_alloc exit abort memcpy memset printf size_t time clock clock_gettime timespec
    CLOCK_MONOTONIC tv_sec tv_nsec int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
    INT32_MAX INT32_MIN threadIdx blockIdx blockDim gridDim get_global_id get_local_id get_group_id
    barrier
    """.split()
)


class Namer:
    """Maps names to distinct C identifiers, stable for the life of one printer."""

    def __init__(self, reserved: set[str] | None = None) -> None:
        self._map: dict[object, str] = {}
        self._used: set[str] = set(reserved or ())

    def __call__(self, key: object, hint: str) -> str:
        got = self._map.get(key)
        if got is not None:
            return got
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint)[:48].strip("_") or "v"
        if base[0].isdigit() or base in RESERVED or base.startswith(("asc_", "_")):
            base = "v_" + base
        name, n = base, 1
        while name in self._used:
            name = f"{base}_{n}"
            n += 1
        self._used.add(name)
        self._map[key] = name
        return name
