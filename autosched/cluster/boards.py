"""Measuring on SSH boards through a Dask cluster: the runner of the tuning process.

Board workers (``autosched worker --board ALIAS``, :mod:`.board_work`) hold the SSH session to
their board; build workers cross-compile each candidate into the board's static executable
(:class:`~autosched.cluster.parts.DaskBuilder` with ``executable=True``); :class:`DaskBoardRunner`
sends each executable's bytes and the task's data to a board worker of the target's family
(``measure-c-aarch64`` for ``c -cc=aarch64-linux-gnu-gcc``), or of the named boards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..runner.measure import MeasureOption
from .board_work import board_machine, measure_on_board
from .connection import DaskCluster, Workers, board_placements
from .parts import DaskBuilder, DaskRunner


class DaskBoardRunner(DaskRunner):
    """Times built executables on the cluster's board workers of target family ``family``
    (``c-aarch64``: boards that run aarch64 binaries), or, with ``boards``, on those boards'
    workers only (a candidate to each in turn). Records name the board's machine."""

    measure_task = staticmethod(measure_on_board)

    def __init__(
        self, cluster: DaskCluster, option: MeasureOption, family: str, boards: Sequence[str] = (),
        seed: int = 0, target: str | None = None,
    ) -> None:
        super().__init__(cluster, option, "c", seed, target)
        self.family, self.boards = family, tuple(boards)
        named = ", ".join(self.boards)
        self.what = f"measure on the board(s) {named}" if named else f"measure {family} programs on a board"
        self.start = f"--board {self.boards[0] if self.boards else 'ALIAS'}"

    def placements(self, workers: Workers) -> tuple[list[dict[str, Any]], Callable[[Workers], bool]]:
        return board_placements(self.family, self.boards)

    def fingerprints(self, chosen: list[str]) -> set[str]:
        return set(self.cluster.client.run(board_machine, workers=chosen).values())

    def make_builder(self, option: MeasureOption) -> DaskBuilder:
        """The builder for this runner: static executables built on the cluster's build workers."""
        return DaskBuilder(self.cluster, option.build_timeout, executable=True)
