"""Limits of the devices' kernels that more than one stage must agree on (decompositions choose
what lowering can do well; lowering falls back past the same line)."""
from __future__ import annotations

# Devices whose kernels accumulate scattered updates with atomics, and how many updates per
# target row (on average) they take before ATen runs the op instead: atomic adds to one address
# serialize, and BERT's token-type embedding (8192 updates into 2 rows) took 390 ms on an H100
# where ATen's sorting kernel takes 0.1 ms.
ATOMIC_UPDATES_PER_ROW_LIMIT = {"cuda": 64}
