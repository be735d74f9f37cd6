"""The study's five session datasets: raw readers, the preprocessing pipeline, synthetic stand-ins, the small
check datasets of the conformance suite and loaders of the real slices in ../shared/data/sessions.

Modules: ``readers`` (raw formats), ``pipeline`` (``prepare``/``process``), ``synthetic`` (``generate_raw``),
``checks`` (D-LAG1, D-LONG, D-TAIL, D-VAR, Zipf sessions), ``real`` (``yoochoose_100k`` and the raw slices).
"""
