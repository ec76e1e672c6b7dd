"""Meta-DT (Wang et al., NeurIPS 2024): a DT conditioned on a world model's task
representation and on a complementary prompt from the agent's own history.

Settings and sources: ``docs/references.md`` ("Meta-DT"). Three pieces:

- a **context-aware world model** (:mod:`agentrl.models.world_model`): a GRU
  encoder of the last ``context_horizon`` transitions of the episode gives
  the task representation ``z_t``; decoders predict ``r_t`` from ``(s_t, a_t,
  s_{t+1}, z_t)`` and ``s_{t+1}`` from ``(s_t, a_t, z_t)``; its loss is the
  reward's squared error plus ``state_loss_weight`` times the next state's
  (:func:`world_model_loss`);
- the **policy**, a causal transformer over one episode whose step ``t``
  observes ``[obs_t, rtg_t / rtg_scale, z_t, 0]`` (DT's return conditioning,
  agentrl's one token per step, :mod:`agentrl.algos.dt`), after
- a **complementary prompt**: ``prompt_length`` steps of an earlier episode
  of the same task, the segment whose summed world-model prediction error is
  the largest (:func:`select_prompt_start`), each step observed as
  ``[obs, prompt rtg / rtg_scale, 0, 1]``.

Training windows are two consecutive episodes of a learning history: the
first is the prompt's source, the second the episode the policy imitates
(next-action likelihood). ``no_prompt_fraction`` of every batch's rows see an
empty prompt (every prompt token ``[0, 0, 0, 1]``), as the first episode on a
new task does. In context (:class:`~agentrl.agents.prompted.MetaDTAgent`)
the prompt comes from the best episode the agent has played on the task so
far, re-selected at every episode's end, so no expert demonstration is
needed at test time.

Deviations from the reference (NJU-RL/Meta-DT), each for a reason:

- one program: the world model is trained *jointly* with the policy, one
  optimizer (the run's), its loss weighted by ``world_loss_weight``; the
  policy sees ``stop_gradient(z)``, so the world model learns only from its
  own loss. The reference pretrains it (Adam 1e-3, 301 epochs) and freezes it;
  agentrl's update step trains one module from one dataset, and a separate
  stage would need its own runner, checkpoint and resume. Both parts share
  the run's learning rate, weight decay and gradient clip (one global norm
  over both parts' gradients); the reference trains the world model with
  Adam at 1e-3, no weight decay, clipped at 1.0 on its own, and the policy
  with AdamW 1e-4 / 1e-4 clipped at 0.25 (``train_context.py``,
  ``meta_dt/trainer.py``).
- the prompt's source in training is the episode before the imitated one in
  the same learning history (the reference draws from a separate per-task
  prompt dataset). In context it is the agent's best episode so far on the
  task, re-selected after every episode of one trial, the segment the
  argmax of the world model's error over its k steps, as the paper states.
  The reference's evaluation differs in three ways: its pool is one
  trajectory per test task from every evaluation call during training
  (every 500 updates, the last of its 10 episodes), i.e. played by earlier
  checkpoints, and the prompt comes from a random one of the three best;
  that prompt stays fixed for the 10 scored episodes, whose mean is
  reported; and the start is sampled in proportion to the error summed
  from the start to the episode's end (``train_meta_dt.py``; in training,
  over the k-step segment), which favours early starts.
- the empty-prompt rows replace the reference's first 20,000 prompt-free
  updates (``warm_train``), so one compiled step serves the whole run.
- one token per step with the return-to-go in the observation (as agentrl's
  DT) instead of three tokens ``(R, s, a)``; prompt tokens carry a flag
  instead of their own embedding layers. Every token also reads the
  previous action and reward (the first episode token: the prompt's last
  ones), where the reference embeds no rewards (its prompt rewards are
  unpacked, never embedded).
- on grid families a cell's features are its one-hot and its ``(x, y)``
  (``grid_coordinates``; the reference's families have vector states).
- the target return is DT's: the best episode return in the whole training
  data, for every task (:func:`agentrl.algos.dt.resolved_return_conditioning`).
  The reference conditions each task on its own best return in its offline
  data (``train_meta_dt.py``, ``task_info[...]['return_scale'][1]``), test
  tasks included, which held-out tasks here have no data to give (on Dark
  Room 9x9's cpu data only 12 of 260 histories reach the global best, so
  most goals start above anything their data show). Found in session 50;
  a per-task target (the oracle's return as a stand-in, or the agent's best
  so far) would be chosen on validation tasks: not done.
- the world model learns nothing from an episode's last step: the
  histories store no successor there (the reference has
  ``next_observations`` for every step). One step in 20 on Dark Room.
- the ``cpu`` preset's model uses GELU's tanh form where the reference's
  policy uses ReLU (``dt_activation_function``); the ``gpu``/``full``
  presets' reference model takes ReLU (``model.ffn_activation``, session 69).

Not copied from the reference, on purpose: at evaluation its ``z_0`` is a
zero vector and ``z_1 .. z_{h-1}`` encode nothing (a negative slice start
returns no steps), where training encodes the zero-padded past (agentrl
encodes the same in both); and it keeps the world-model checkpoint with the
best loss on the test tasks' offline data.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agentrl.agents.acting import acting_agent
from agentrl.agents.model_agents import split_model
from agentrl.agents.prompted import MetaDTAgent, space_count
from agentrl.algos.ad import check_positive
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.algos.dt import (
    check_return_conditioning,
    check_target_return,
    discrete_obs_count,
    resolved_return_conditioning,
)
from agentrl.algos.losses import action_loss
from agentrl.configtools import traced
from agentrl.data.samplers import ADSampler
from agentrl.envs.base import env_horizon
from agentrl.models.world_model import (
    MetaDTModel,
    WorldPass,
    episode_tokens,
    features,
    gather_steps,
    join,
    prediction_errors,
    prompt_tokens,
    reverse_cumsum,
    world_model_loss,
    world_pass,
)


# ----- features and episodes ---------------------------------------------------
def split_episodes(batch: dict[str, jax.Array]) -> tuple[dict, dict]:
    """A window of two whole episodes -> ``(prompt source, imitated)``.

    Each is ``{"obs", "action", "reward", "valid"}`` of ``[B, H, ...]`` with
    ``H = T // 2`` (the sampler's episodes are at most the horizon long):
    the first episode at positions ``0 ..``, the second moved to start at 0;
    ``valid`` is False on padding.
    """
    mask = batch.get("mask")
    done = batch["done"] if mask is None else batch["done"] & mask
    steps = done.shape[1]
    horizon = steps // 2
    first_len = jnp.where(done.any(axis=1), jnp.argmax(done, axis=1) + 1, horizon)
    first_len = jnp.minimum(first_len, horizon)
    pos = jnp.arange(horizon)
    idx = first_len[:, None] + pos[None, :]
    inside = idx < steps
    idx = jnp.minimum(idx, steps - 1)
    keys = ("obs", "action", "reward")
    first = {k: batch[k][:, :horizon] for k in keys}
    first["valid"] = pos[None, :] < first_len[:, None]
    second = {k: gather_steps(batch[k], idx) for k in keys}
    valid = inside if mask is None else inside & gather_steps(mask, idx)
    second["valid"] = valid
    return first, second


def meta_dt_loss(
    algo: MetaDT,
    model: Any,
    batch: dict[str, jax.Array],
    hparams: dict[str, jax.Array],
    *,
    num_obs: int | None,
    num_actions: int | None,
    scale: float,
    grid_size: int | None = None,
    deterministic: bool = False,
):
    """``(loss, metrics, output)``: next-action NLL on the second episode of
    each window, after its prompt, plus the weighted world-model loss on both.

    ``batch``: ``obs [B, 2H, ...]``, ``action``, ``reward``, ``done``,
    ``mask [B, 2H]`` (two whole episodes, padded after short ones).
    """
    source, target = split_episodes(batch)
    state_w = hparams["state_loss_weight"]
    passes = []
    for ep in (source, target):
        obs_f = features(ep["obs"], num_obs, 2, grid_size)
        act_f = features(ep["action"], num_actions, 2)
        passes.append(world_pass(model.world, obs_f, act_f, ep["reward"], ep["valid"]))
    losses = [world_model_loss(*_loss_args(wp), state_w) for wp in passes]
    world_loss = 0.5 * (losses[0][0] + losses[1][0])
    rows = source["valid"].shape[0]
    empty = int(round(algo.no_prompt_fraction * rows))
    length = source["valid"].sum(axis=1).astype(jnp.int32)
    has_prompt = (jnp.arange(rows) >= empty) & (length > 0)
    errors = jax.lax.stop_gradient(prediction_errors(passes[0], state_w))
    prompt = prompt_tokens(
        passes[0],
        source["action"],
        length,
        has_prompt,
        errors,
        prompt_length=algo.prompt_length,
        context_horizon=algo.context_horizon,
        scale=scale,
    )
    rtg = reverse_cumsum(target["reward"], target["valid"])
    episode = episode_tokens(passes[1], target["action"], rtg, target["valid"], scale)
    tokens = join(prompt, episode)
    out = model.policy(*tokens, deterministic=deterministic)
    k = algo.prompt_length
    out = out.replace(
        action=out.action[:, k:],
        log_std=None if out.log_std is None else out.log_std[:, k:],
    )
    policy_loss, metrics = action_loss(
        model.config.head, out, target["action"], target["valid"]
    )
    loss = policy_loss + hparams["world_loss_weight"] * world_loss
    metrics = {
        **metrics,
        "policy_loss": policy_loss,
        "world_loss": world_loss,
        "reward_mse": losses[1][1]["reward_mse"],
        "state_mse": losses[1][1]["state_mse"],
    }
    return loss, metrics, out


def _loss_args(wp: WorldPass):
    return wp.pred_reward, wp.reward, wp.pred_next, wp.next_obs, wp.mask


# ----- the algorithm --------------------------------------------------------------
@register_algorithm
@dataclasses.dataclass(frozen=True)
class MetaDT(Algorithm):
    """Meta-DT (see the module docstring).

    Attributes:
      context_horizon: ``h``, transitions the world model's encoder reads.
      prompt_length: ``k``, steps of the complementary prompt.
      context_dim: size of the task representation ``z``.
      world_hidden: hidden width of the encoder's GRU and the decoders.
      world_loss_weight: weight of the world-model loss (traced).
      state_loss_weight: weight of the next-state term in the world-model
        loss and prediction error (traced; 0 = reward only, the reference's
        choice for families whose tasks differ in reward: Dark Room,
        Point-Robot).
      no_prompt_fraction: share of each batch's rows trained with an empty
        prompt (the first episode on a task has none).
      grid_coordinates: on a grid family (discrete cells and a ``size``:
        Dark Room, Key-to-Door) the observation features append the cell's
        ``(x, y) / size`` to its one-hot, as ``obs_encoding="grid"`` gives AD
        the geometry a per-cell table lacks.
      rtg_scale, target_return: as DT's (``None``: the horizon; the best
        episode return in the training data).
    """

    name = "meta_dt"
    description = "Meta-DT: DT with a world model's task representation and prompt"
    token_layouts = ("step",)

    context_horizon: int = 4
    prompt_length: int = 5
    context_dim: int = 16
    world_hidden: int = 128
    world_loss_weight: float = traced(1.0)
    state_loss_weight: float = traced(0.0)
    no_prompt_fraction: float = 0.2
    grid_coordinates: bool = True
    rtg_scale: float | None = None
    target_return: float | None = None

    def __post_init__(self):
        check_positive(
            "algo",
            context_horizon=self.context_horizon,
            prompt_length=self.prompt_length,
            context_dim=self.context_dim,
            world_hidden=self.world_hidden,
        )
        for name in ("world_loss_weight", "state_loss_weight"):
            v = getattr(self, name)
            check(
                isinstance(v, int | float) and np.isfinite(v) and v >= 0,
                f"algo.{name} must be a finite number >= 0, got {v!r}",
            )
        check(
            isinstance(self.grid_coordinates, bool),
            "algo.grid_coordinates must be true or false, got "
            f"{self.grid_coordinates!r}",
        )
        f = self.no_prompt_fraction
        check(
            isinstance(f, int | float) and 0 <= f <= 1,
            f"algo.no_prompt_fraction must be in [0, 1], got {f!r}",
        )
        check_return_conditioning(self.rtg_scale, self.target_return)

    def check(self, config: Any) -> None:
        super().check(config)
        check(
            config.model.obs_encoding == "table",
            "model.obs_encoding must be 'table' for algo 'meta_dt' (its "
            "observation is a vector with the return-to-go and the task "
            f"representation), got {config.model.obs_encoding!r}",
        )
        # a window is the prompt's source episode and the imitated one
        check(
            bool(config.data.path) or config.data.num_episodes >= 2,
            "data.num_episodes must be >= 2 for algo 'meta_dt' (a training "
            "window is two consecutive episodes: the prompt's source and the "
            f"imitated one), got {config.data.num_episodes}",
        )

    def grid_size(self, env: Any) -> int | None:
        """The grid size whose cell coordinates the features carry (or None)."""
        size = getattr(env, "size", None)
        discrete = discrete_obs_count(env) is not None
        use = self.grid_coordinates and discrete and isinstance(size, int)
        return size if use else None

    def complete_model(self, model_config: Any, env: Any) -> Any:
        # (x, y) of a grid cell, the rtg, z and the prompt flag
        extra = (2 if self.grid_size(env) else 0) + 2 + self.context_dim
        return dataclasses.replace(
            model_config,
            obs_kind="continuous",
            obs_size=model_config.obs_size + extra,
        )

    def build_model(self, model_config: Any, rngs: Any) -> MetaDTModel:
        return MetaDTModel(
            model_config,
            obs_dim=model_config.obs_size - 2 - self.context_dim,
            act_dim=model_config.action_size,
            context_dim=self.context_dim,
            hidden=self.world_hidden,
            context_horizon=self.context_horizon,
            rngs=rngs,
        )

    def context_steps(self, env: Any) -> int:
        return self.prompt_length + env_horizon(env)

    def resolve(self, env: Any, dataset: Any | None) -> MetaDT:
        conditioning = resolved_return_conditioning(self, env, dataset)
        return dataclasses.replace(self, **conditioning)

    def make_sampler(self, dataset: Any, train: Any, *, paired: bool = False) -> Any:
        return ADSampler(
            dataset,
            train.batch_size,
            num_episodes=2,
            window_start="episode",
            paired=paired,
            seed=train.seed,
        )

    def loss(self, model, batch, aux, hparams, *, env, deterministic=False):
        return meta_dt_loss(
            self,
            model,
            batch,
            hparams,
            num_obs=discrete_obs_count(env),
            num_actions=space_count(env.action_space(env.default_params)),
            scale=self._scale(env),
            grid_size=self.grid_size(env),
            deterministic=deterministic,
        )

    def _scale(self, env: Any) -> float:
        return float(self.resolve(env, None).rtg_scale)

    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        check_target_return(self.target_return)
        handle = split_model(model)
        settings = {
            "target_return": float(self.target_return),
            "rtg_scale": self._scale(env),
            "prompt_length": self.prompt_length,
            "context_horizon": self.context_horizon,
            "state_loss_weight": float(self.state_loss_weight),
            "grid_size": self.grid_size(env),
            "temperature": config.eval.temperature,
        }
        return acting_agent(
            lambda greedy: MetaDTAgent(handle, env, greedy=greedy, **settings),
            config.eval.acting,
        )
