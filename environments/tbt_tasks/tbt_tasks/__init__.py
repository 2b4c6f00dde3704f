"""thinkingbox_training's tasks as a verifiers environment (`--env.taskset.id tbt-tasks`): see `taskset`."""

from tbt_tasks.taskset import EpisodeSystemError, TbtEnv, TbtHarness, TbtTaskset

__all__ = ['TbtTaskset', 'TbtEnv', 'TbtHarness', 'EpisodeSystemError']
