"""Exactly-once side effects for processors: an effects table fenced by the shard lease
(:mod:`.once` is the API, :mod:`.model` the decisions, :mod:`.store` the table)."""

from consumer.effects.model import Mode
from consumer.effects.once import EffectNotDone, Effects, NoKeyError, Outcome, ShardEffects

__all__ = ["EffectNotDone", "Effects", "Mode", "NoKeyError", "Outcome", "ShardEffects"]
