"""Test configuration: hypothesis runs derandomized (fixed seeds) everywhere, no deadlines."""

import os

from hypothesis import settings

# No "numba is compiling" notice (optplan/_jit.py) in tests that read stderr, here and in the
# commands they start: which test compiles a kernel first depends on the order and the cache.
# tests/test_jit_notice.py turns it on where it checks it.
os.environ["OPTPLAN_JIT_NOTICE"] = "0"

settings.register_profile("optplan", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("optplan")
