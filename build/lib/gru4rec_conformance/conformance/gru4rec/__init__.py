"""Conformance checks of GRU4Rec implementations, one module per defect kind of conformance_checks.md §B.1
(K1..K11) plus metric conformance. The check list is in conformance/gru4rec/README.md."""
