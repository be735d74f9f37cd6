"""Conformance checks of GRU4Rec implementations, one module per defect kind (K1..K11) plus metric
conformance. The check list: docs/checks.md (generated); procedures and pass rules: conformance/gru4rec/README.md."""
