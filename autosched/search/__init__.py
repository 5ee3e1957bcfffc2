"""autosched.search: tuners, the tuning loop and ``tune`` (where spaces, runners and logs meet)."""

from .progress import ProgressBar, TuneStats
from .space import SPACES, Candidate, SpaceError, TuningSpace, make_space
from .tune import TuneResult, tune
from .tuner import TUNERS, GridTuner, RandomTuner, Tuner, make_tuner, register_tuner

__all__ = [
    "SPACES",
    "TUNERS",
    "Candidate",
    "GridTuner",
    "ProgressBar",
    "RandomTuner",
    "SpaceError",
    "TuneResult",
    "TuneStats",
    "Tuner",
    "TuningSpace",
    "make_space",
    "make_tuner",
    "register_tuner",
    "tune",
]
