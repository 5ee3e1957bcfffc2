"""The cost-model protocol, the model registry, labels, and the saved-model file format.

A cost model is a scikit-learn style estimator: ``__init__`` stores parameters, ``fit(programs,
costs)`` learns and returns ``self``, ``predict(programs)`` gives one score per program, higher
meaning faster. Costs are median seconds, ``math.inf`` for a program that failed; it is kept as a
zero-throughput sample. A program whose steps do not lower scores ``-inf``.

A saved model is one ``.npz`` file (read without pickle): a JSON header (format name and version,
model name, parameters) and the model's arrays. A file that is not one raises
:class:`ModelLoadError`.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from ..runner.measure import MeasureInput
from ..task import Task

if TYPE_CHECKING:
    from typing import Self

    from ..records import Record

FORMAT = "autosched-cost-model"
FORMAT_VERSION = 1

#: how to get xgboost (an autosched dependency; xgboost-cpu is its CPU-only wheel)
XGB_INSTALL = "pip install xgboost-cpu (pip install xgboost where no xgboost-cpu wheel is published)"
_INSTALL = ("pip install xgboost-cpu scikit-learn (both are dependencies of autosched; xgboost where no "
            "xgboost-cpu wheel is published)")


class ModelLoadError(ValueError):
    """A saved cost model cannot be read: not a model file, corrupt, truncated, or of another
    format version or model kind."""


@runtime_checkable
class CostModel(Protocol):
    """What tuners need from a cost model (see the module doc)."""

    def fit(self, programs: Sequence[MeasureInput], costs: Sequence[float]) -> Self: ...

    def predict(self, programs: Sequence[MeasureInput]) -> np.ndarray: ...

    def save(self, path: str | Path) -> None: ...

    @classmethod
    def load(cls, path: str | Path) -> Self: ...


#: model name -> class; :func:`register_model` fills it
MODELS: dict[str, type[SavedModel]] = {}

_M = TypeVar("_M", bound="type[SavedModel]")


def register_model(name: str) -> Callable[[_M], _M]:
    """Class decorator: make a cost model available to :func:`make_model` as ``name``."""

    def register(cls: _M) -> _M:
        MODELS[name] = cls
        cls.name = name
        return cls

    return register


def make_model(name: str, **params: Any) -> CostModel:
    """A new, unfitted cost model ``name`` (``xgb``, ``mlp``, ``random``) with ``params``."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown cost model {name!r}; models: {', '.join(sorted(MODELS))}") from None
    model: CostModel = cls(**params)
    return model


