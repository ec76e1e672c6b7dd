"""Learning-history datasets: write (TFDS ArrayRecord), open, sample windows.

>>> from agentrl import data, envs
>>> env = envs.make("darkroom")
>>> data.write_dataset("dr_q", env, "q_learning", num_tasks=1000, num_episodes=200,
...                    env_name="darkroom")
>>> ds = data.open_dataset("dr_q")
>>> batch = data.ADSampler(ds, batch_size=64, num_episodes=4).batch(step=0)
"""

from agentrl.data.reader import DatasetIntegrityError, HistoryDataset, open_dataset
from agentrl.data.samplers import ADSampler, DPTSampler, data_sharding
from agentrl.data.writer import TaskPlan, plan_tasks, write_dataset

__all__ = [
    "ADSampler",
    "DPTSampler",
    "DatasetIntegrityError",
    "HistoryDataset",
    "TaskPlan",
    "data_sharding",
    "open_dataset",
    "plan_tasks",
    "write_dataset",
]
