"""Oracles of the conformance suite: ``reference.gru4rec`` (GRU4Rec) and ``reference.finetuner`` (SST-5)."""
