"""Deferred imports: gymnax without its plotting stack, and nothing left behind."""

import subprocess
import sys
import textwrap
import types

import pytest

from batchppo.backends import _deferred as deferred


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_gymnax_defers_seaborn_and_pyplot_until_a_renderer_uses_them():
    # A fresh interpreter: the test process may have imported matplotlib already.
    out = _run(
        """
        import sys
        from batchppo.backends.gymnax import import_gymnax
        from batchppo.backends._deferred import DeferredModule
        gymnax = import_gymnax()
        env, params = gymnax.make("Pendulum-v1")
        print("seaborn" in sys.modules, "matplotlib.pyplot" in sys.modules, "pandas" in sys.modules)
        import matplotlib
        print(hasattr(matplotlib, "pyplot"))
        import gymnax.environments.misc.pong as pong
        print(isinstance(pong.sns, DeferredModule))
        palette = pong.sns.color_palette("cubehelix", 2)  # first use imports the real seaborn
        import seaborn
        same = pong.sns.color_palette is seaborn.color_palette
        print(type(seaborn) is type(sys), same, len(palette))
        import matplotlib.pyplot as plt
        print(type(plt) is type(sys), pong.plt.figure is plt.figure)
        """
    )
    assert out.splitlines() == [
        "False False False",
        "False",
        "True",
        "True True 2",
        "True True",
    ]


def test_deferred_imports_leave_sys_modules_as_they_were():
    name = "json.tool"  # a stdlib module this test process has not imported
    sys.modules.pop(name, None)
    with deferred.deferred_imports(name):
        import json.tool as placeholder

        assert isinstance(placeholder, deferred.DeferredModule)
    assert name not in sys.modules
    import json

    assert not isinstance(getattr(json, "tool", None), deferred.DeferredModule)
    assert callable(placeholder.main)  # the placeholder still works after the block
    import json.tool as real

    assert isinstance(real, types.ModuleType) and not isinstance(real, deferred.DeferredModule)
    assert placeholder.main is real.main  # the placeholder reads the one real module


def test_modules_imported_before_the_block_are_not_replaced():
    import json

    with deferred.deferred_imports("json"):
        import json as again
    assert again is json


def test_a_missing_attribute_of_the_real_module_raises_attribute_error():
    sys.modules.pop("json.tool", None)
    with deferred.deferred_imports("json.tool"):
        import json.tool as placeholder
    with pytest.raises(AttributeError):
        placeholder.no_such_function  # noqa: B018
