"""Shared test fixtures."""

import os

# Tests run on the CPU; keep XLA from grabbing all threads of the 2-core box.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
