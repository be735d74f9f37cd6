"""Conformance reports: per-run writer, summaries (Markdown, HTML), plots, scoreboard, study numbers.

- :mod:`reports.writer`: run directories ``reports/out/<impl>/<UTC timestamp>/`` (crash-safe results.jsonl,
  atomic results.json / summary.md / summary.html / plots);
- :mod:`reports.results`: record format, outcomes, reading a run back (complete, interrupted, killed);
- :mod:`reports.summary`, :mod:`reports.render`, :mod:`reports.plots`: what a summary shows and how;
- :mod:`reports.scoreboard`: ``python -m gru4rec_conformance.reports scoreboard [ROOT ...]``;
- :mod:`reports.card`: the verdict card of one implementation and judged version;
- :mod:`reports.publish`: ``python -m gru4rec_conformance.reports render ROOT ... --out DIR`` (cards, summaries,
  plots, the study figure, the scoreboard);
- shared by the pages, in modules of their own so that no page imports another to reach them:
  :mod:`reports.files` (file modes), :mod:`reports.facts` (headline metrics, suite currency, negative controls),
  :mod:`reports.selection` (collecting runs, the run that stands for each verdict key);
- :mod:`reports.compact`: ``python -m gru4rec_conformance.reports compact ROOT ...`` (committed verdicts, one
  results.json.gz per implementation and judged version);
- the study's published numbers and its expected outcome per check are read by ``gru4rec_conformance.datasets.study``
  (datasets/study/study_results.csv, study_expected.csv), below the reports.

Generated output lives in ``reports/out/`` (git-ignored); deliberate verdicts go to ``reports/verdicts/``.
"""
