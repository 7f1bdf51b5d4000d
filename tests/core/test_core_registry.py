"""The generic registry (``batchppo.core.registry``): registering, lookups and their messages,
and the entry points of its group, loaded once and lazily from a user's installed package."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import warnings

import pytest

from batchppo.core.registry import EntryPointWarning, Registry


@dataclasses.dataclass(frozen=True)
class Colour:
    name: str
    warm: bool = False


def _no_blues(colour: Colour) -> None:
    if "blue" in colour.name:
        raise ValueError(f"colour {colour.name!r}: no blues here")


@pytest.fixture
def colours() -> Registry[Colour]:
    registry = Registry("colour", Colour, group="batchppo_tests.colours", check=_no_blues)
    registry.register(Colour("red", warm=True))
    registry.register(Colour("green"))
    return registry


def test_lookups_answer_registered_records_and_refuse_others_in_one_line(colours):
    assert colours.lookup("red") == Colour("red", warm=True)
    assert list(colours) == ["red", "green"] and "green" in colours and "grey" not in colours
    with pytest.raises(ValueError) as info:
        colours.lookup("gren")
    assert str(info.value) == (
        "unknown colour 'gren'. Did you mean 'green'? Choose one of: red, green."
    )
    warm = [name for name, colour in colours.items() if colour.warm]
    with pytest.raises(ValueError) as info:
        colours.lookup("green", among=warm, kind="warm colour", field="paint")
    assert str(info.value) == "paint='green': unknown warm colour. Choose one of: red."


def test_register_refuses_a_taken_name_another_type_and_what_its_check_refuses(colours):
    with pytest.raises(ValueError, match=r"^colour 'red' is registered already$"):
        colours.register(Colour("red"))
    with pytest.raises(TypeError, match=r"^str is not a Colour record: register a Colour$"):
        colours.register("teal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^colour 'skyblue': no blues here$"):
        colours.register(Colour("skyblue"))
    assert list(colours) == ["red", "green"]


PALETTE = '''
"""A user's package: a registry (standing in for one of batchppo's) and its colours."""

import dataclasses

from batchppo.core.registry import Registry


@dataclasses.dataclass(frozen=True)
class Colour:
    name: str


COLOURS = Registry("colour", Colour, group="batchppo_tests.colours")
COLOURS.register(Colour("red"))
'''

PLUGIN = '''
"""Its colours: importing the module registers one; the others are a record, a callable
returning records, one registering its record itself, and things that are no records."""

from palette import COLOURS, Colour

COLOURS.register(Colour("ochre"))
TEAL = Colour("teal")
NOT_A_COLOUR = 3


def pair():
    return [Colour("plum"), Colour("sand")]


def itself():
    COLOURS.register(Colour("jade"))


def strings():
    return ["mauve"]
'''

BROKEN = """
raise ImportError("no pigments here\\n(a second line that the warning leaves out)")
"""


def test_entry_points_load_once_on_a_miss_or_a_listing_and_a_broken_one_warns(install_package):
    install_package(
        "palette",
        {
            "batchppo_tests.colours": {
                "ochre": "plugin",
                "broken": "brokenpaints",
                "teal": "plugin:TEAL",
                "pair": "plugin:pair",
                "itself": "plugin:itself",
                "number": "plugin:NOT_A_COLOUR",
                "strings": "plugin:strings",
            },
            "another.group": {"elsewhere": "plugin:TEAL"},
        },
        {"palette": PALETTE, "plugin": PLUGIN, "brokenpaints": BROKEN},
    )
    colours = importlib.import_module("palette").COLOURS
    assert colours.lookup("red").name == "red"  # registered: nothing loaded
    assert colours.registered() == {"red": colours["red"]} and "plugin" not in sys.modules
    with pytest.warns(EntryPointWarning) as caught:
        assert colours.lookup("plum").name == "plum"  # a miss: the whole group loads
    assert [str(w.message) for w in caught] == [
        "colour entry point 'broken' (brokenpaints) of group 'batchppo_tests.colours' failed "
        "to load, its colours are unavailable: ImportError: no pigments here",
        "colour entry point 'number' (plugin:NOT_A_COLOUR) of group 'batchppo_tests.colours' "
        "failed to load, its colours are unavailable: TypeError: int is neither a module, a "
        "Colour nor a callable",
        "colour entry point 'strings' (plugin:strings) of group 'batchppo_tests.colours' "
        "failed to load, its colours are unavailable: TypeError: gave a str, not a Colour",
    ]
    assert sorted(colours) == ["jade", "ochre", "plum", "red", "sand", "teal"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "mauve" not in colours  # loaded once: no second warning, no second registration
    colours.forget_entry_points()
    assert colours.registered() == {"red": colours["red"]}
    del sys.modules["plugin"]  # imported afresh, it registers its colour again
    with pytest.warns(EntryPointWarning):
        assert len(colours) == 6  # a listing loads them again
