"""Settings: :class:`Options` (what users set) and :class:`Tuning` (the constants of the
heuristics, passes and code writers), both frozen, both passed down the pipeline.

:mod:`.options` is the one module that reads environment variables (listed there);
:mod:`.tuning` holds the tuning sections and the ``section.field=value`` parser.
"""
from __future__ import annotations

from .options import (LOG_TOPICS, Options, configure_logging, default_cache_dir,  # noqa: F401
                      log_topics_from_env)
from .tuning import (CodegenTuning, DecomposeTuning, GraphPassTuning, InnerOuterTuning,  # noqa: F401
                     LoopedTuning, OuterTuning, PersistentTuning, PointwiseTuning, RuntimeTuning,
                     SegmentTuning, SplitTuning, Tuning, parse_tuning, tuning_fields)
