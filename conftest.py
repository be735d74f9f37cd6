"""Root conftest of a checkout: loads the suite's pytest plugin when it is not installed.

Installed (``pip install -e .`` or the wheel), the plugin comes in through its ``pytest11`` entry point, whose
name is the module's, so the line below is then a no-op. From a plain checkout, pyproject.toml's ``pythonpath``
puts ``src/`` on ``sys.path`` (the ``gru4rec_conformance`` namespace) and this line registers the plugin.
``pytester`` is for the suite's own tests of the plugin (tests/harness, tests/meta).
"""

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
# `python -m pytest` from the root puts the root on sys.path, where `datasets/` would shadow Hugging Face's
# `datasets` (transformers probes it with find_spec): take it off; the suite imports through src/ only, which
# is put first here too for runs that do not read pyproject.toml (a rootdir given without its ini file).
sys.path[:] = [str(_ROOT / "src")] + [p for p in sys.path if Path(p or ".").resolve() not in (_ROOT, _ROOT / "src")]

pytest_plugins = ["gru4rec_conformance.conformance._harness.plugin", "pytester"]
