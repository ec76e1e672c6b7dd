"""Retrieval-Augmented Decision Transformer (Schmied et al., 2024), RA-DT.

A short-context transformer that acts on the last ``context_len`` steps of
its history plus ``num_retrieved`` sub-trajectories ("pieces") retrieved
from an external memory by maximum inner product search
(:mod:`agentrl.data.retrieval`):

- **Training** (from AD's learning histories): the memory holds pieces of
  ``piece_len`` steps starting every ``piece_stride`` steps of every
  training history, keyed by a frozen encoder of their first ``query_len``
  steps. Each batch window (``context_len`` consecutive steps, as AD's
  "any"-start windows) queries it with its last ``query_len`` steps; the
  ``top_k`` most similar pieces (of the window's own history only those
  that end before it starts, as at evaluation, where the memory is the
  agent's past; near-duplicates above ``max_similarity`` excluded) are rescored by
  ``min_max(similarity) + task_weight * same_task`` and the best
  ``num_retrieved`` kept, ordered by ascending return. Retrieval runs inside
  the jitted update (:class:`RetrievalDeviceSampler`); the loss is AD's
  next-action likelihood over the window's steps only.
- **Evaluation** (the reference's separate evaluation memory): the memory is
  the agent's own finished steps in the task at hand, empty at the start,
  rescored by ``min_max(similarity) + return_weight * min_max(piece
  return)``: the in-context improvement comes from retrieving its own best
  earlier experience.

The model input is ``[pieces..., window]`` on one causal sequence; a piece's
cells carry observation block 1, an empty slot (no memory yet) block 2, the
window block 0 (``obs_id + block * num_obs``; with the grid encoding these
are extra layers), so the model tells them apart.

Deviations from the reference (ml-jku/RA-DT; settings in
docs/references.md, "RA-DT"): the policy reads the pieces by prepended
context, not cross-attention; no return-to-go conditioning (AD's
objective, which lets it use the factorised grid embedding); a frozen
random-feature encoder instead of a frozen pretrained language model; a
piece's utility return is the reward inside the piece, not its episode's
return; the window is the last ``context_len`` steps across episode
boundaries (AD's "any"-start windows; the reference's stays inside one
episode), and so is a piece (26% of those retrieved on Dark Room's cpu
data straddle two episodes; the reference's keys and values stay inside
one); exact search over the whole memory (no FAISS index, no
deduplication pass), by cosine at evaluation too (the reference's
evaluation memory is not normalised: raw inner product). The reference
leaves out the query's own stored trajectory, which is its own episode
(its data are split at every ``done``; ``exclude_same_trjs``), so the same
run's other episodes, later ones included, stay candidates; here the
window's own history only from the window on (its earlier pieces are the
agent's past, as at evaluation; until session 51 only pieces overlapping
the window were left out, so 13% of retrievals on Dark Room's cpu-preset
data were the window's own future), while pieces from later in another
history of the same goal stay (25% of training retrievals there). The
near-duplicate cutoff ``max_similarity`` is the reference's rule, set for
its 25-step learned embeddings: on these 5-step random-feature keys it
removes an exact copy of the query in ~38% of training queries, and
evaluation applies none (as the reference). Windows ending in an
episode's first 10 steps do not get the reference's random piece of their
task (``min_seq_len``). One sequence: the window's first step reads the
piece's last action and reward as its previous ones. An empty slot in a
fraction ``empty_prob`` of training rows so that the first episodes at
evaluation, with an empty memory, are not out of distribution (the
reference skips cross-attention there). Acting: the reference samples
above the median logit (``sample_from_logits(top_p=0.5)``), the presets'
``eval.acting="sample_above_median"``, which a reproduction weighs against
the usual three rules on validation tasks.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agentrl.agents.acting import acting_agent
from agentrl.agents.agent import Step
from agentrl.agents.model_agents import (
    ScoredAgent,
    action_scores,
    scores_at,
    split_model,
)
from agentrl.algos.ad import ad_loss, check_positive
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.checks import is_int
from agentrl.data.device_sampler import (
    batch_key,
    draw_index,
    gather,
    index_tables,
    spec_of,
    split_arrays,
)
from agentrl.data.retrieval import FrozenEncoder, min_max, reweight, search
from agentrl.data.samplers import ADSampler

#: observation blocks of the model input: window, retrieved piece, empty slot
WINDOW, PIECE, EMPTY = 0, 1, 2
NUM_BLOCKS = 3


def discrete_sizes(env: Any) -> tuple[int, int]:
    """``(num_obs, num_actions)`` of ``env``; ``ValueError`` unless both discrete."""
    params = env.default_params
    obs, act = env.observation_space(params), env.action_space(params)
    check(
        hasattr(obs, "n") and hasattr(act, "n"),
        "algo 'radt' needs discrete observations and actions (its frozen "
        f"encoder embeds cell and action ids), got {obs} and {act}",
    )
    return int(obs.n), int(act.n)


@register_algorithm
@dataclasses.dataclass(frozen=True)
class RADT(Algorithm):
    """Retrieval-Augmented Decision Transformer (see the module docstring).

    Attributes:
      context_len: steps of the agent's own history in the model input.
      piece_len: steps of a retrieved piece.
      query_len: steps its key (and a query) embed, the piece's first
        ``query_len`` (the rest is what followed).
      piece_stride: a piece starts every this many steps.
      top_k: candidates of the inner product search.
      num_retrieved: pieces kept after rescoring.
      task_weight: utility weight of a same-task piece in training.
      return_weight: utility weight of the piece's (min-maxed) return at
        evaluation.
      max_similarity: training skips pieces more similar than this
        (near-duplicates); ``None``: none.
      query_dropout: training queries drop each of their steps with this
        probability (the reference's 0.2).
      empty_prob: training rows given an empty slot instead of a piece.
      encoder_seed, encoder_hidden, key_dim: the frozen encoder.
    """

    name = "radt"
    description = "Retrieval-Augmented DT: short context + retrieved pieces"

    context_len: int = 10
    piece_len: int = 10
    query_len: int = 5
    piece_stride: int = 5
    top_k: int = 50
    num_retrieved: int = 1
    task_weight: float = 1.0
    return_weight: float = 1.0
    max_similarity: float | None = 0.98
    query_dropout: float = 0.2
    empty_prob: float = 0.1
    encoder_seed: int = 0
    encoder_hidden: int = 128
    key_dim: int = 64

    def __post_init__(self):
        check_positive(
            "algo",
            context_len=self.context_len,
            piece_len=self.piece_len,
            query_len=self.query_len,
            piece_stride=self.piece_stride,
            top_k=self.top_k,
            num_retrieved=self.num_retrieved,
            encoder_hidden=self.encoder_hidden,
            key_dim=self.key_dim,
        )
        check(
            self.query_len <= min(self.piece_len, self.context_len),
            f"algo.query_len must be <= algo.piece_len ({self.piece_len}) and "
            f"algo.context_len ({self.context_len}), got {self.query_len}",
        )
        check(
            self.num_retrieved <= self.top_k,
            f"algo.num_retrieved must be <= algo.top_k ({self.top_k}), "
            f"got {self.num_retrieved}",
        )
        seed = self.encoder_seed
        check(
            is_int(seed, 0),
            f"algo.encoder_seed must be an integer >= 0, got {seed!r}",
        )
        for field in ("task_weight", "return_weight"):
            value = getattr(self, field)
            check(
                isinstance(value, int | float) and value >= 0,
                f"algo.{field} must be a number >= 0, got {value!r}",
            )
        for field in ("query_dropout", "empty_prob"):
            value = getattr(self, field)
            check(
                isinstance(value, int | float) and 0 <= value < 1,
                f"algo.{field} must be in [0, 1), got {value!r}",
            )
        # a near-duplicate cutoff: at or below 0 it would skip every piece
        # that points the query's way, the ones retrieval is for
        sim = self.max_similarity
        check(
            sim is None or (isinstance(sim, int | float) and 0 < sim <= 1),
            f"algo.max_similarity must be in (0, 1] or None, got {sim!r}",
        )

    def context_steps(self, env: Any) -> int:
        return self.num_retrieved * self.piece_len + self.context_len

    def complete_model(self, model_config: Any, env: Any) -> Any:
        discrete_sizes(env)
        return dataclasses.replace(
            model_config, obs_size=model_config.obs_size * NUM_BLOCKS
        )

    def encoder(self, env: Any) -> FrozenEncoder:
        """The frozen encoder for ``env`` (a pure function of the settings)."""
        num_obs, num_actions = discrete_sizes(env)
        return FrozenEncoder.create(
            self.encoder_seed, num_obs, num_actions, self.encoder_hidden, self.key_dim
        )

    def make_sampler(self, dataset: Any, train: Any, *, paired: bool = False) -> Any:
        check(not paired, "algo 'radt' has no paired batches")
        return RetrievalSampler(self, dataset, train.batch_size, train.seed)

    def loss(self, model, batch, aux, hparams, *, env, deterministic=False):
        return ad_loss(model, batch, deterministic=deterministic)

    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        model = split_model(model)
        return acting_agent(
            lambda greedy: RADTAgent(
                self,
                model,
                env,
                num_steps,
                greedy=greedy,
                temperature=config.eval.temperature,
            ),
            config.eval.acting,
        )


# ------------------------------------------------------------ model input
def model_input(pieces: dict, found: jax.Array, window: dict, num_obs: int) -> dict:
    """The model's ``obs/action/reward [B, n * P + L]`` and ``mask``.

    Args:
      pieces: ``obs, action, reward [B, n, P]`` (ids of the environment).
      found: ``[B, n]``: False gives the slot the empty block.
      window: ``obs, action, reward [B, L]`` and optional ``mask [B, L]``.
    """
    f = found[..., None]
    piece_obs = jnp.where(f, pieces["obs"] + PIECE * num_obs, EMPTY * num_obs)
    flat = lambda x: x.reshape(x.shape[0], -1)  # noqa: E731
    obs = jnp.concatenate([flat(piece_obs), window["obs"]], 1)
    action = jnp.concatenate(
        [flat(jnp.where(f, pieces["action"], 0)), window["action"]], 1
    )
    reward = jnp.concatenate(
        [flat(jnp.where(f, pieces["reward"], 0.0)), window["reward"]], 1
    )
    mask = window.get("mask", jnp.ones(window["obs"].shape, bool))
    mask = jnp.concatenate([jnp.zeros(flat(piece_obs).shape, bool), mask], 1)
    return {
        "obs": obs.astype(jnp.int32),
        "action": action.astype(jnp.int32),
        "reward": reward.astype(jnp.float32),
        "mask": mask,
    }


def previous(x: jax.Array) -> jax.Array:
    """``x`` shifted one step right along axis 1, zero first (a_{t-1}, r_{t-1})."""
    return jnp.concatenate([jnp.zeros_like(x[:, :1]), x[:, :-1]], 1)


def piece_keys(encoder: FrozenEncoder, obs, action, reward, starts, query_len):
    """Keys ``[R, J, D]`` of the pieces of histories.

    ``obs, action, reward [R, S]``; ``starts [J]`` piece starts; the key
    embeds steps ``[s, s + query_len)``, with the history's true previous
    action and reward at each step.
    """
    feats = encoder.features(obs, previous(action), previous(reward))  # [R, S, H]
    csum = jnp.concatenate([jnp.zeros_like(feats[:, :1]), jnp.cumsum(feats, 1)], 1)
    mean = (csum[:, starts + query_len] - csum[:, starts]) / query_len
    return encoder.pool(mean[:, :, None])


def piece_returns(reward: jax.Array, starts: jax.Array, length: int) -> jax.Array:
    """``[R, J]``: the reward inside each piece ``[s, s + length)``."""
    csum = jnp.concatenate(
        [jnp.zeros_like(reward[:, :1]), jnp.cumsum(reward.astype(jnp.float32), 1)], 1
    )
    return csum[:, starts + length] - csum[:, starts]


def piece_starts(num_steps: int, piece_len: int, stride: int) -> np.ndarray:
    """Where pieces start in a history of ``num_steps`` (at least one slot)."""
    return np.arange(0, max(num_steps - piece_len, 0) + 1, stride, dtype=np.int32)


# ------------------------------------------------------------- training
def build_memory(algo: RADT, encoder: FrozenEncoder, arrays: dict, chunk: int = 64):
    """The training memory of every piece of the split's histories.

    ``arrays``: ``obs, action, reward [R, S]`` and ``task_id [R]`` (numpy).
    Returns numpy ``keys [N, D]``, ``row, start, task [N]`` int32 and
    ``ret [N]``, ``N = R * J`` (``J`` pieces a history).
    """
    num_records, num_steps = arrays["reward"].shape
    starts = piece_starts(num_steps, algo.piece_len, algo.piece_stride)

    @jax.jit
    def one(obs, action, reward):
        keys = piece_keys(encoder, obs, action, reward, starts, algo.query_len)
        return keys, piece_returns(reward, starts, algo.piece_len)

    keys, rets = [], []
    for lo in range(0, num_records, chunk):
        part = slice(lo, lo + chunk)
        k, r = one(*(arrays[f][part] for f in ("obs", "action", "reward")))
        keys.append(np.asarray(k)), rets.append(np.asarray(r))
    rows = np.repeat(np.arange(num_records, dtype=np.int32), len(starts))
    return {
        "keys": np.concatenate(keys).reshape(-1, algo.key_dim),
        "row": rows,
        "start": np.tile(starts, num_records),
        "task": np.asarray(arrays["task_id"], np.int32)[rows],
        "ret": np.concatenate(rets).reshape(-1),
    }


def take_steps(x: jax.Array, rows: jax.Array, idx: jax.Array) -> jax.Array:
    """``x[rows, idx]`` with ``idx < 0`` read as zero (before a history)."""
    return jnp.where(idx >= 0, x[rows, jnp.maximum(idx, 0)], jnp.zeros((), x.dtype))


def query_of(encoder: FrozenEncoder, data: dict, rows, idx, keep=None) -> jax.Array:
    """``[B, D]`` query of history steps ``idx [B, q]`` of records ``rows [B]``
    (only the steps where ``keep [B, q]`` is True, if given)."""
    r = rows[:, None]
    feats = encoder.features(
        data["obs"][r, idx],
        take_steps(data["action"], r, idx - 1),
        take_steps(data["reward"], r, idx - 1),
    )
    return encoder.pool(feats, keep)


def retrieve_for_training(algo: RADT, data: dict, index: dict, key: jax.Array):
    """``(entries [B, n], found [B, n])`` of the memory for a batch's windows.

    The query embeds the window's last ``query_len`` steps, each dropped with
    ``query_dropout``; of the window's own history only pieces that end
    before the window starts are candidates (at evaluation the memory is the
    agent's finished past: a piece overlapping the window, or after it,
    would be its own future); ``found`` is False for an empty slot (none
    left, or dropped with ``empty_prob``).
    """
    mem, rows, idx = data["memory"], index["rows"], index["idx"]
    k_query, k_empty = jax.random.split(key)
    steps = idx[:, -algo.query_len :]
    keep = jax.random.bernoulli(k_query, 1.0 - algo.query_dropout, steps.shape)
    query = query_of(data["encoder"], data, rows, steps, keep)
    lo = idx[:, :1]  # the window's first step
    not_before = (mem["row"][None] == rows[:, None]) & (
        mem["start"][None] + algo.piece_len > lo
    )
    sim, cand = search(query, mem["keys"], ~not_before, algo.top_k, algo.max_similarity)
    task = data["task_id"][rows]
    utility = (mem["task"][cand] == task[:, None]).astype(jnp.float32)
    _, slot, found = reweight(sim, utility, algo.task_weight, algo.num_retrieved)
    entries = jnp.take_along_axis(cand, slot, 1)
    kept = jax.random.bernoulli(k_empty, 1.0 - algo.empty_prob, (rows.shape[0], 1))
    return entries, found & kept


def gather_pieces(data: dict, rows, starts, length: int) -> dict:
    """``obs, action, reward [B, n, length]`` from ``rows, starts [B, n]``."""
    idx = starts[..., None] + jnp.arange(length)
    r = rows[..., None]
    return {f: data[f][r, idx] for f in ("obs", "action", "reward")}


def by_return(pieces: dict, found, returns) -> tuple[dict, jax.Array]:
    """Pieces ordered by ascending return (empty slots first), as the reference
    orders its retrieved trajectories; the best sits next to the window."""
    order = jnp.argsort(jnp.where(found, returns, -jnp.inf), axis=1)
    take = lambda x: jnp.take_along_axis(  # noqa: E731
        x, order.reshape(order.shape + (1,) * (x.ndim - 2)), 1
    )
    return jax.tree.map(take, pieces), take(found)


class RetrievalSampler:
    """RA-DT's host sampler: AD's windows of ``context_len`` steps plus the
    frozen encoder; its batches are drawn on the device only
    (:meth:`device_sampler`)."""

    def __init__(self, algo: RADT, dataset: Any, batch_size: int, seed: int):
        self.windows = ADSampler(
            dataset, batch_size, num_transitions=algo.context_len, seed=seed
        )
        check(
            algo.piece_len <= dataset.num_steps,
            f"algo.piece_len must be <= the histories' {dataset.num_steps} steps, "
            f"got {algo.piece_len}",
        )
        self.algo, self.seed, self.batch_size = algo, seed, batch_size
        self.encoder = algo.encoder(dataset.env)
        self.num_obs = int(self.encoder.obs.shape[0])

    @property
    def cached(self) -> bool:
        return True  # the memory needs the split decoded; device_sampler decodes it

    def device_sampler(self, put: Any = None) -> RetrievalDeviceSampler:
        return RetrievalDeviceSampler(self, put)


class RetrievalDeviceSampler:
    """Windows and their retrieved pieces drawn inside the jitted update.

    ``data`` holds the split, its index tables, the memory and the encoder;
    ``draw(data, step)`` is the model batch of ``step`` (a pure function of
    the seed and step, as :class:`~agentrl.data.device_sampler.DeviceSampler`).
    """

    def __init__(self, sampler: RetrievalSampler, put: Any = None):
        base, self.algo = sampler.windows, sampler.algo
        self.spec, self.seed = spec_of(base), sampler.seed
        self.num_obs = sampler.num_obs
        arrays = split_arrays(base)
        tables = index_tables(self.spec, arrays["done"], base.task_ids)
        memory = build_memory(self.algo, sampler.encoder, {**arrays, **tables})
        put = jax.device_put if put is None else put
        self.data = put(
            {**arrays, **tables, "memory": memory, "encoder": sampler.encoder}
        )

    def draw(self, data: dict, step: Any) -> dict[str, Any]:
        key = batch_key(self.seed, step)
        index = draw_index(self.spec, data, key)
        window = gather(self.spec, data, index)
        entries, found = retrieve_for_training(
            self.algo, data, index, jax.random.fold_in(key, 1)
        )
        mem = data["memory"]
        pieces = gather_pieces(
            data, mem["row"][entries], mem["start"][entries], self.algo.piece_len
        )
        pieces, found = by_return(pieces, found, mem["ret"][entries])
        batch = model_input(pieces, found, window, self.num_obs)
        return {**batch, "task_id": window["task_id"]}

    def batch(self, step: int) -> dict[str, Any]:
        """The batch of ``step`` as numpy arrays (tests, inspection)."""
        return jax.device_get(jax.jit(self.draw)(self.data, step))


# ------------------------------------------------------------ evaluation
class RADTState(NamedTuple):
    """The agent's own history ``obs, action, reward [B, S + 1]``, the index
    of the current step ``count [B]``, the steps of finished episodes
    ``completed [B]`` (the evaluation memory's pieces lie before it) and the
    memory's ``keys [B, J, D]``, each piece's written once its first
    ``query_len`` steps are (zeros before)."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    count: jax.Array
    completed: jax.Array
    keys: jax.Array


def write(buf: jax.Array, pos: jax.Array, x: jax.Array) -> jax.Array:
    """``buf [B, S]`` with ``x [B]`` written at ``pos [B]``."""
    hit = jnp.arange(buf.shape[1])[None] == pos[:, None]
    return jnp.where(hit, jnp.asarray(x, buf.dtype).reshape(-1, 1), buf)


class RADTAgent(ScoredAgent):
    """RA-DT acting online (batched): retrieval from its own finished steps.

    Each step: the window is the last ``context_len`` steps (the current one
    last; from the first step while fewer), the query its last
    ``query_len``; the memory the pieces of this task's finished episodes,
    rescored by similarity and return; one forward pass over ``[pieces,
    window]``.
    """

    def __init__(
        self,
        algo: RADT,
        model,
        env,
        num_steps: int,
        greedy=False,
        temperature: float = 1.0,
    ):
        super().__init__(model, env, greedy, temperature)
        self.algo = algo
        self.size = int(num_steps) + 1
        self.encoder = algo.encoder(env)
        self.num_obs = int(self.encoder.obs.shape[0])
        self.starts = jnp.asarray(
            piece_starts(self.size, algo.piece_len, algo.piece_stride)
        )

    def init(self, key: jax.Array, params: Any) -> RADTState:
        b = key.shape[0]
        zeros = lambda dtype: jnp.zeros((b, self.size), dtype)  # noqa: E731
        count = jnp.zeros((b,), jnp.int32)
        keys = jnp.zeros((b, len(self.starts), self.algo.key_dim), jnp.float32)
        return RADTState(
            zeros(jnp.int32), zeros(jnp.int32), zeros(jnp.float32), count, count, keys
        )

    def start(self, state: RADTState, obs: Any) -> RADTState:
        state = state._replace(obs=write(state.obs, state.count, obs))
        return self._add_key(state, state.count)

    def _query(self, state: RADTState, last: jax.Array) -> jax.Array:
        """``[B, D]``: the key of the ``query_len`` steps ending at ``last [B]``
        (steps before the history left out), as :func:`piece_keys` embeds a
        piece's first steps and training embeds a window's last."""
        q = self.algo.query_len
        rows = jnp.arange(last.shape[0])[:, None]
        idx = last[:, None] - q + 1 + jnp.arange(q)
        feats = self.encoder.features(
            take_steps(state.obs, rows, idx),
            take_steps(state.action, rows, idx - 1),
            take_steps(state.reward, rows, idx - 1),
        )
        return self.encoder.pool(feats, idx >= 0)

    def _add_key(self, state: RADTState, last: jax.Array) -> RADTState:
        """``state`` with the key of the piece whose query steps end at
        ``last [B]`` (if a piece starts there) written: each key once, not
        the whole history's every step."""
        first = last - self.algo.query_len + 1
        hit = (self.starts[None] == first[:, None])[..., None]  # [B, J, 1]
        key = self._query(state, last)[:, None]
        return state._replace(keys=jnp.where(hit, key, state.keys))

    def retrieve(self, state: RADTState, query: jax.Array):
        """``(starts [B, n], found [B, n], returns [B, n])`` from own history."""
        algo = self.algo
        rets = piece_returns(state.reward, self.starts, algo.piece_len)  # [B, J]
        allowed = self.starts[None] + algo.piece_len <= state.completed[:, None]
        sim, cand = search(query, state.keys, allowed, algo.top_k)
        cand_ret = jnp.take_along_axis(rets, cand, 1)
        utility = min_max(cand_ret, jnp.isfinite(sim))
        _, slot, found = reweight(sim, utility, algo.return_weight, algo.num_retrieved)
        entry = jnp.take_along_axis(cand, slot, 1)
        return self.starts[entry], found, jnp.take_along_axis(cand_ret, slot, 1)

    def scores(self, state: RADTState, obs, env_state, params) -> jax.Array:
        algo, count = self.algo, state.count
        state = state._replace(obs=write(state.obs, count, obs))
        rows = jnp.arange(count.shape[0])[:, None]
        lo = jnp.maximum(count - algo.context_len + 1, 0)
        idx = jnp.minimum(lo[:, None] + jnp.arange(algo.context_len), self.size - 1)
        hist = {"obs": state.obs, "action": state.action, "reward": state.reward}
        starts, found, rets = self.retrieve(state, self._query(state, count))
        pieces = gather_pieces(
            hist, jnp.broadcast_to(rows, starts.shape), starts, algo.piece_len
        )
        pieces, found = by_return(pieces, found, rets)
        window = {f: x[rows, idx] for f, x in hist.items()}
        batch = model_input(pieces, found, window, self.num_obs)
        out = self.model.get()(batch["obs"], batch["action"], batch["reward"])
        read = algo.num_retrieved * algo.piece_len + (count - lo)
        return scores_at(action_scores(out, self.space), read)

    def update(self, state: RADTState, step: Step) -> RADTState:
        count = state.count
        nxt = jnp.minimum(count + 1, self.size - 1)
        done = jnp.asarray(step.done).reshape(count.shape)
        state = RADTState(
            obs=write(state.obs, nxt, step.reset_obs),
            action=write(state.action, count, step.action),
            reward=write(state.reward, count, step.reward),
            count=nxt,
            completed=jnp.where(done, nxt, state.completed),
            keys=state.keys,
        )
        return self._add_key(state, nxt)
