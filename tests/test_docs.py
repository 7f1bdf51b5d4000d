"""The docs site and the README: the site builds with warnings as errors, every page and
public name is in it, the API reference reads as a reader sees it (cross-references link,
examples are code and run), the README's links resolve, its example runs and its test command
is the one CI runs."""

from __future__ import annotations

import doctest
import html
import html.parser
import importlib
import inspect
import os
import re
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


class _Links(html.parser.HTMLParser):
    """The cross-references of a page: the ``href`` of each autorefs anchor."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "a" and "autorefs" in (attributes.get("class") or "").split():
            self.hrefs.append(attributes.get("href") or "")


def _ids(page: Path) -> set[str]:
    parser = _Ids()
    parser.feed(page.read_text())
    return parser.ids


def _text(page: Path) -> str:
    """A built page's text: its tags removed, its entities unescaped."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _code_blocks(page: Path) -> list[str]:
    """The text of a built page's code blocks (``<pre>``), tags removed, entities unescaped."""
    blocks = re.findall(r"<pre[^>]*>(.*?)</pre>", page.read_text(), re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in blocks]


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
    """A line of markdown as its rendered text: no list marker, emphasis, code marks or link
    targets."""
    markdown = re.sub(r"^\s*[-*] ", "", markdown)
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
            if line.startswith(("```", "<!--")) or not set(line) - set("|-: "):
                continue  # a code fence, an HTML comment (a table's marker), a table's rule
            cells = line.strip("|").split("|") if line.startswith("|") else [line]
            for cell in cells:
                assert _plain(cell) in text, (section, cell)


def test_home_page_carries_the_readme_results_tables(site: Path) -> None:
    """Each table of the README's results section (the like-for-like results, as they land)
    is a table of the site's home page, row for row."""
    section = re.search(r"\[start:results\] -->\n(.*?)<!-- --8<-- \[end:", README, re.S).group(1)
    tables = re.findall(r"((?:^\|.*\n)+)", section, re.M)
    rows = [len(table.splitlines()) - 1 for table in tables]  # the rule is no row
    home = (site / "index.html").read_text()
    shown = [table.count("<tr>") for table in re.findall(r"<table>.*?</table>", home, re.S)]
    assert rows and rows == shown, (rows, shown)


def test_api_reference_documents_every_public_name(site: Path) -> None:
    """Each name of a package's ``__all__`` is on its page, or on the page of the package
    that defines it (``batchppo.train`` is ``batchppo.experiment.run.training.train``)."""
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
    assert "batchppo.experiment.artifacts.export.export_run" in checked


