"""Microsoft Recommenders' "GRU4Rec" (docs/implementations.md, 'Code bases from GitHub'): cannot run on Python 3.11 — the adapter tries
the import in its own environment (``tox -e ms_recommenders``) and reports the failure as the verdict.

Evidence (checked with pip against PyPI on Python 3.11, and by importing in the tox environment):

- the ``GRU4RecModel`` the study examined (``recommenders/models/deeprec/models/sequential/gru4rec.py``) exists up to
  recommenders 1.1.1, whose metadata requires Python < 3.10 (1.0.0: < 3.9); pip on 3.11 offers only 1.2.0
  and 1.2.1;
- 1.2.0 / 1.2.1 renamed it ``GRUModel`` (``.../sequential/gru.py``, the same TF1-compat model: GRU over
  item+category embeddings, MLP scorer, softmax over 1 + 4 sampled negatives) and pin ``tensorflow<2.16``
  (``[all]``/``[gpu]`` extras); the oldest TensorFlow with Python 3.11 wheels is 2.12, so 2.12–2.15 are the
  candidates; the tox environment installs tensorflow-cpu 2.15.1 (resolves keras 2.15, numpy 1.26, pandas
  2.3, cornac 2.x for recommenders' cornac<3 pin) — the install succeeds;
- ``gru.py`` imports ``keras.layers.legacy_rnn.rnn_cell_impl``, which keras ships only up to 2.8 (absent from
  the keras 2.9, 2.10, 2.12, 2.13 and 2.15 wheels); keras 2.8 needs TensorFlow 2.8, which has no Python 3.11
  wheel. So ``import ...sequential.gru`` raises ``ModuleNotFoundError`` under every TensorFlow the package
  allows on Python 3.11. Making it import would take an aliasing shim over TensorFlow's private
  ``tensorflow.python.keras`` tree, i.e. a port, not a translation; and the model is not a GRU4Rec anyway
  (MS-1..MS-5: needs item categories, no full-catalogue ranking in one pass, sampled-group metrics).

On Python 3.9 (``tox -e ms_recommenders_py39,ms_recommenders``: the harness on 3.11, the worker on 3.9 with
recommenders 1.1.1 and TensorFlow 2.7.4, the release its ``[gpu]`` extra pins) ``GRU4RecModel`` imports. Driving
it is still not translation-only: it reads its data from text files in its own format (user, item, category,
timestamp, history columns) through ``SequentialIterator``, trains with 1 + 4 sampled negatives per example and
scores only a given candidate list, so no adapter drives it yet; the verdict then says that instead.

``capabilities()`` (run in the worker, i.e. in the implementation's environment) attempts the real import
and raises :class:`ImplementationUnavailable` with one line saying why; every check is then skipped with
that line, and the committed verdict report and the scoreboard show it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gru4rec_conformance.implementations.base import Adapter, FitReport, ImplementationUnavailable
from gru4rec_conformance.implementations.registry import register

#: GRUModel (recommenders >= 1.2, renamed) and GRU4RecModel (recommenders <= 1.1.1).
_GRU_MODULES = ("recommenders.models.deeprec.models.sequential.gru",
                "recommenders.models.deeprec.models.sequential.gru4rec")  # fmt: skip
_PROVIDE = ("run it with `tox -e ms_recommenders_py39,ms_recommenders` (a Python 3.9 worker with "
            "recommenders==1.1.1, tensorflow-cpu==2.7.4)")  # fmt: skip


def _installed_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("recommenders")
    except importlib.metadata.PackageNotFoundError:
        return None


def _import_error() -> str | None:
    """The error of importing recommenders' GRUModel / GRU4RecModel here (None if one of them imports)."""
    import importlib

    errors = []
    for module in _GRU_MODULES:
        try:
            importlib.import_module(module)
        except Exception as exc:  # ModuleNotFoundError expected; any import failure is the verdict
            errors.append(f"{type(exc).__name__}: {exc}")
        else:
            return None
    return errors[0]


def why_unavailable() -> str:
    """One line: why Microsoft Recommenders' GRU4Rec cannot run in this environment."""
    import sys

    version = _installed_version()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    if version is None:
        return f"recommenders is not installed in this environment: {_PROVIDE}"
    err = _import_error()
    if err is not None:
        return (
            f"recommenders {version} cannot run on Python {py}: importing GRUModel (the renamed GRU4RecModel) "
            f"fails with {err} — keras.layers.legacy_rnn ships only with keras<=2.8 (TensorFlow<=2.8, no "
            f"Python 3.11 wheels), and the GRU4RecModel of recommenders<=1.1.1 requires Python<3.10"
        )
    return (
        f"recommenders {version} GRU4RecModel imports on Python {py}, but no adapter drives it: it trains from "
        f"its own text files with item categories and 1+4 sampled negatives and scores only candidate lists "
        f"(the study's defects MS-1..MS-5, docs/study.md), which a translation-only adapter cannot map to full-catalogue "
        f"ranking"
    )


@register
class MsRecommendersAdapter(Adapter):
    """Microsoft Recommenders' "GRU4Rec": records why it cannot run (see the module docstring)."""

    name = "ms_recommenders"
    isolated = True
    description = "Microsoft Recommenders GRU4RecModel (1.1.1, Python 3.9) / GRUModel (1.2.x), TensorFlow 1-compat"
    homepage = "https://pypi.org/project/recommenders/1.1.1/"
    study = None
    reproducibility = {
        "installs": "pip resolves recommenders==1.2.1 + tensorflow-cpu==2.15.1 on Python 3.11, but GRUModel does "
        "not import (keras.layers.legacy_rnn needs keras<=2.8); recommenders 1.1.1 (Python<3.10) with "
        "tensorflow-cpu 2.7.4 on Python 3.9 imports GRU4RecModel (installed --no-deps: its full requirement "
        "list builds lightfm, scikit-surprise and cornac<2 from source)",
        "offline": "not testable (does not import)",
        "pinned": "tox envs 'ms_recommenders_py39' + 'ms_recommenders': recommenders==1.1.1, tensorflow-cpu==2.7.4, "
        "keras==2.7.0, numpy==1.21.6, pandas==1.3.5 in a Python 3.9 worker; the package pins tensorflow~=2.7.0, "
        "pandas<2",
        "hyperparameters": "YAML hparams (prepare_hparams); not testable here",
    }

    def version(self) -> str:
        return _installed_version() or "not installed"

    def capabilities(self) -> dict[str, Any]:
        raise ImplementationUnavailable(why_unavailable())

    def build(self, seed: int, **hparams: Any) -> None:
        raise ImplementationUnavailable(why_unavailable())

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        raise ImplementationUnavailable(why_unavailable())

    def item_ids(self) -> Any:
        raise ImplementationUnavailable(why_unavailable())

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> Any:
        raise ImplementationUnavailable(why_unavailable())
