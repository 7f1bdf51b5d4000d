"""bench/envpool_wheels.py: EnvPool's wheels written again with the Atari family alone."""

from __future__ import annotations

import zipfile

from benchlib import load_bench

ENVPOOL_FILES = {
    "envpool/__init__.py": b"import envpool.entry\n",
    "envpool/entry.py": b"import envpool.atari.registration\nimport envpool.box2d.registration\n",
    "envpool/registration.py": b"",
    "envpool/atari/__init__.py": b"",
    "envpool/atari/atari_envpool.so": b"\x7fELF atari",
    "envpool/atari/registration.py": b"",
    "envpool/box2d/__init__.py": b"from .box2d_envpool import X\n",
    "envpool/box2d/box2d_envpool.so": b"\x7fELF box2d",
    "envpool/mujoco/gym/registration.py": b"",
    "envpool/python/protocol.py": b"",
    "envpool.libs/libgomp.so.1": b"\x7fELF gomp",
    "envpool-1.2.7.dist-info/METADATA": b"Name: envpool\n",
}
ASSETS_FILES = {
    "envpool_assets/__init__.py": b"",
    "envpool_assets/atari/roms/atari/roms/breakout.bin": b"rom",
    "envpool_assets/procgen/assets/a.png": b"png",
    "envpool_assets-0.4.1.dist-info/METADATA": b"Name: envpool-assets\n",
}


def _wheel(path, files):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def test_envpool_keeps_the_atari_family_and_registers_it_alone(tmp_path):
    bench = load_bench("envpool_wheels")
    src = _wheel(tmp_path / "envpool-src.whl", ENVPOOL_FILES)
    dst = tmp_path / "envpool-1.2.7-cp312-cp312-manylinux_2_28_x86_64.whl"
    replace = {"envpool/entry.py": bench.ATARI_ENTRY}
    size = bench.strip_wheel(src, dst, bench.keep_envpool, replace)
    with zipfile.ZipFile(dst) as z:
        names = set(z.namelist())
        entry = z.read("envpool/entry.py")
    assert size == dst.stat().st_size
    assert names == set(ENVPOOL_FILES) - {
        "envpool/box2d/__init__.py",
        "envpool/box2d/box2d_envpool.so",
        "envpool/mujoco/gym/registration.py",
    }
    assert entry == bench.ATARI_ENTRY and b"box2d" not in entry


def test_the_assets_keep_the_atari_roms_alone(tmp_path):
    bench = load_bench("envpool_wheels")
    src = _wheel(tmp_path / "assets-src.whl", ASSETS_FILES)
    dst = tmp_path / "envpool_assets-0.4.1-py3-none-any.whl"
    bench.strip_wheel(src, dst, bench.keep_assets)
    with zipfile.ZipFile(dst) as z:
        assert set(z.namelist()) == set(ASSETS_FILES) - {"envpool_assets/procgen/assets/a.png"}
        assert z.read("envpool_assets/atari/roms/atari/roms/breakout.bin") == b"rom"
