"""Conformance reports: per-run writer, summaries (Markdown, HTML), plots, scoreboard, study numbers.

- :mod:`reports.writer`: run directories ``reports/out/<impl>/<UTC timestamp>/`` (crash-safe results.jsonl,
  atomic results.json / summary.md / summary.html / plots);
- :mod:`reports.results`: record format, outcomes, reading a run back (complete, interrupted, killed);
- :mod:`reports.summary`, :mod:`reports.render`, :mod:`reports.plots`: what a summary shows and how;
- :mod:`reports.scoreboard`: ``python -m gru4rec_conformance.reports scoreboard``;
- :mod:`reports.study`: the study's published numbers (reports/data/study_results.csv).

Generated output lives in ``reports/out/`` (git-ignored); deliberate verdicts go to ``reports/verdicts/``.
"""