# Sphinx's cross-reference roles, which the site's renderer (mkdocstrings, Google style, Markdown)
# shows as text: the docstrings use autorefs links, [`BatchEnv`][batchppo.envs.BatchEnv].
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const):`")


def test_no_page_shows_sphinx_roles(site: Path) -> None:
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 20
    for page in pages:
        text = _text(page)
        assert not ROLE.search(text), f"{page.relative_to(site)}: {ROLE.search(text).group()}"
        # An autorefs link that did not resolve stays as its Markdown text.
        assert not re.search(r"\]\[batchppo\.", text), page.relative_to(site)


def test_api_cross_references_link_to_anchors_that_exist(site: Path) -> None:
    """Every cross-reference of the API reference is a link whose target page has its id."""
    ids: dict[Path, set[str]] = {}
    checked = 0
    for page in sorted({site / page / "index.html" for page in API_PAGES.values()}):
        parser = _Links()
        parser.feed(page.read_text())
        for href in parser.hrefs:
            path, _, anchor = href.partition("#")
            target = (page.parent / path).resolve() if path else page
            if target.is_dir() or not target.suffix:
                target = target / "index.html"
            assert target.is_file(), f"{page.relative_to(site)} links to {href}"
            if target not in ids:
                ids[target] = _ids(target)
            assert anchor and anchor in ids[target], f"{page.relative_to(site)} links to {href}"
            checked += 1
    assert checked >= 150, checked


def test_api_returns_sections_read_as_one_description(site: Path) -> None:
    """A ``Returns:`` section's lines continue at its indent: the page shows one description,
    not a row per line (mkdocs.yml's ``returns_multiple_items: false``)."""
    sections = 0
    for page in set(API_PAGES.values()):
        source = (site / page / "index.html").read_text()
        pattern = r'doc-section-title">(?:Returns|Yields):</span>.*?</table>'
        for section in re.findall(pattern, source, re.S):
            assert section.count('<tr class="doc-section-item">') == 1, (page, section)
            sections += 1
    assert sections >= 30, sections


def _documented_objects(site: Path) -> dict[str, Any]:
    """The modules, classes, functions and properties of the API reference, by the id of their
    entry (an object documented under two ids is kept once)."""
    objects: dict[str, Any] = {}
    seen: set[int] = set()
    for page in sorted(set(API_PAGES.values())):
        for ident in sorted(_ids(site / page / "index.html")):
            if not ident.startswith("batchppo."):
                continue
            obj = _resolve(ident)
            documented = inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj)
            if not (documented or isinstance(obj, property)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            objects[ident] = obj
    return objects


def _examples(obj: Any, name: str) -> doctest.DocTest | None:
    """The doctest of an object's docstring, in the namespace of the module that holds it."""
    doc = obj.__doc__ if isinstance(obj.__doc__, str) else None
    if not doc or ">>>" not in doc:
        return None
    function = obj.fget if isinstance(obj, property) else obj
    module = function if inspect.ismodule(function) else sys.modules[function.__module__]
    return doctest.DocTestParser().get_doctest(
        doc, dict(vars(module)), name, getattr(module, "__file__", None), 0
    )


# The examples the suite does not run, each marked ``# doctest: +SKIP`` with a line of the
# docstring that says why: a run's worth of training, a run directory, or a fragment that needs
# a trained agent. The README's example (test_readme_example_runs) trains as `train` does.
SKIPPED_EXAMPLES = {
    "batchppo.algorithms.ppo.make_train",
    "batchppo.algorithms.ppo.Trainer",
    "batchppo.algorithms.training.trainer.Trainer",
    "batchppo.backends.HostLoop",
    "batchppo.experiment.run.training",
    "batchppo.experiment.artifacts.export",
}


def test_api_examples_are_code_blocks_and_run(site: Path) -> None:
    """Each ``Examples:`` section of the API reference renders as a code block, line by line,
    and its doctest passes (outputs included), bar the few marked as skipped.

    docs/api-envs-make.png is how ``api/envs/`` shows ``make``'s example in a browser:
    ``mkdocs build -d site && chromium --headless --no-sandbox --hide-scrollbars
    --screenshot=docs/api-envs-make.png --window-size=1280,1100 file://$PWD/site/api/envs/index.html``.
    """
    blocks = [
        block
        for page in set(API_PAGES.values())
        for block in _code_blocks(site / page / "index.html")
    ]
    for page in set(API_PAGES.values()):
        source = (site / page / "index.html").read_text()
        prose = re.sub(r"<pre[^>]*>.*?</pre>", "", source, flags=re.S)
        assert "&gt;&gt;&gt;" not in prose and ">>>" not in prose, f"{page}: an example not as code"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    ran, skipped, report = set(), set(), []
    for name, obj in _documented_objects(site).items():
        test = _examples(obj, name)
        if test is None:
            continue
        for example in test.examples:  # each line of the example is a line of a code block
            # (the page shows it without its doctest flags)
            line = re.sub(r"\s*#\s*doctest:.*", "", example.source.splitlines()[0].strip())
            assert any(f">>> {line}" in block for block in blocks), (name, line)
        if all(example.options.get(doctest.SKIP) for example in test.examples):
            skipped.add(name)
            continue
        result = runner.run(test, out=report.append)
        assert result.failed == 0, "".join(report)
        ran.add(name)
    assert skipped == SKIPPED_EXAMPLES
    assert {
        "batchppo.envs.make.make",
        "batchppo.envs.BatchEnv",
        "batchppo.envs.register_vector_env",
        "batchppo.experiment.config.configs",
        "batchppo.algorithms.registry",
    } <= ran, ran


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


def test_the_preset_table_names_every_preset() -> None:
    """docs/experiments.md's table of presets has a row for each preset of ``batchppo list``."""
    from batchppo.experiment.config import configs

    page = (ROOT / "docs" / "experiments.md").read_text()
    table = re.search(r"## Presets\n.*?\n(\|.*?)\n\n", page, re.S).group(1)
    named = {
        name for row in table.splitlines() for name in re.findall(r"`(\w+)`", row.split("|")[1])
    }
    assert named == set(configs.PRESETS)


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
    """The build above would catch a dead link: strict mode is in force.

    Two pages built with the site's settings (strict, link validation, plugins) show it as the
    whole site would: the one warning, the broken anchor, fails the build.
    """
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "batch_env.md").write_text("# The batch env\n\n## A section\n")
    (docs / "core.md").write_text(
        "# The core API\n\nSee [a section](batch_env.md#a-section) and "
        "[the missing section](batch_env.md#no-such-section).\n"
    )
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["docs_dir"] = str(docs)
    config["nav"] = [{"The batch env": "batch_env.md"}, {"The core API": "core.md"}]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    result = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert "no-such-section" in warning, result.stderr


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    install = 'pip install --no-compile -c constraints.txt -e ".[test]"'
    command = f"{install} && ruff check . && pytest -q"
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
    # 50k steps of CartPole: seeds 0-2 end at 426, 500 and 491 on this project's machine
    # (docs/benchmarks-journal.md 10f); an untrained mean action scores about 9, a random policy 22.
    assert int(steps) >= 50_000 and float(score) >= 150.0, score
    # The Pendulum env as Gymnasium makes it: its own action range, not make()'s [-1, 1].
    assert result.stdout.splitlines()[-1] == "(8, 3) Box(-2.0, 2.0, (1,), float32)"
    assert list(tmp_path.iterdir()) == []  # no logdir: nothing on disk


@pytest.mark.parametrize(("page", "most"), [("docs/benchmarks.md", 800)])
def test_the_front_pages_stay_short(page: str, most: int) -> None:
    # The results page says what holds now; history goes to the journal.
    lines = (ROOT / page).read_text().count("\n")
    assert lines <= most, f"{page} has {lines} lines, at most {most}: move detail to docs/"


def _reader_words(markdown: str) -> int:
    """The words a reader sees in markdown: HTML comments (the snippet and table markers) and
    link targets left out, a link or an image counted by its text, table cells and code counted;
    a token of markup alone (a table's rule, a list's dash, a code fence) is no word."""
    text = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("```")]
    return sum(bool(re.search(r"\w", token)) for token in " ".join(lines).split())


