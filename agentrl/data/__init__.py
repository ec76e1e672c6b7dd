"""Learning-history datasets: write (TFDS ArrayRecord), open, sample windows.

>>> from agentrl import data, envs, sources
>>> env = envs.make("darkroom")
>>> q = sources.source_histories("q_learning", env)
>>> data.write_dataset("dr_q", env, q, num_tasks=1000, num_episodes=200,
...                    env_name="darkroom")
>>> ds = data.open_dataset("dr_q")
>>> batch = data.ADSampler(ds, batch_size=64, num_episodes=4).batch(step=0)

The writer takes any ``histories(params, key, num_episodes, task_id)``
callable and knows the :class:`~agentrl.history.History` schema, not the
sources: no module here imports :mod:`agentrl.sources`, except the command
line (``agentrl data generate``), which builds the callable from a source
name inside the command. :func:`write_histories` writes histories that
already exist; :mod:`agentrl.data.xland100b` (extra ``h5py``) imports
XLand-100B HDF5 files through it.
"""

from agentrl.data.reader import DatasetIntegrityError, HistoryDataset, open_dataset
from agentrl.data.samplers import ADSampler, DPTSampler, check_batch, data_sharding
from agentrl.data.task_plan import TaskPlan, plan_tasks
from agentrl.data.writer import write_dataset, write_histories

__all__ = [
    "ADSampler",
    "DPTSampler",
    "DatasetIntegrityError",
    "HistoryDataset",
    "TaskPlan",
    "check_batch",
    "data_sharding",
    "open_dataset",
    "plan_tasks",
    "write_dataset",
    "write_histories",
]
