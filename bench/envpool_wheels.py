"""The wheels of ``bench/cleanrl_envpool.py``'s CleanRL side for a GPU machine without an index.

EnvPool 1.2.7's wheel (63.9 MB: every env family's C++ library) and ``envpool-assets`` (91.6 MB:
every family's games and models) are more together than the device tool carries in a call (64
MiB with the repository). CleanRL's Atari script needs only the Atari family, so this script
downloads both (CPython 3.12, x86-64, as the device machine runs) and writes them again with the
other families left out: the Atari package, EnvPool's Python core and its shared libraries,
``envpool/entry.py`` registering the Atari games alone (the full one imports every family's
library), and the assets' Atari ROMs (about 11 MB in all). Beside them go the CleanRL script's
other packages that the machine's image lacks (``gym`` 0.26.2, built here: it has no wheel;
``tyro`` and its needs, ``dm-env``, ``optree``). On the machine, install them with the rest::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl .whl-cleanrl/*.whl

    python bench/envpool_wheels.py --out .whl-cleanrl   # here, with a package index
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

ENVPOOL = "envpool==1.2.7"
ASSETS = "envpool-assets==0.4.1"
OTHERS = ("dm-env", "gym-notices", "tyro", "docstring-parser", "typeguard", "shtab", "optree")
SDIST_ONLY = ("gym==0.26.2",)
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 26, 27, 28, 31, 34, 35)]
ATARI_ENTRY = (
    b'"""Entry point: Atari only (the other env families are left out of this wheel)."""\n\n'
    b"import envpool.atari.registration  # noqa: F401\n"
)


def keep_envpool(name: str) -> bool:
    """Whether EnvPool's wheel keeps ``name``: all but the other env families' packages."""
    parts = name.split("/")
    return parts[0] != "envpool" or len(parts) < 3 or parts[1] in ("atari", "python")


def keep_assets(name: str) -> bool:
    """Whether ``envpool-assets`` keeps ``name``: all but the other env families' assets."""
    parts = name.split("/")
    return parts[0] != "envpool_assets" or len(parts) < 3 or parts[1] == "atari"


def strip_wheel(
    src: Path, dst: Path, keep: Callable[[str], bool], replace: dict[str, bytes] | None = None
) -> int:
    """Writes ``src`` again as ``dst`` with the files ``keep`` keeps, those in ``replace``
    rewritten; returns ``dst``'s size in bytes."""
    replace = replace or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if keep(info.filename):
                zout.writestr(info, replace.get(info.filename, zin.read(info.filename)))
    return dst.stat().st_size


def download(packages: list[str], dest: Path) -> None:
    """``pip download`` of binary wheels for CPython 3.12 on x86-64 Linux, no dependencies."""
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", "3.12", "--implementation", "cp", "-d", str(dest)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    subprocess.run([*command, *packages], check=True)


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".whl-cleanrl", help="the folder of the wheels")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        download([ENVPOOL, ASSETS], raw)
        for wheel in raw.glob("envpool-*.whl"):
            strip_wheel(wheel, out / wheel.name, keep_envpool, {"envpool/entry.py": ATARI_ENTRY})
        for wheel in raw.glob("envpool_assets-*.whl"):
            strip_wheel(wheel, out / wheel.name, keep_assets)
    download(list(OTHERS), out)
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out)]
    subprocess.run([*build, *SDIST_ONLY], check=True)
    wheels = sorted(out.glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels in {out}, {total / 1e6:.1f} MB")
    return wheels


if __name__ == "__main__":
    main()
