"""The backend registry (``batchppo.core.backends``): records, lookups, lazy references."""

from __future__ import annotations

import dataclasses
import types

import pytest

from batchppo.backends import Backend, get_backend, lazy, register
from batchppo.core.backends import LEARNED
from batchppo.core.values import check_fixed, fixed


def test_unknown_backend_is_one_line_with_a_suggestion():
    with pytest.raises(ValueError, match=r"unknown backend 'gymnx'\. Did you mean 'gymnax'\?"):
        get_backend("gymnx")


def test_register_refuses_a_taken_name_and_lazy_refs_bind_arguments():
    with pytest.raises(ValueError, match="registered already"):
        register(get_backend("sync"))
    descending = lazy("builtins:sorted", reverse=True)
    assert descending([1, 3, 2]) == [3, 2, 1]
    with pytest.raises(ValueError, match="module:name"):
        lazy("os.path.join")


def test_a_record_is_frozen_and_fills_its_defaults():
    record = Backend(
        name="x",
        make=lazy("a:b"),
        check_env_id=lambda env_id: None,
        host=False,
        description="x envs",
        requires="xpkg",
    )
    assert record.title == "x" and record.install == "pip install xpkg" and record.fused
    with pytest.raises(AttributeError):
        record.host = True  # type: ignore[misc]


@dataclasses.dataclass(frozen=True)
class _Options:
    """A backend's options: every kind of option type a record may declare."""

    host: str | None = None
    rate: float = 0.5
    retries: int = 3
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"backend_options.retries={self.retries}: must be >= 0")


def _record(options: type | None) -> Backend:
    return Backend(
        name="opt", make=lazy("a:b"), check_env_id=lambda env_id: None, host=True,
        description="x envs", options=options,
    )  # fmt: skip


def test_check_options_fills_defaults_widens_ints_and_runs_the_own_check():
    record = _record(_Options)
    assert record.option_names() == ("host", "rate", "retries", "verbose")
    assert record.check_options({}) == _Options()
    checked = record.check_options({"rate": 2, "host": "auto", "verbose": True})
    assert checked == _Options(host="auto", rate=2.0, verbose=True)
    assert type(checked.rate) is float
    # make_env takes the object as it is, parses a mapping, and refuses another class.
    assert record.resolve_options(checked) is checked
    assert record.resolve_options({"retries": 5}) == _Options(retries=5)
    assert record.resolve_options(None) == _Options()
    with pytest.raises(TypeError) as info:
        record.resolve_options(types.SimpleNamespace(rate=2.0))
    assert str(info.value) == (
        "options=namespace(rate=2.0): backend 'opt' takes _Options, a mapping of its keys, or "
        "None for its defaults"
    )
    with pytest.raises(ValueError) as info:
        record.check_options({"retries": -1})
    assert str(info.value) == "backend_options.retries=-1: must be >= 0"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"rtae": 1.0},
            "backend_options.rtae: backend 'opt' has no option 'rtae'. Did you mean 'rate'? "
            "Valid keys: host, rate, retries, verbose",
        ),
        (
            {"rate": "fast"},
            "backend_options.rate='fast': backend 'opt' expects float. Valid keys: host, rate, "
            "retries, verbose",
        ),
        (
            {"retries": 2.5},
            "backend_options.retries=2.5: backend 'opt' expects int. Valid keys: host, rate, "
            "retries, verbose",
        ),
        (
            {"rate": True},
            "backend_options.rate=True: backend 'opt' expects float. Valid keys: host, rate, "
            "retries, verbose",
        ),
        (
            {"host": 3},
            "backend_options.host=3: backend 'opt' expects str or None. Valid keys: host, rate, "
            "retries, verbose",
        ),
        (
            ["host"],
            "backend_options=['host']: must be a mapping of option names to values",
        ),
    ],
)
def test_check_options_refuses_unknown_keys_and_wrong_types_in_one_line(given, message):
    with pytest.raises(ValueError) as info:
        _record(_Options).check_options(given)
    assert str(info.value) == message


def test_a_backend_without_options_refuses_any():
    record = _record(None)
    assert record.check_options({}) is None and record.option_names() == ()
    assert not record.takes_options
    with pytest.raises(ValueError) as info:
        record.check_options({"address": "auto"})
    assert str(info.value) == (
        "backend_options {'address': 'auto'}: backend 'opt' takes none (backends with "
        "options: process, sync, ray, gymnax, brax, jumanji and ale); drop backend_options"
    )
    assert not record.supports_restarts and record.learned_options() == ()


@dataclasses.dataclass(frozen=True)
class _Restarting:
    """Options that restart crashed envs, one that changes learning, one held."""

    max_restarts: int = 0
    gravity: float = dataclasses.field(default=9.8, metadata=LEARNED)
    mode: str = fixed("a", "this backend has mode a only")

    def __post_init__(self) -> None:
        check_fixed(self)


def test_what_a_record_reads_off_its_options():
    record = _record(_Restarting)
    # The field it holds is no key of a config.
    assert record.option_names() == ("max_restarts", "gravity")
    with pytest.raises(ValueError) as info:
        record.check_options({"mode": "a"})
    assert str(info.value).startswith("backend_options.mode: backend 'opt' has no option 'mode'")
    with pytest.raises(ValueError) as info:
        _Restarting(mode="b")
    assert str(info.value) == "mode='b': this backend has mode a only"
    assert record.supports_restarts and record.learned_options() == ("gravity",)
    assert record.check_options({"gravity": "1e1"}) == _Restarting(gravity=10.0)


def test_a_record_names_what_is_missing_of_it_and_of_its_env(monkeypatch):
    import importlib.util

    from batchppo.core.backends import Requirement, factory_package, requirement

    record = Backend(
        name="x",
        make=lazy("a:b"),
        check_env_id=lambda env_id: None,
        host=False,
        description="x envs",
        requires="brax",
        env_requires=factory_package,
    )
    assert record.install == "pip install 'batchppo[brax]'"  # the project's extra
    absent = {"brax", "craftax"}
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in absent else real(name, *a)
    )
    brax = Requirement("brax", "batchppo[brax]", "pip install 'batchppo[brax]'")
    assert record.missing("craftax.craftax_env:make") == brax  # the backend's own first
    absent.discard("brax")
    assert record.missing("craftax.craftax_env:make") == Requirement(
        "craftax", "craftax", "pip install craftax==1.6.1 --no-deps"
    )
    assert record.missing("myenvs:make") is None  # a user's module is not a package
    assert record.missing("ant") is None
    assert factory_package("jumanji.environments:Snake") == "jumanji"
    assert factory_package("Pendulum-v1") is None
    assert requirement("mujoco") == Requirement(
        "mujoco", "batchppo[mujoco]", "pip install 'batchppo[mujoco]'"
    )
    assert requirement("xpkg") == Requirement("xpkg", "xpkg", "pip install xpkg")
