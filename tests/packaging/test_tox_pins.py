"""tox.ini's environments pin a pyarrow their NumPy can import: pyarrow 26 needs NumPy 2 and raised ImportError in
the NumPy-1 environments (recpack, recbole) as soon as a run built the stand-in datasets (Parquet) with
``--dataset all``; every check of that run then errored."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

TOX_INI = Path(__file__).resolve().parents[2] / "tox.ini"


def _expand(cfg: configparser.ConfigParser, text: str) -> str:
    """Substitute ``{[section]key}`` references (tox's syntax), recursively."""
    pattern = re.compile(r"\{\[([^\]]+)\]([A-Za-z0-9_]+)\}")
    for _ in range(10):
        new = pattern.sub(lambda m: cfg.get(m.group(1), m.group(2), fallback=m.group(0)), text)
        if new == text:
            break
        text = new
    return text


def test_numpy1_environments_pin_a_numpy1_pyarrow():
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(TOX_INI, encoding="utf-8")
    checked = []
    for section in cfg.sections():
        if not section.startswith("testenv:"):
            continue
        pins = _expand(
            cfg, cfg.get(section, "deps", fallback="") + "\n" + cfg.get(section, "commands_pre", fallback="")
        )
        numpy = re.search(r"numpy==(\d+)\.", pins)
        pyarrow = re.search(r"pyarrow==(\d+)\.", pins)
        if numpy and pyarrow:
            checked.append(section)
            if int(numpy.group(1)) < 2:
                assert int(pyarrow.group(1)) < 20, f"{section}: numpy {numpy.group(0)} with {pyarrow.group(0)}"
    assert {"testenv:recpack", "testenv:recbole", "testenv:official_pytorch"} <= set(checked), checked
