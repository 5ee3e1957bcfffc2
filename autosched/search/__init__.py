"""autosched.search: tuners, the tuning loop and ``tune`` (where spaces, runners and logs meet)."""

from .context import TuneContext
from .evolutionary import EvolutionaryTuner
from .ga import GATuner
from .guided import ModelTuner, diverse_pick
from .learning import CostModel, Learner, ModelQuality, ModelUnavailable, resolve_model
from .progress import ProgressBar, TuneStats
from .replay import LogSpace, ReplayLog, ReplayRunner
from .sa import SATuner
from .tune import TuneResult, tune, tune_with
from .tuner import TUNERS, GridTuner, RandomTuner, Tuner, make_tuner, register_tuner
from .tuning_space import AUTO, SPACES, Candidate, SpaceError, TuningSpace, make_space, space_kind

__all__ = [
    "AUTO",
    "SPACES",
    "TUNERS",
    "Candidate",
    "CostModel",
    "EvolutionaryTuner",
    "GATuner",
    "GridTuner",
    "Learner",
    "LogSpace",
    "ModelQuality",
    "ModelTuner",
    "ModelUnavailable",
    "ProgressBar",
    "RandomTuner",
    "ReplayLog",
    "ReplayRunner",
    "SATuner",
    "SpaceError",
    "TuneContext",
    "TuneResult",
    "TuneStats",
    "Tuner",
    "TuningSpace",
    "diverse_pick",
    "make_space",
    "space_kind",
    "make_tuner",
    "register_tuner",
    "resolve_model",
    "tune",
    "tune_with",
]
