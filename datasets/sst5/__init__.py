"""SST-5 readers (stsa lines and PTB trees) and the fine-grained / binary views (finetuner spec §2, §4.2)."""

from .examples import Examples
from .ptb import Tree, format_right_branching, load_sst, parse_tree, read_trees, trees_to_examples, write_root_trees
from .stsa import file_sha256, read_stsa
from .views import (BINARY_MAP, EXPECTED_CLASS_COUNTS, EXPECTED_COUNTS, SPLITS, binary, check_counts, data_hashes,
                    fine_grained, load_sst5, sst5_dir)

__all__ = [
    "Examples", "Tree", "format_right_branching", "load_sst", "parse_tree", "read_trees", "trees_to_examples",
    "write_root_trees", "file_sha256", "read_stsa", "BINARY_MAP", "EXPECTED_CLASS_COUNTS", "EXPECTED_COUNTS",
    "SPLITS", "binary", "check_counts", "data_hashes", "fine_grained", "load_sst5", "sst5_dir",
]
