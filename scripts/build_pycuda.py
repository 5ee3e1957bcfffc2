"""Build a pycuda wheel from its source folder, every C++ file compiled in parallel (setuptools
compiles them one after the other: about a minute on one core). Run in pycuda's source folder
after its ``configure.py``; ``scripts/gpu-check`` does both.

    python build_pycuda.py JOBS DIST_DIR
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from setuptools._distutils import ccompiler


def _compile_parallel(jobs: int) -> Any:
    """``CCompiler.compile`` with the sources compiled by ``jobs`` threads."""

    def compile_all(self: Any, sources: list[str], output_dir: str | None = None, macros: Any = None,
                    include_dirs: Any = None, debug: bool = False, extra_preargs: Any = None,
                    extra_postargs: Any = None, depends: Any = None) -> list[str]:
        macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs
        )
        cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj: str) -> None:
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, objects))
        return objects

    return compile_all


def main() -> None:
    jobs, dist = int(sys.argv[1]), sys.argv[2]
    ccompiler.CCompiler.compile = _compile_parallel(jobs)  # type: ignore[method-assign]
    sys.path.insert(0, ".")  # setup.py imports aksetup_helper from its folder
    sys.argv = ["setup.py", "build_ext", "bdist_wheel", "-d", dist]
    with open("setup.py") as f:
        exec(compile(f.read(), "setup.py", "exec"), {"__name__": "__main__", "__file__": "setup.py"})


if __name__ == "__main__":
    main()
