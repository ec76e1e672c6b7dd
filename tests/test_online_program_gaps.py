"""The online programs' training-task draws (agentrl.online.program)."""

from types import SimpleNamespace

import jax
import numpy as np
import pytest

from agentrl.envs import make as make_env
from agentrl.online.program import training_tasks, transformer_program


def test_training_tasks_draw_every_train_id_and_nothing_else():
    """A finite task space's training draws are uniform over the split's
    train ids (the Dark Room goal ``[x, y]`` is cell ``y * size + x``):
    4096 draws over 20 ids reach each of them, and no held-out one."""
    env = make_env("darkroom", size=5)
    data = SimpleNamespace(split_fraction=0.8, seed=3)
    train = set(int(i) for i in env.task_split(0.8, 3).train)
    assert train != set(range(len(train)))  # ids are not the first cells
    sample = jax.jit(jax.vmap(training_tasks(env, data)))
    goals = np.asarray(sample(jax.random.split(jax.random.key(0), 4096)).goal)
    cells = goals[:, 1] * 5 + goals[:, 0]
    assert set(cells.tolist()) == train
    counts = np.bincount(cells, minlength=25)[sorted(train)]
    assert counts.min() > 4096 / 20 / 2  # roughly uniform


@pytest.mark.parametrize(("update_every", "chunk"), [(4, 4), (0, 12)])
def test_the_algorithms_fields_reach_the_transformer_trainer(update_every, chunk):
    """``algo.update_every`` (0: once per trial of 2 x 6 steps) and
    ``algo.init_log_std`` reach :class:`TransformerShape`."""
    from agentrl.configtools import override
    from agentrl.train.config import complete_config
    from agentrl.train.experiments import load_experiment

    config = load_experiment("transformer_ppo_darkroom", "smoke")
    changes = {"algo.update_every": update_every, "algo.init_log_std": -1.25}
    config = override(config, changes)
    env = make_env(config.data.env, **dict(config.data.env_args))
    full = complete_config(config, env)
    shape = transformer_program(full, env).trainer.shape
    assert (shape.trial_steps, shape.update_every) == (12, chunk)
    assert shape.init_log_std == -1.25
