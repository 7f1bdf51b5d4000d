"""Env factories of other libraries' pure-JAX APIs, for ``--env module:factory`` (issue 42):
gymnax's (an env, or gymnax's ``(env, params)``), Brax's, Jumanji's, and a Gymnasium one for
contrast."""

from __future__ import annotations

import gymnasium
from gymnax.environments.classic_control import CartPole


def cartpole(**changes):
    """The CartPole of gymnax as ``gymnax.make`` returns it, ``EnvParams`` changed by keyword."""
    env = CartPole()
    return env, env.default_params.replace(**changes)


def cartpole_env():
    """The CartPole of gymnax alone (its ``default_params`` are used)."""
    return CartPole()


def inverted_pendulum(**kwargs):
    """Brax's inverted pendulum, built by Brax's own registry."""
    from brax import envs

    return envs.get_environment("inverted_pendulum", backend="spring", **kwargs)


def gymnasium_cartpole():
    """A Gymnasium env: for the host backends."""
    return gymnasium.make("CartPole-v1")


class Discrete:
    """A library's own copy of gymnax's ``Discrete`` space, as Craftax carries one."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.shape = ()


class OwnSpacesCartPole(CartPole):
    """The CartPole of gymnax, its action space of the copied class."""

    def action_space(self, params=None):
        return Discrete(2)


def own_spaces_cartpole():
    """An env with gymnax's API and spaces of its own library's classes."""
    return OwnSpacesCartPole()


def snake(**kwargs):
    """Jumanji's Snake as ``jumanji.make("Snake-v1")`` builds it, its keywords from env_kwargs."""
    import jumanji

    return jumanji.make("Snake-v1", **kwargs)


def connector(time_limit=3):
    """Jumanji's Connector of 2 agents on a 6x6 grid as one agent (Jumanji's
    ``MultiToSingleWrapper``): it ends episodes at its time limit with Jumanji's ``truncation``
    (a last step with a nonzero discount)."""
    from jumanji.environments import Connector
    from jumanji.environments.routing.connector.generator import RandomWalkGenerator
    from jumanji.wrappers import MultiToSingleWrapper

    generator = RandomWalkGenerator(grid_size=6, num_agents=2)
    return MultiToSingleWrapper(Connector(generator, time_limit=time_limit))


def auto_reset_snake():
    """Snake inside Jumanji's own ``AutoResetWrapper``, which batchppo refuses."""
    import jumanji
    from jumanji.wrappers import AutoResetWrapper

    return AutoResetWrapper(jumanji.make("Snake-v1"))
