"""Shared test fixtures and process-wide test settings."""

import os
import tempfile

# Tests run on the CPU; keep XLA from grabbing all threads of the 2-core box.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
# A persistent compilation cache shared by the test process and the
# subprocesses it starts (resume, multi-device, multi-host tests compile the
# same programs): set before JAX is imported, inherited through the env.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), "agentrl-jax-cache"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def darkroom_dataset(tmp_path_factory):
    """8 Q-learning histories of 30 episodes on Dark Room 9x9 (tiny, shared)."""
    from agentrl import envs
    from agentrl.data import write_dataset

    path = tmp_path_factory.mktemp("data") / "darkroom_q"
    env = envs.make("darkroom")
    write_dataset(
        path,
        env,
        "q_learning",
        num_tasks=8,
        num_episodes=30,
        seed=0,
        env_name="darkroom",
    )
    return path
