"""Exceptions that say the environment is wrong, not the implementation: reported as environment errors.

An adapter run in the wrong interpreter fails with ``ModuleNotFoundError: No module named 'recbole'`` or, with a
package version the implementation was not written for, with ``AttributeError: module 'numpy' has no attribute
'in1d'``. Neither says anything about the implementation's conformance, so the harness does not count it as a check
failure: :func:`environment_problem` recognises such an exception, and the check is skipped with outcome detail
``environment`` and a message naming the tox environment that installs the implementation's pins
(:func:`tox_env_for`). :mod:`.verdict` counts such a check as applicable but not tested (never CONFORMANT), and
:mod:`.gate` fails the run.

Standard library only.
"""

from __future__ import annotations

import configparser
import functools
import re
import traceback
from pathlib import Path

from gru4rec_conformance import CHECKOUT_ROOT

__all__ = ["ENVIRONMENT_PREFIX", "environment_problem", "environment_problem_of", "tox_env_for", "message"]

#: First words of the skip reason of an environment error (the verdict and the reports key on them).
ENVIRONMENT_PREFIX = "environment error: "
#: ``AttributeError`` text of a module that lacks a name: the installed version is not the one the code expects.
_MODULE_ATTRIBUTE = re.compile(r"^module '(?P<module>[\w.]+)' has no attribute '(?P<name>\w+)'")
#: Exception types that always mean a missing or broken installation.
_IMPORT_ERRORS = ("ModuleNotFoundError", "ImportError")
#: The suite's own package: an import or attribute error inside it is a bug of the suite or of an adapter's use of it.
_SUITE = "gru4rec_conformance"


def environment_problem(type_name: str, text: str) -> str | None:
    """What is wrong with the environment, when an exception of ``type_name`` with message ``text`` says so.

    Args:
        type_name: the exception's class name (``"AttributeError"``; a worker reports it by name).
        text: its message.

    Returns:
        One line, e.g. ``"module 'numpy' has no attribute 'in1d' (the installed numpy is not the version this code
        was written for)"``, or None when the exception is not an environment problem (any other type; an
        ``AttributeError`` about an object, not a module; a module of the suite itself).
    """
    text = str(text).strip().splitlines()[0] if str(text).strip() else ""
    if type_name in _IMPORT_ERRORS:
        missing = re.search(r"No module named '([\w.]+)'", text)
        if missing and missing.group(1).split(".")[0] == _SUITE:
            return None
        return f"{type_name}: {text} (a package the implementation needs is missing or broken here)"
    if type_name == "AttributeError":
        m = _MODULE_ATTRIBUTE.match(text)
        if m and m.group("module").split(".")[0] != _SUITE:
            top = m.group("module").split(".")[0]
            return f"AttributeError: {text} (the installed {top} is not the version this code was written for)"
    return None


def environment_problem_of(exc: BaseException) -> str | None:
    """:func:`environment_problem` for an exception raised in this process: also None when the innermost frame
    of its traceback lies in the suite's checks or harness (a bug there is reported as such, not as the
    environment's)."""
    problem = environment_problem(type(exc).__name__, str(exc))
    if problem is None:
        return None
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    if frames and re.search(r"[/\\](conformance)[/\\](_harness|gru4rec|finetuner)[/\\]", frames[-1].filename):
        return None
    return problem


@functools.cache
def _tox_impls(tox_ini: str) -> dict[str, str]:
    """``{implementation name: tox environment}`` from the ``--impl`` arguments of the ``[testenv:<env>]``
    commands of ``tox_ini`` (empty when it cannot be read)."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(tox_ini, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for section in parser.sections():
        if not section.startswith("testenv:"):
            continue
        env = section.split(":", 1)[1]
        for m in re.finditer(r"--impl[ =]([\w.:,-]+)", parser.get(section, "commands", fallback="")):
            for name in m.group(1).split(","):
                out.setdefault(name, env)
                out.setdefault(name.split(":", 1)[0], env)
    return out


def tox_env_for(impl: str, tox_ini: Path | None = None) -> str | None:
    """The tox environment whose commands run implementation ``impl`` (``"recpack:neg_sampling"`` → ``"recpack"``),
    read from ``tox_ini`` (default: the checkout's tox.ini); None when there is no checkout or no such environment."""
    path = tox_ini or (CHECKOUT_ROOT / "tox.ini" if CHECKOUT_ROOT is not None else None)
    if path is None or not Path(path).is_file():
        return None
    table = _tox_impls(str(path))
    return table.get(impl) or table.get(impl.split(":", 1)[0])


def message(impl: str, problem: str, python: str | None = None, how: str | None = None) -> str:
    """The skip reason of an environment error: :data:`ENVIRONMENT_PREFIX`, the problem, and how to run the
    implementation in its own environment: ``how`` when the adapter said it (an interpreter it runs itself), else
    ``tox -e <env>``, or the tox.ini section to add."""
    env = tox_env_for(impl)
    where = f" in {python}" if python else ""
    how = how or (
        f"run it in its own environment: `tox -e {env}` (tox.ini installs its pinned dependencies)"
        if env
        else "run it in an environment with its pinned dependencies (a [testenv:<impl>] section of tox.ini)"
    )
    return f"{ENVIRONMENT_PREFIX}{problem}{where}; this is not a check result of {impl}: {how}"
