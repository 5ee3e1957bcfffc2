"""The command's own documentation, through the installed entry point as a user runs it:
``autosched --version``, every subcommand's ``--help`` naming each option's default, and
``export --help`` saying that it exports networks (ONNX models) too."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autosched.cli import make_parser
from autosched.version import __version__

REPO = Path(__file__).resolve().parents[2]


def _autosched(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "autosched", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every subcommand of ``parser``, nested ones too (``db list``), by its words."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found.update({f"{name} {k}": v for k, v in _subparsers(sub).items()})
    return found


def _with_defaults(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options of ``parser`` that have a default worth stating."""
    return [a for a in parser._actions
            if a.option_strings and a.default not in (None, False, argparse.SUPPRESS) and a.help]


def test_version_prints_the_version() -> None:
    assert _autosched("--version").strip() == f"autosched {__version__}"


COMMANDS = sorted(_subparsers(make_parser()))


@pytest.mark.parametrize("command", COMMANDS)
def test_each_subcommands_help_states_its_defaults(command: str) -> None:
    parser = _subparsers(make_parser())[command]
    text = " ".join(_autosched(*command.split(), "--help").split())  # the help text, unwrapped
    for action in _with_defaults(parser):
        flag = action.option_strings[-1]
        start = text.index(flag, text.index("options:"))
        shown = text[start : start + 400]
        assert f"(default: {action.default})" in shown or "default" in (action.help or "").lower(), (
            f"{command} {flag}: {shown}"
        )


def test_the_defaults_are_those_the_command_uses() -> None:
    text = " ".join(_autosched("tune", "--help").split())
    assert "measurements in all, earlier ones in the log count (default: 64)" in text
    assert "timed repeats per program (default: 3)" in text
    assert "--flush-cache flush the caches before each repeat --build" in text  # a flag: no default shown


def test_export_help_says_it_exports_networks_too() -> None:
    text = " ".join(_autosched("export", "--help").split())
    assert "autosched export MODEL.onnx --log LOG --out DIR exports a whole network (an ONNX model)" in text
    top = " ".join(_autosched("--help").split())
    assert "or a network as one C library" in top
