"""GFM audit (Corley et al. 2026): audit tables of reported geospatial-foundation-model numbers, and
evaluate models under one pinned protocol that records every knob.

    from neurips26.gfm_audit import ResultTable, find_disagreements, published_results, default_aliases
    table = ResultTable.from_records(published_results(), default_aliases())
    groups = find_disagreements(table)          # 7 strict groups, spreads 56.57 ... 30.2
"""

from neurips26.gfm_audit.canon import AliasTable, default_aliases, load_aliases, normalise_eval, slug
from neurips26.gfm_audit.examples import (
    PUBLISHED_SPREADS,
    SYNTHETIC_WATERMARK,
    published_papers,
    published_results,
    synthetic_demo,
)
from neurips26.gfm_audit.finder import (
    ResultTable,
    copy_chains,
    count_at_least,
    find_disagreements,
    naive_leaderboard,
    protocol_mismatches,
    spread_summary,
)
from neurips26.gfm_audit.schema import (
    PaperRecord,
    RecordValidationError,
    ResultRecord,
    json_schema,
    load_papers,
    load_results,
    write_records,
)
from neurips26.gfm_audit.stats import gini, hhi, pretraining_uniqueness

__all__ = [
    "AliasTable",
    "default_aliases",
    "load_aliases",
    "normalise_eval",
    "slug",
    "PUBLISHED_SPREADS",
    "SYNTHETIC_WATERMARK",
    "published_papers",
    "published_results",
    "synthetic_demo",
    "ResultTable",
    "copy_chains",
    "count_at_least",
    "find_disagreements",
    "naive_leaderboard",
    "protocol_mismatches",
    "spread_summary",
    "PaperRecord",
    "RecordValidationError",
    "ResultRecord",
    "json_schema",
    "load_papers",
    "load_results",
    "write_records",
    "gini",
    "hhi",
    "pretraining_uniqueness",
]
