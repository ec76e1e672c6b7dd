"""complete_model_config: what it fills from the env and what it keeps."""

from agentrl.algos import AD
from agentrl.envs import make as make_env
from agentrl.envs.point_robot import PointRobot
from agentrl.models import ModelConfig
from agentrl.models.config import complete_model_config


def test_a_set_window_is_kept_and_an_unset_one_is_the_algorithms():
    env, algo = make_env("darkroom", size=5, horizon=6), AD(context_episodes=3)
    assert complete_model_config(ModelConfig(), env, algo).max_steps == 18
    assert complete_model_config(ModelConfig(max_steps=7), env, algo).max_steps == 7


def test_box_actions_get_a_gaussian_head_unless_one_is_chosen():
    env, algo = PointRobot(horizon=4), AD()
    cfg = complete_model_config(ModelConfig(), env, algo)
    assert (cfg.action_kind, cfg.action_size, cfg.head) == ("continuous", 2, "gaussian")
    chosen = complete_model_config(
        ModelConfig(action_kind="continuous", head="mse"), env, algo
    )
    assert chosen.head == "mse"
