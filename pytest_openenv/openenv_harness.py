"""An OpenEnv ``EvalHarness`` that runs pytest-openenv: ``openenv.core.evals`` users get
our figures as an ``EvalResult``.

    from openenv.core.evals import EvalConfig
    from pytest_openenv.openenv_harness import PytestOpenEnvHarness

    harness = PytestOpenEnvHarness()
    result = harness.run_from_config(EvalConfig(
        harness_name=harness.name, harness_version=harness.version,
        library_versions={}, dataset="openspiel:tic_tac_toe",
        eval_parameters={"n": 20, "policy": "random", "repeats": 2},
    ))
    result.scores["pass_rate"], result.scores["passk"]["pass@k"]

``dataset`` is an env spec (``family:variant``: the bundled episode test runs on it) or
a suite path (a test file, folder or node id: its tests run, ``eval_parameters["env"]``
as their default env). Each ``eval_parameters`` key is an option without its prefix
(``min_pass_rate`` or ``min-pass-rate`` for ``--openenv-min-pass-rate``): ``True`` gives
a flag, ``False`` / ``None`` leave it out, a list repeats it, a dict is written as JSON.
An unknown key is a ``HarnessParameterError`` naming the keys there are.

``run`` starts ``python -m pytest`` in a subprocess (the run is a whole pytest session:
its own workers, plugins and exit code) with an output folder (``output`` given to the
harness, else a new temporary folder, kept), and returns the ``summary.json`` that run
wrote as the scores: its ``figures`` at the top level (``pass_rate``, ``mean_reward``,
...), then every other key of it as it is (``passk``, ``gate``, ``output``, ...), and
``exit_status`` the child's exit code. A run that ends 0 or 1 (episodes or a gate failed)
has figures; any other exit, or a run that wrote no summary.json (one with no episode
test; an earlier run's in a reused ``output`` is never read), raises
``HarnessRunFailed`` with the end of its output. Secrets stay in the environment the
child inherits, never on its command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openenv.core.evals import EvalHarness

from ._version import __version__
from .config.options import OPTION_BY_FLAG
from .errors import HarnessParameterError, HarnessRunFailed

#: exit codes after which summary.json holds the run's figures
WITH_FIGURES = (0, 1)
#: keys a run sets itself
RESERVED = frozenset(("output",))
#: lines of the child's output a failure shows
TAIL = 30


def _flag(key: str) -> str:
    name = key.removeprefix("--").removeprefix("openenv-").removeprefix("openenv_")
    return name.replace("_", "-")


def option_args(eval_parameters: Mapping[str, Any]) -> list[str]:
    """``eval_parameters`` as ``--openenv-*`` arguments (see the module's docstring)."""
    args: list[str] = []
    for key, value in eval_parameters.items():
        flag = _flag(str(key))
        option = OPTION_BY_FLAG.get(flag)
        if option is None or flag in RESERVED:
            known = ", ".join(sorted(name.replace("-", "_") for name in OPTION_BY_FLAG))
            why = "is set by the harness" if flag in RESERVED else "is no option of the plugin"
            raise HarnessParameterError(
                f"eval_parameters[{key!r}] {why}; the keys are the --openenv-* options "
                f"without their prefix: {known}"
            )
        if value is None or value is False:
            continue
        if value is True:
            if not option.is_flag and option.alone is None:
                raise HarnessParameterError(
                    f"eval_parameters[{key!r}] = True: --openenv-{flag} takes a value "
                    f"({option.metavar or 'VALUE'})"
                )
            args.append(f"--openenv-{flag}")
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            text = json.dumps(item) if isinstance(item, (dict, list)) else str(item)
            args.append(f"--openenv-{flag}={text}")
    return args


def is_env_spec(dataset: str, cwd: Path) -> bool:
    """``family:variant`` rather than a suite path (which exists, or names a node id)."""
    path = dataset.partition("::")[0]
    if path and (cwd / path).exists():
        return False
    family, colon, variant = dataset.partition(":")
    return bool(colon and family and variant and "/" not in family and "::" not in dataset)


def scores_of(summary: dict[str, Any]) -> dict[str, Any]:
    """summary.json as scores: its figures at the top level, then its other keys."""
    figures = summary.get("figures") or {}
    rest = {key: value for key, value in summary.items() if key != "figures"}
    clash = sorted(set(figures) & set(rest))
    if clash:  # never one figure hiding another
        raise HarnessRunFailed(f"summary.json has {clash} both as figures and as keys")
    return {**figures, **rest}


class PytestOpenEnvHarness(EvalHarness):
    """Runs a pytest-openenv suite (or the bundled episode test) as an OpenEnv evaluation.

    ``output``: the output folder (default: a new temporary folder per run, kept);
    ``pytest_args``: more arguments for every run (``-n 4``, ``-q``, a ``-p`` plugin);
    ``cwd``: where pytest runs (default: the current folder; suite paths are read
    from it); ``timeout``: seconds a run may take (None: no limit); ``python``: the
    interpreter (default: this one); ``env``: the child's environment (default:
    this process's, where API keys come from).
    """

    version = __version__

    def __init__(
        self,
        *,
        output: str | os.PathLike[str] | None = None,
        pytest_args: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        python: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.output = Path(output) if output is not None else None
        self.pytest_args = list(pytest_args)
        self.cwd = Path(cwd) if cwd is not None else None
        self.timeout = timeout
        self.python = python or sys.executable
        self.env = dict(env) if env is not None else None
        #: the output folder of the latest run (its dataset, card, report and logs)
        self.last_output: Path | None = None

    def command(self, dataset: str, eval_parameters: Mapping[str, Any], output: Path) -> list[str]:
        cwd = self.cwd or Path.cwd()
        args = [self.python, "-m", "pytest", "-p", "no:cacheprovider"]
        if is_env_spec(dataset, cwd):
            if "env" in {_flag(str(key)) for key in eval_parameters}:
                raise HarnessParameterError(
                    f"dataset {dataset!r} is an env spec and eval_parameters names an env "
                    "too: give one (a suite path as dataset takes env as its default env)"
                )
            args.append(f"--openenv-env={dataset}")
        else:
            args.append(dataset)
        args += option_args(eval_parameters)
        args += [f"--openenv-output={output}", *self.pytest_args]
        return args

    def run(
        self,
        harness_version: str,
        library_versions: dict[str, str],
        dataset: str,
        eval_parameters: dict[str, Any],
    ) -> dict[str, Any]:
        """Run the suite on ``dataset`` and return its summary.json as scores."""
        output = self.output or Path(tempfile.mkdtemp(prefix="openenv-harness-"))
        output = output.resolve()
        command = self.command(dataset, eval_parameters or {}, output)
        summary_path = output / "summary.json"
        earlier = _identity(summary_path)
        # a harness called from an xdist worker must not make its run believe it is one
        environ = {
            key: value
            for key, value in (self.env if self.env is not None else os.environ).items()
            if not key.startswith("PYTEST_XDIST_")
        }
        try:
            done = subprocess.run(
                command,
                cwd=self.cwd,
                env=environ,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HarnessRunFailed(
                f"the pytest run on {dataset!r} took longer than {self.timeout:g} s; what it "
                f"finished is in {output} (run it again with resume=True to go on)"
            ) from None
        self.last_output = output
        written = _identity(summary_path)
        # an output folder reused across runs keeps an earlier run's summary.json: only
        # one this run wrote (written to a new file and renamed in) holds its figures
        if done.returncode not in WITH_FIGURES or written is None or written == earlier:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-TAIL:])
            raise HarnessRunFailed(
                f"the pytest run on {dataset!r} ended with exit code {done.returncode} "
                f"({_exit_meaning(done.returncode)}) and wrote no summary.json in "
                f"{output}:\n{tail}"
            )
        scores = scores_of(json.loads(summary_path.read_text(encoding="utf-8")))
        scores["exit_status"] = done.returncode  # how the run ended, whatever it wrote
        return scores


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    """What tells two versions of a file apart (None: no file): the run's writer
    replaces summary.json with a new file, so a new inode or mtime means a new write."""
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size)


def _exit_meaning(code: int) -> str:
    return {
        2: "interrupted",
        3: "internal error",
        4: "usage error",
        5: "no test collected",
    }.get(code, "see its output")
