"""Test configuration: hypothesis runs derandomized (fixed seeds) everywhere, no deadlines."""

from hypothesis import settings

settings.register_profile("optplan", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("optplan")