def _section(markdown: str, title: str) -> str:
    """The text under the heading ``## title``, up to the next such heading."""
    return re.search(rf"^## {title}\n(.*?)(?=^## |\Z)", markdown, re.S | re.M).group(1)


def _prose_lines(markdown: str) -> list[str]:
    """The lines outside code blocks and tables, as written (link targets included)."""
    lines, code = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            code = not code
        elif not code and not line.startswith("|"):
            lines.append(line)
    return lines


def test_reader_words_count_what_a_reader_sees() -> None:
    markdown = (
        "<!-- table:x -->\n- [Benchmarks](docs/benchmarks.md) and `code`, ![a plot](p.png)\n\n"
        "| a | b |\n|---|---:|\n\n```shell\nls -l\n```\n<!-- a hidden\nnote -->"
    )
    # Benchmarks, and, `code`, a, plot; a, b; ls, -l.
    assert _reader_words(markdown) == 9
    assert _prose_lines(markdown) == [
        "<!-- table:x -->",
        "- [Benchmarks](docs/benchmarks.md) and `code`, ![a plot](p.png)",
        "",
        "",
        "<!-- a hidden",
        "note -->",
    ]


def test_the_readme_reads_short() -> None:
    """A reader meets what batchppo is, the set-up, one table and one figure, and the links to
    the rest: at most 1,200 words, 400 of them in the Results section beside its table, and no
    prose line over 120 characters. Comments hold the snippet and table markers only, so
    nothing is hidden from the count."""
    words = _reader_words(README)
    assert words <= 1200, f"README.md has {words} words, at most 1200: move detail to docs/"
    results = _section(README, "Results")
    assert sum(line.startswith("|") for line in results.splitlines()) >= 3  # its table
    prose = "\n".join(line for line in results.splitlines() if not line.startswith("|"))
    words = _reader_words(prose)
    assert words <= 400, f"the Results section has {words} words beside its table, at most 400"
    long = [line for line in _prose_lines(README) if len(line) > 120]
    assert not long, long
    comments = re.findall(r"<!--(.*?)-->", README, re.S)
    markers = r" --8<-- \[(start|end):\w+\] | /?table:[\w-]+ "
    assert all(re.fullmatch(markers, c) for c in comments), comments
