"""SST-5 readers (stsa lines and PTB trees), the fine-grained / binary views (docs/finetuner.md, 'The studied pipeline' and 'Reference behaviour') and a seeded
synthetic stand-in in the stsa format for runs without the shared data."""

# file_sha256: the suite's file hash (hex SHA-256), offered here for manifests of SST-5 files
from gru4rec_conformance.fileio import sha256_file as file_sha256

from .examples import Examples
from .ptb import Tree, format_right_branching, load_sst, parse_tree, read_trees, trees_to_examples, write_root_trees
from .standin import (
    STANDIN_CLASS_COUNTS,
    STANDIN_NAME,
    SST5Data,
    generate_standin,
    load_sst5_or_standin,
    standin_dir,
    write_standin,
)
from .stsa import read_stsa
from .views import (
    BINARY_MAP,
    EXPECTED_CLASS_COUNTS,
    EXPECTED_COUNTS,
    SPLITS,
    binary,
    check_counts,
    data_hashes,
    fine_grained,
    load_sst5,
    sst5_dir,
)

__all__ = [
    "Examples",
    "Tree",
    "format_right_branching",
    "load_sst",
    "parse_tree",
    "read_trees",
    "trees_to_examples",
    "write_root_trees",
    "file_sha256",
    "read_stsa",
    "BINARY_MAP",
    "EXPECTED_CLASS_COUNTS",
    "EXPECTED_COUNTS",
    "SPLITS",
    "binary",
    "check_counts",
    "data_hashes",
    "fine_grained",
    "load_sst5",
    "sst5_dir",
    "STANDIN_CLASS_COUNTS",
    "STANDIN_NAME",
    "SST5Data",
    "generate_standin",
    "load_sst5_or_standin",
    "standin_dir",
    "write_standin",
]