def require(module: str) -> Any:
    """Import an optional dependency, or raise ImportError saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        package = module.split(".")[0]
        raise ImportError(f"this cost model needs {package} ({e}); install: {_INSTALL}") from None


# ------------------------------------------------------------------------------------ labels


def task_groups(programs: Sequence[MeasureInput]) -> np.ndarray:
    """A group number per program: programs of one task (workload key and target) share one,
    numbered in order of first appearance."""
    seen: dict[tuple[str, str], int] = {}
    out = np.empty(len(programs), dtype=np.int64)
    for i, p in enumerate(programs):
        out[i] = seen.setdefault(p.task.key, len(seen))
    return out


def normalized_throughput(costs: Sequence[float], groups: np.ndarray) -> np.ndarray:
    """``min cost / cost`` within each group (1 for a group's fastest program); a failed program
    (an infinite, NaN or non-positive cost) gets 0, so does every program of a group that has no
    valid cost."""
    c = np.asarray(costs, dtype=np.float64)
    if c.shape != groups.shape:
        raise ValueError(f"{len(c)} costs for {len(groups)} programs")
    ok = np.isfinite(c) & (c > 0)
    out = np.zeros(len(c))
    for g in np.unique(groups):
        mine = (groups == g) & ok
        if mine.any():
            out[mine] = c[mine].min() / c[mine]
    return out


def from_records(records: Sequence[Record]) -> tuple[list[MeasureInput], list[float]]:
    """Programs and costs (median seconds, ``inf`` for failures) of tuning-log records."""
    tasks: dict[tuple[str, tuple[Any, ...], str], Task] = {}
    programs, costs = [], []
    for r in records:
        key = (r.workload[0], tuple(r.workload[1]), r.target)
        task = tasks.get(key)
        if task is None:
            task = tasks[key] = Task(r.workload[0], r.workload[1], target=r.target)
        programs.append(MeasureInput(task, tuple(r.steps), r.program))
        costs.append(r.median if r.ok else math.inf)
    return programs, costs


# -------------------------------------------------------------------------------- file format


def save_arrays(path: str | Path, model: str, params: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write a model file atomically: the header (``model``, ``params``) and ``arrays``."""
    path = Path(path)
    header = {"format": FORMAT, "version": FORMAT_VERSION, "model": model, "params": params}
    blob = np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, __header__=blob, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _read(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(header, arrays) of a model file, the header checked for format and version."""
    path = Path(path)
    where = f"{path}: not a readable autosched cost model"
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        header = json.loads(arrays.pop("__header__").tobytes().decode())
    except FileNotFoundError:
        raise
    except Exception as e:  # zip, npy and JSON errors of a corrupt or foreign file
        raise ModelLoadError(f"{where} (corrupt or truncated file: {type(e).__name__}: {e})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ModelLoadError(f"{where} (no {FORMAT} header)")
    if header.get("version") != FORMAT_VERSION:
        raise ModelLoadError(
            f"{where} (format version {header.get('version')!r}; this autosched reads {FORMAT_VERSION})"
        )
    if not isinstance(header.get("params"), dict) or not isinstance(header.get("model"), str):
        raise ModelLoadError(f"{where} (the header lacks the model kind or its parameters)")
    return header, arrays


class SavedModel:
    """``save``/``load`` for models that are their parameters (``get_params``) plus arrays
    (``_arrays`` out, ``_restore`` in)."""

    name: str = ""
    #: True for a model read back by :meth:`load` (trained before; fitting again replaces it)
    fitted: bool = False

    def fit(self, programs: Sequence[MeasureInput], costs: Sequence[float]) -> Self:
        raise NotImplementedError

    def predict(self, programs: Sequence[MeasureInput]) -> np.ndarray:
        raise NotImplementedError

    def get_params(self) -> dict[str, Any]:
        raise NotImplementedError

    def _arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _restore(self, arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Write the model to ``path`` (one file, replaced atomically)."""
        save_arrays(path, self.name, self.get_params(), self._arrays())

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """A model saved by :meth:`save`; raises :class:`ModelLoadError` if ``path`` is not one
        (corrupt, truncated, another format version, or another kind of model)."""
        header, arrays = _read(path)
        if header["model"] != cls.name:
            raise ModelLoadError(f"{path}: a saved {header['model']!r} model, not {cls.name!r}")
        return cls._rebuild(path, header["params"], arrays)

    @classmethod
    def _rebuild(cls, path: str | Path, params: dict[str, Any], arrays: dict[str, np.ndarray]) -> Self:
        try:
            model = cls(**params)
            model._restore(arrays)
            model.fitted = True
        except ImportError:
            raise
        except Exception as e:  # missing arrays, bad parameters, a booster that does not parse
            raise ModelLoadError(
                f"{path}: not a readable autosched cost model (corrupt content: {type(e).__name__}: {e})"
            ) from None
        return model


def load_model(path: str | Path) -> CostModel:
    """Load a saved model of whichever registered kind it is."""
    header, arrays = _read(path)
    cls = MODELS.get(header["model"])
    if cls is None:
        known = ", ".join(sorted(MODELS))
        raise ModelLoadError(f"{path}: a saved {header['model']!r} model; models: {known}")
    model: CostModel = cls._rebuild(path, header["params"], arrays)
    return model
