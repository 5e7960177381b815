"""The hook compiled runs plug into: engines that take over a run, or a batch of runs, where
they reproduce the generic loop exactly.

Two tables, each of engines that say for themselves what they cover:

- :data:`RUN_ENGINES`, consulted by :func:`~optplan.experiments.run` for one run (its
  ``engine=`` argument, :func:`select`). An engine has ``reason(agent, env, episodes, track)``
  (why it does not cover the run, ``None`` when it does), ``loop(agent, env, env_seed,
  agent_rng, steps, record, bar, track)`` (fills the :class:`~optplan.experiments.trace.Record`
  as the generic loop would; ``track``: the agent's policies too, for an engine whose module
  sets ``TRACKS = True``, else its ``reason`` refuses tracked runs) and ``oracle_run(env,
  oracle, env_seed, steps)`` (the oracle run's rewards, or ``None`` for the generic one).
  The first is the agents' own compiled loop (:mod:`.compiled`: every
  :class:`~optplan.agents.base.CompiledAgent`, its steps played by
  :func:`optplan.envs.kernels.play`).
- :data:`BATCH_ENGINES`, for many seeds of one configuration at once (:func:`batch_runner`):
  ``match(agent, params, env)`` gives a runner ``runner(seeds, episodes)`` or ``None``. The
  UBE agents on the UBE chain are one (:mod:`.chain_batch`).

A new compiled engine is a module with those functions and one row here; ``run`` itself does
not change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._checks import OptplanError

__all__ = ["ENGINES", "RunEngine", "RUN_ENGINES", "select", "BATCH_ENGINES", "batch_runner"]

#: ``engine=`` values of :func:`~optplan.experiments.run`.
ENGINES = ("auto", "python", "compiled")


@dataclass(frozen=True)
class RunEngine:
    """A compiled run: its name and a function returning the module that implements it
    (loaded on first use: compiled engines import numba's kernels)."""

    name: str
    load: Callable

    def _impl(self):
        return self.load()

    def reason(self, agent, env, episodes, track: bool) -> str | None:
        """Why this engine does not cover the run, or ``None`` when it does."""
        return self._impl().compiled_reason(agent, env, episodes, track)

    def loop(self, agent, env, env_seed: int, agent_rng, steps: int | None, record, bar=None,
             track: bool = False, *, episodes=None, stop_when_solved=False,
             on_episode_end=None):  # fmt: skip
        """The run, recorded into ``record`` as the generic loop records it (``track``: with
        the agent's policies, for a module that sets ``TRACKS = True``; ``episodes``,
        ``stop_when_solved``, ``on_episode_end``: :func:`~optplan.experiments.run`'s, for a
        module that sets ``EPISODES = True``; the others refuse runs counted in episodes and
        see no episode end)."""
        impl = self._impl()
        if getattr(impl, "EPISODES", False):
            tracks = {"track": track} if getattr(impl, "TRACKS", False) else {}
            return impl.compiled_loop(
                agent, env, env_seed, agent_rng, steps, record, bar, episodes=episodes,
                stop_when_solved=stop_when_solved, on_episode_end=on_episode_end, **tracks,
            )  # fmt: skip
        if getattr(impl, "TRACKS", False):
            return impl.compiled_loop(agent, env, env_seed, agent_rng, steps, record, bar, track)
        return impl.compiled_loop(agent, env, env_seed, agent_rng, steps, record, bar)

    def oracle_run(self, env, oracle, env_seed: int, steps: int):
        """The oracle run's rewards, or ``None`` (the caller runs the generic one)."""
        return self._impl().compiled_oracle_run(env, oracle, env_seed, steps)


def _compiled_agents():
    from . import compiled

    return compiled


#: The engines :func:`select` tries, in order.
RUN_ENGINES: tuple[RunEngine, ...] = (RunEngine("the agent's compiled steps", _compiled_agents),)


def select(engine: str, agent, env, episodes, track: bool) -> RunEngine | None:
    """The engine that runs this run: ``None`` for the generic loop (``"python"``, or
    ``"auto"`` when no engine covers it).

    Raises
    ------
    ValueError
        ``engine`` is not one of :data:`ENGINES`, or ``"compiled"`` and no engine covers the
        run (the message gives each engine's reason).
    """
    if engine == "python":
        return None
    if engine not in ENGINES:
        raise OptplanError(f'engine must be "auto", "python" or "compiled", got {engine!r}')
    reasons = []
    for candidate in RUN_ENGINES:
        reason = candidate.reason(agent, env, episodes, track)
        if reason is None:
            return candidate
        reasons.append(reason)
    if engine == "compiled":
        raise OptplanError(f'engine="compiled" does not cover this run: {"; ".join(reasons)}')
    return None


def _chain_batch(agent: str, params: dict, env) -> Callable | None:
    from . import chain_batch

    return chain_batch.batch_runner(agent, params, env)


#: Batch engines :func:`batch_runner` tries, in order: ``match(agent, params, env)``.
BATCH_ENGINES: tuple[Callable, ...] = (_chain_batch,)


def batch_runner(agent: str, params: dict, env) -> Callable | None:
    """A runner ``runner(seeds, episodes)`` of registered agent ``agent`` with resolved
    ``params`` on ``env`` for many run seeds at once, equal to one
    :func:`~optplan.experiments.run` per seed; ``None`` when no batch engine covers it."""
    for match in BATCH_ENGINES:
        runner = match(agent, params, env)
        if runner is not None:
            return runner
    return None
