"""Shared test fixtures and process-wide test settings."""

import os
import tempfile

# Tests run on the CPU; keep XLA from grabbing all threads of the 2-core box.
# LLVM's optimisations are off: the tests spend most of their time compiling,
# and this cut three compile-bound long tests from 183 s to 109 s (2 cores,
# 2026-11-27). The programs are the same; only machine code and floating-point
# rounding differ from a default build (experiments and benchmarks run
# outside the tests at XLA's defaults). Other XLA:CPU flags (a codegen split
# count of 1, YNNPACK fusions off) changed compile time by less than the noise
# between repeats (docs/design.md, testing).
os.environ.setdefault(
    "XLA_FLAGS",
    "--xla_cpu_multi_thread_eigen=false --xla_backend_optimization_level=0 "
    "--xla_llvm_disable_expensive_passes=true",
)
# A persistent compilation cache shared by the test process and the
# subprocesses it starts (resume, multi-device, multi-host tests compile the
# same programs): set before JAX is imported, inherited through the env.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), "agentrl-jax-cache"),
)
# Every program is cached, however quick its compile: most of the suite's
# compiles are small programs, which a 0.5 s threshold left out, so a second
# run recompiled them (docs/design.md, testing).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

import pytest  # noqa: E402

# XLA:CPU's temporary buffers reused across calls (no page faults per call),
# as the agentrl command does: before any test starts XLA's threads
from agentrl.host_memory import configure_malloc  # noqa: E402

configure_malloc()


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Drop JAX's compiled programs after each test file.

    Every XLA:CPU executable keeps its machine code in memory mappings of its
    own (a few per kernel) for as long as a cache holds it. A test worker that
    compiles for an hour (``make test-long``) reached Linux's 65,530 mappings
    per process (``vm.max_map_count``) and crashed inside XLA when the next
    executable was loaded or serialised (CI, 2026-11-27: 49,000 mappings in
    one worker at 85% of the suite). Tests of one file still share their
    compiles; the persistent cache serves the next file's.
    """
    yield
    import gc

    import jax

    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def darkroom_dataset(tmp_path_factory):
    """8 Q-learning histories of 30 episodes on Dark Room 9x9 (tiny, shared)."""
    from agentrl import envs
    from agentrl.data import write_dataset
    from agentrl.sources import source_histories

    path = tmp_path_factory.mktemp("data") / "darkroom_q"
    env = envs.make("darkroom")
    write_dataset(
        path,
        env,
        source_histories("q_learning", env),
        num_tasks=8,
        num_episodes=30,
        seed=0,
        env_name="darkroom",
    )
    return path


@pytest.fixture(scope="session")
def tiny_ad_config(darkroom_dataset):
    """``make(steps) -> ExperimentConfig``: ad_darkroom smoke, 1 layer width 16."""
    from agentrl import configtools
    from agentrl.train.experiments import load_experiment

    def make(steps: int = 2):
        return configtools.override(
            load_experiment("ad_darkroom", "smoke"),
            {
                "data.path": str(darkroom_dataset),
                "train.steps": steps,
                "train.batch_size": 4,
                "train.warmup_steps": 1,
                "model.d_model": 16,
                "model.d_ff": 32,
                "model.num_layers": 1,
                "eval.num_tasks": 3,
                "eval.num_episodes": 2,
            },
        )

    return make
