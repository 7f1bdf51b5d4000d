"""The docs site and the README: the site builds with warnings as errors, every page and
public name is in it, the README's links resolve, its example runs and its test command is
the one CI runs."""

from __future__ import annotations

import html
import html.parser
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

# The packages the API reference covers, and its page for each.
API_PAGES = {
    "batchppo": "api/batchppo",
    "batchppo.envs": "api/envs",
    "batchppo.core": "api/core",
    "batchppo.backends": "api/backends",
    "batchppo.algorithms.ppo": "api/algorithms",
    "batchppo.algorithms.a2c": "api/algorithms",
    "batchppo.experiment": "api/experiment",
}


def _mkdocs_build(config: Path, site_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config),
            "-d",
            str(site_dir),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _nav_pages(nav: list) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


class _Ids(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(value for name, value in attrs if name == "id" and value)


def _ids(page: Path) -> set[str]:
    parser = _Ids()
    parser.feed(page.read_text())
    return parser.ids


def _text(page: Path) -> str:
    """A built page's text: its tags removed, its entities unescaped."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _page_html(site: Path, page: str) -> Path:
    """Where mkdocs writes the page ``page`` (``x.md``, ``api/y.md``) of the nav."""
    stem = page.removesuffix(".md")
    return site / "index.html" if stem == "index" else site / stem / "index.html"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site_dir = tmp_path_factory.mktemp("site")
    result = _mkdocs_build(ROOT / "mkdocs.yml", site_dir)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return site_dir


def test_site_builds_with_every_nav_page(site: Path) -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True
    pages = _nav_pages(config["nav"])
    for page in ("index.md", "getting_started.md", "own_env.md", "batch_env.md", "core.md"):
        assert page in pages
    for page in ("algorithms.md", "scale_out.md", "benchmarks.md", "api/envs.md"):
        assert page in pages
    for page in pages:
        assert _page_html(site, page).is_file(), page
    # The run directories are data, left out of the site.
    assert (ROOT / "docs" / "runs").is_dir() and not (site / "runs").exists()


def _plain(markdown: str) -> str:
    """A line of markdown as its rendered text: no emphasis, code marks or link targets."""
    markdown = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return markdown.replace("**", "").replace("`", "").strip()


def test_snippets_from_the_readme_are_in_the_site(site: Path) -> None:
    """The site shows the README's sections (its one copy of them), line by line."""
    sections = {"about": "index.md", "results": "index.md", "setup": "getting_started.md"}
    for section, page in sections.items():
        match = re.search(rf"\[start:{section}\] -->\n(.*?)<!-- --8<-- \[end:", README, re.S)
        assert match, section
        text = _text(_page_html(site, page))
        assert "--8<--" not in text
        lines = [line for line in match.group(1).splitlines() if line.strip()]
        assert len(lines) >= 5, section
        for line in lines:
            if line.startswith("```") or not set(line) - set("|-: "):
                continue  # a code fence, a table's rule
            cells = line.strip("|").split("|") if line.startswith("|") else [line]
            for cell in cells:
                assert _plain(cell) in text, (section, cell)


def test_api_reference_documents_every_public_name(site: Path) -> None:
    """Each name of a package's ``__all__`` is on its page, or on the page of the package
    that defines it (``batchppo.train`` is ``batchppo.experiment.loop.train``)."""
    ids = {page: _ids(site / page / "index.html") for page in set(API_PAGES.values())}
    everywhere = set().union(*ids.values())
    for module, page in API_PAGES.items():
        package = importlib.import_module(module)
        for name in package.__all__:
            if name.startswith("__"):
                continue
            obj = getattr(package, name)
            # A name documented from its own module (``make``) has that module's id.
            home = getattr(obj, "__module__", module)
            if {f"{module}.{name}", f"{home}.{name}"} & ids[page]:
                continue
            defined_in = [
                m for m in API_PAGES if getattr(importlib.import_module(m), name, None) is obj
            ]
            where = {f"{m}.{name}" for m in defined_in if m != module}
            where |= {f"{home}.{name}"}
            assert where & everywhere, f"{module}.{name} is not in the API reference"
            # The top level's page links to where its names are documented.
            assert (
                module != "batchppo"
                or f"#{sorted(where & everywhere)[0]}" in (site / page / "index.html").read_text()
            ), f"{module}.{name}"


def _resolve(dotted: str) -> Any:
    """The object a dotted ``batchppo....`` path names (its longest importable module, then
    attributes), or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part, None)
        return obj
    return None


def test_names_the_pages_point_to_are_in_the_api_reference(site: Path) -> None:
    """Each function or class a page or the README names in full (```batchppo.x.name```) has
    an entry in the API reference, under that name or where it is defined."""
    ids = set().union(*(_ids(site / page / "index.html") for page in set(API_PAGES.values())))
    texts = [README] + [page.read_text() for page in (ROOT / "docs").glob("*.md")]
    names = {m for text in texts for m in re.findall(r"`(batchppo(?:\.\w+)+)", text)}
    checked = []
    for name in sorted(names):
        obj = _resolve(name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue  # a module, or a method named through its class
        home = f"{obj.__module__}.{obj.__qualname__}"
        assert {name, home} & ids, f"the docs name {name}, which is not in the API reference"
        checked.append(name)
    assert "batchppo.experiment.export.export_run" in checked


def test_getting_started_names_every_extra() -> None:
    """The extras paragraph of getting started names each extra of pyproject.toml."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = re.search(r"\[project\.optional-dependencies\]\n(.*?)\n\[", pyproject, re.S)
    extras = set(re.findall(r"^(\w+) = \[", section.group(1), re.M))
    assert {"sb3", "onnx", "wandb", "test", "bench"} <= extras
    page = (ROOT / "docs" / "getting_started.md").read_text()
    paragraph = re.search(r"## Extras\n\n(.*?)\n\n", page, re.S).group(1)
    named = set(re.findall(r"`(\w+)` \(", paragraph)) | {"test"}
    assert named == extras, paragraph


def test_readme_links_resolve(site: Path) -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert len(links) >= 10
    for link in links:
        if re.match(r"https?://", link):
            continue
        path, _, anchor = link.partition("#")
        assert (ROOT / path).exists(), f"README links to {link}, which does not exist"
        if anchor:  # a section of a docs page: the site's page has that id
            page = Path(path).relative_to("docs").as_posix()
            assert anchor in _ids(_page_html(site, page)), link


def test_readme_links_the_own_env_guide_from_its_top() -> None:
    """The guide is linked before the results, outside the snippet the site's home reuses."""
    top = README.split("## Results")[0]
    assert "](docs/own_env.md)" in top.split("[end:about]")[1]


def test_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """The build above would catch a dead link: strict mode is in force."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("runs"))
    with open(docs / "core.md", "a") as f:
        f.write("\nSee [the missing section](batch_env.md#no-such-section).\n")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["docs_dir"] = str(docs)
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            ext["pymdownx.snippets"]["base_path"] = [str(ROOT)]
    config["plugins"][1]["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT)]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    result = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-section" in result.stderr


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    command = 'pip install -e ".[test]" && ruff check . && pytest -q'
    assert command in ci
    blocks = re.findall(r"```shell\n(.*?)\n```", README, re.S)
    assert f"python3 -m venv .venv && . .venv/bin/activate && {command}" in blocks


def test_readme_example_runs(tmp_path: Path) -> None:
    example = re.search(r"## Example\n\n```python\n(.*?)```", README, re.S).group(1)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    steps, score = result.stdout.splitlines()[-2].split()
    assert int(steps) >= 50_000 and float(score) > 0
    assert result.stdout.splitlines()[-1] == "(8, 3) float32"
    assert list(tmp_path.iterdir()) == []  # no logdir: nothing on disk
