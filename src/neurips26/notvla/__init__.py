"""NoTVLA: a sparse narrative action interface (plan text -> deterministic motion) and its testbed.

from neurips26.notvla import TabletopSim, Detokenizer, OraclePolicy, run_episode
env = TabletopSim(); env.reset(seed=0)
result = run_episode(env, OraclePolicy().reset(env), Detokenizer())   # success, calls, tokens
"""

from neurips26.notvla.action_tokens import BinTokenizer, FASTTokenizer
from neurips26.notvla.camera import Camera, CameraShift, SingularIntrinsicsError
from neurips26.notvla.detokenizer import Detokenizer, Motion, Waypoints
from neurips26.notvla.errors import DepthUnavailableError, PlanParseError, Refusal
from neurips26.notvla.execution import EpisodeResult, OraclePolicy, Query, run_episode, run_episodes
from neurips26.notvla.expert import Demo, run_expert
from neurips26.notvla.extraction import WaypointExtractor, encode_waypoints, hausdorff
from neurips26.notvla.lerobot import export_lerobot, read_lerobot_episode
from neurips26.notvla.pybullet_env import PandaBulletEnv  # needs the optional pybullet only when built
from neurips26.notvla.language import UnknownWordError, parse_instruction
from neurips26.notvla.plan import Step, allowed_next, format_plan, parse_plan, tokenize
from neurips26.notvla.sim import DepthNoise, NoTableInViewError, TabletopSim
from neurips26.notvla.stats import newcombe, wilson

__all__ = [
    "BinTokenizer",
    "FASTTokenizer",
    "Camera",
    "CameraShift",
    "SingularIntrinsicsError",
    "Detokenizer",
    "Motion",
    "Waypoints",
    "DepthUnavailableError",
    "PlanParseError",
    "Refusal",
    "EpisodeResult",
    "OraclePolicy",
    "Query",
    "run_episode",
    "run_episodes",
    "export_lerobot",
    "PandaBulletEnv",
    "read_lerobot_episode",
    "Demo",
    "run_expert",
    "WaypointExtractor",
    "encode_waypoints",
    "hausdorff",
    "UnknownWordError",
    "parse_instruction",
    "Step",
    "allowed_next",
    "format_plan",
    "parse_plan",
    "tokenize",
    "DepthNoise",
    "NoTableInViewError",
    "TabletopSim",
    "newcombe",
    "wilson",
]
