"""`make site` end to end (issue 37): the course built as a website from a clean clone of the
repository, then read in Chromium (Debian's, driven by Playwright; tests/browser_setup.sh installs
it). Built once per session: executing every chapter takes minutes, so the clone's cache is given
the chapters test_course_notebooks executed, all but one, which the first build executes.

Checked from what the build produced: every chapter page shows its plots (loaded images), its
Colab and download links, its intentional errors and a static picture of each widget; every
exercise page shows the released notebook; no internal link or anchor is broken; the search page
finds a chapter by a word of its title; no line of a solution or of a hidden test (solutions/)
appears anywhere in the site; a second build executes nothing and says nothing about the
configuration; and a chapter with an untagged error or a claim that does not hold fails the build.

As a learner reads it beside the JAX docs (issue 46): clicking ``jax.lax.scan`` in chapter 04
(prose and code) goes to the URL JAX's inventory (site/jax-objects.inv) gives it; each chapter
links the course's helpers it calls to the reference page, which documents every name of
``autograder.__all__``; no page makes a request beyond the site; no line of a chapter is cut off
(outputs wrap, code scrolls with a scrollbar), on a desktop and on a phone; one search box; and a
build without the inventory still works and says so."""
from __future__ import annotations

import copy
import html
import http.server
import re
import shutil
import subprocess
import sys
import threading
import tomllib
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from test_browser import ARGS, CHROMIUM, browser_page  # noqa: F401 - the fixture `page` uses

# The build executes chapters: it joins test_course_notebooks' xdist group (one worker, one after the
# other), so its kernels never run beside the chapters whose measured claims are checked, and its
# cache takes the chapters that module executed in this process (seed_cache).
pytestmark = [pytest.mark.slow, pytest.mark.slow_env, pytest.mark.xdist_group("course_notebooks")]
BUILD_TIMEOUT = 3600
TIMEOUT_MS = 120_000
_course = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
COLAB = f"https://colab.research.google.com/github/{_course['github']}/blob/{_course.get('branch', 'main')}/"


@dataclass
class Site:
    checkout: Path
    html: Path
    first: str                 # what the first build printed
    second: str                # and the second, with nothing changed
    records: list              # jupyter-cache's records after the first build
    records_again: list        # and after the second
    unseeded: list             # the chapters its cache lacked before the first build (seed_cache)

    def chapters(self) -> list[Path]:
        return sorted((self.checkout / "course").glob("*.ipynb"))

    def exercises(self) -> list[Path]:
        return sorted((self.checkout / "exercises").glob("*/*.ipynb"))


def build(checkout: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/site.py"], cwd=checkout, capture_output=True,
                          text=True, timeout=BUILD_TIMEOUT)


def built_ok(checkout: Path) -> str:
    proc = build(checkout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"the site's build failed:\n{out[-6000:]}"
    return out


def cache_records(checkout: Path) -> list:
    from jupyter_cache import get_cache

    records = get_cache(str(checkout / "_site" / ".jupyter_cache")).list_cache_records()
    return sorted((r.pk, r.hashkey, r.created) for r in records)


def clone(dest: Path) -> Path:
    """A clean checkout: what is committed, nothing built."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True, timeout=300)
    return dest


# The chapter the first build executes itself (the quickest); every other one it finds in its cache.
EXECUTED_BY_THE_BUILD = "02_static_dynamic"


def seed_cache(checkout: Path) -> list[str]:
    """The clone's jupyter-cache given every chapter but EXECUTED_BY_THE_BUILD as
    test_course_notebooks executed it in this process (the same xdist group, run just before; run
    alone, this executes them): the same runner in the same environment, so the build need not run
    them again. Only a chapter whose code is the clone's matches (jupyter-cache's key: its code
    cells, their metadata, the kernelspec); any other one the build executes. Returns the chapters
    the build must execute (``course/NN_slug.ipynb``)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    from test_course_notebooks import executed

    cache = get_cache(str(checkout / "_site" / ".jupyter_cache"))
    left = []
    for chapter in sorted((checkout / "course").glob("*.ipynb")):
        ours = ROOT / "course" / chapter.name
        if chapter.stem == EXECUTED_BY_THE_BUILD or chapter.read_bytes() != ours.read_bytes():
            left.append(f"course/{chapter.name}")
            continue
        try:
            nb = copy.deepcopy(executed(ours))
        except Exception:  # noqa: BLE001 - test_course_notebooks reports it; the build executes it and fails
            left.append(f"course/{chapter.name}")
            continue
        for cell in nb.cells:
            cell.metadata.pop("execution", None)  # nbclient's timings: not in the build's runs (its key covers them)
        uri = checkout / "_site" / "src" / "course" / chapter.name  # where scripts/site.py stages it
        cache.cache_notebook_bundle(CacheBundleIn(nb, str(uri)), check_validity=False, overwrite=True)
    return left


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Site:
    checkout = clone(tmp_path_factory.mktemp("site") / "course")
    unseeded = seed_cache(checkout)
    first = built_ok(checkout)
    records = cache_records(checkout)
    second = built_ok(checkout)
    return Site(checkout, checkout / "_site" / "html", first, second, records, cache_records(checkout), unseeded)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    """The site served over HTTP, as GitHub Pages or `python -m http.server` would."""
    handler = lambda *a, **k: _Quiet(*a, directory=str(site.html), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=30)


@pytest.fixture(scope="module")
def page(browser_page):  # noqa: F811 - the fixture imported above
    """Chromium's page, as tests/test_browser.py starts it."""
    return browser_page


def html_page(notebook: Path, checkout: Path) -> str:
    return notebook.relative_to(checkout).with_suffix(".html").as_posix()


def test_build_says_where_to_open_it(site):
    index = site.html / "index.html"
    assert index.is_file()
    for out in (site.first, site.second):
        assert f"file://{index}" in out and "-m http.server -d _site/html" in out, out[-2000:]


def test_second_build_executes_nothing(site):
    chapters = len(site.chapters())
    executed = re.findall(r"^Executing notebook (\S+)$", site.first, re.M)
    assert f"course/{EXECUTED_BY_THE_BUILD}.ipynb" in site.unseeded
    assert executed == site.unseeded, "the first build must execute every chapter its cache lacks, and no other"
    assert len(site.records) == chapters
    assert "Executing notebook" not in site.second, site.second[-4000:]
    assert site.records_again == site.records, "the second build changed jupyter-cache's records"
    assert re.search(r"0 added, 0 changed, 0 removed", site.second), site.second[-4000:]
    assert "configuration has changed" not in site.second, site.second[:3000]


def _images_loaded(page) -> list[bool]:
    return page.eval_on_selector_all(
        "article img[src*='_images/']", "imgs => imgs.map(i => i.complete && i.naturalWidth > 0)")


def _notebook_links(page, server, rel: str, source: Path) -> list[str]:
    """Problems with the page's Colab link and its notebook download (empty when fine)."""
    problems = []
    if not page.locator(f"a[href='{COLAB}{rel}']").count():
        problems.append(f"{rel}: no link to {COLAB}{rel}")
    download = page.locator(f"a[href$='_sources/{rel}']")
    if not download.count():
        return [*problems, f"{rel}: no download link for its notebook"]
    url = urllib.parse.urljoin(page.url, download.first.get_attribute("href"))
    with urllib.request.urlopen(url, timeout=60) as r:
        got = nbformat.reads(r.read().decode(), as_version=4)
    want = nbformat.read(str(source), as_version=4)
    if [c.source for c in got.cells] != [c.source for c in want.cells]:
        problems.append(f"{rel}: the downloaded notebook is not the repository's")
    return problems


def test_chapter_pages_render_with_plots_errors_and_widgets(site, server, page):
    problems = []
    for chapter in site.chapters():
        rel = chapter.relative_to(site.checkout).as_posix()
        page.goto(server + html_page(chapter, site.checkout), wait_until="load")
        title = nbformat.read(str(chapter), as_version=4)
        heading = next(line for c in title.cells if c.cell_type == "markdown"
                       for line in c.source.splitlines() if line.startswith("# "))
        if heading.removeprefix("# ").replace("`", "") not in page.locator("article h1").first.inner_text():
            problems.append(f"{rel}: its title is not the page's heading")
        loaded = _images_loaded(page)
        if not loaded or not all(loaded):
            problems.append(f"{rel}: plots {loaded} (none, or not loaded)")
        problems += _notebook_links(page, server, rel, chapter)
        tagged = [c for c in title.cells if "raises-exception" in c.metadata.get("tags", [])]
        shown = page.locator("div.cell.tag_raises-exception:has(.output.traceback)").count()
        if shown != len(tagged) or page.locator(".output.traceback").count() != len(tagged):
            problems.append(f"{rel}: {len(tagged)} cells raise on purpose, the page shows {shown} of their errors")
        if "ipywidgets" in "".join(c.source for c in title.cells if c.cell_type == "code"):
            pictures = page.locator(".widget-picture pre, .widget-picture img").count()
            if not pictures:
                problems.append(f"{rel}: its widgets show no static picture")
        if page.locator("script[type*='jupyter.widget']").count():
            problems.append(f"{rel}: the page embeds widget scripts, which need a kernel or a CDN")
    assert not problems, "\n".join(problems)


def test_exercise_pages_show_the_released_notebook(site, server, page):
    """Every code cell, the Colab and download links, and the chapter it names is a link."""
    problems = []
    for exercise in site.exercises():
        rel = exercise.relative_to(site.checkout).as_posix()
        page.goto(server + html_page(exercise, site.checkout), wait_until="load")
        nb = nbformat.read(str(exercise), as_version=4)
        shown = page.locator("div.cell").count()
        code = sum(c.cell_type == "code" for c in nb.cells)
        if shown != code:
            problems.append(f"{rel}: {code} code cells, the page shows {shown}")
        problems += _notebook_links(page, server, rel, exercise)
        markdown = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
        for path in set(re.findall(r"`((?:course|exercises)/[\w/]+\.ipynb)`", markdown)):
            target = Path(path).with_suffix(".html").as_posix()
            if (site.checkout / path).exists() and not page.locator(f"a[href$='{target}'] code").count():
                problems.append(f"{rel}: `{path}` is not a link to its page")
    assert not problems, "\n".join(problems)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append(attrs[key])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_no_internal_link_is_broken_and_every_page_is_reachable(site):
    pages = {p: _parse(p) for p in site.html.rglob("*.html") if "_static" not in p.parts}  # not the theme's templates
    broken, reached, todo = [], set(), [site.html / "index.html"]
    for page_path, parsed in pages.items():
        for link in parsed.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or url.netloc or link.startswith("#") and not url.fragment:
                continue
            target = (page_path.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page_path
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page_path.relative_to(site.html)}: {link}")
            elif url.fragment and target.suffix == ".html" and url.fragment not in pages[target].ids:
                broken.append(f"{page_path.relative_to(site.html)}: {link} (no such anchor)")
    assert not broken, "broken internal links:\n" + "\n".join(broken)
    while todo:  # every chapter, exercise and the guide can be reached from the home page
        current = todo.pop()
        if current in reached:
            continue
        reached.add(current)
        for link in pages[current].links:
            url = urllib.parse.urlsplit(link)
            target = (current.parent / url.path).resolve() if url.path and not url.scheme else None
            if target is not None and target.suffix == ".html" and target in pages:
                todo.append(target)
    expected = {site.html / html_page(p, site.checkout) for p in site.chapters() + site.exercises()}
    expected |= {site.html / "instructor-guide.html", site.html / "reference.html"}
    assert not expected - reached, f"pages not reachable from the home page: {sorted(expected - reached)}"


def test_guide_section_references_link_to_the_chapters_sections(site):
    """Every §"Heading" of the instructor guide links to that heading's anchor on its chapter's
    page (that the anchor exists is checked with every other link above)."""
    references = re.findall(r'§"[^"\n]+"', (site.checkout / "docs" / "instructor-guide.md").read_text())
    markup = (site.html / "instructor-guide.html").read_text()
    links = re.findall(r'<a [^>]*href="(course/[^"#]+\.html#[^"]+)"[^>]*>(.*?)</a>', markup, re.S)
    linked = [href for href, text in links if _visible_text(text).startswith("§")]
    assert references and len(linked) == len(references), (len(linked), len(references))


def test_search_finds_a_chapter_by_a_word_of_its_title(site, server, page):
    chapter = site.chapters()[3]
    nb = nbformat.read(str(chapter), as_version=4)
    heading = next(line for c in nb.cells if c.cell_type == "markdown"
                   for line in c.source.splitlines() if line.startswith("# "))
    word = max(re.findall(r"[A-Za-z]+", heading.split(":", 1)[-1]), key=len)
    page.goto(f"{server}search.html?q={word}", wait_until="load")
    hit = page.locator(f"ul.search li a[href*='{html_page(chapter, site.checkout)}']")
    hit.first.wait_for(state="attached", timeout=TIMEOUT_MS)
    assert hit.count() >= 1


SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
MIN_LINE = 20  # shorter lines (``return x``) also appear in what is published on purpose


def _cell_text(path: Path) -> str:
    return "\n".join(c.source for c in nbformat.read(str(path), as_version=4).cells)


def _published(checkout: Path) -> str:
    """Everything the site's pages are made of: what may appear in the site."""
    texts = [_cell_text(p) for p in sorted(checkout.glob("course/*.ipynb")) + sorted(checkout.glob("exercises/*/*.ipynb"))]
    texts += [p.read_text() for p in sorted(checkout.glob("site/*.md")) + sorted(checkout.glob("site/*.rst"))]
    texts.append((checkout / "docs" / "instructor-guide.md").read_text())
    return "\n".join(texts)


def _secrets(checkout: Path) -> set[str]:
    """Lines of solution code and hidden tests (solutions/: the notebooks' marked regions and the
    judge files) that nothing published contains."""
    lines = []
    for nb in sorted(checkout.glob("solutions/*/*.ipynb")):
        text = _cell_text(nb)
        lines += [line for block in SOLUTION.findall(text) + HIDDEN.findall(text) for line in block.splitlines()]
    for judge in sorted(checkout.glob("solutions/*/*.py")):
        lines += judge.read_text().splitlines()
    published = _published(checkout)
    return {s for line in lines if len(s := line.strip()) >= MIN_LINE and s not in published}


def _visible_text(markup: str) -> str:
    """An HTML page's text with the markup gone (highlighted code is split into many spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_no_solution_or_hidden_test_appears_anywhere(site):
    secrets = _secrets(site.checkout)
    assert len(secrets) >= 10 * len(site.exercises()) // 2, f"too few solution lines to check: {len(secrets)}"
    # the check below finds code as a page shows it: the first code line of an exercise is found
    exercise = site.exercises()[0]
    first_line = next(line.strip() for c in nbformat.read(str(exercise), as_version=4).cells
                      if c.cell_type == "code" and "colab-setup" not in c.metadata.get("tags", [])
                      for line in c.source.splitlines() if len(line.strip()) >= MIN_LINE)
    shown = _visible_text((site.html / html_page(exercise, site.checkout)).read_text())
    assert first_line in shown
    found = []
    for path in sorted(site.checkout.joinpath("_site").rglob("*")):
        if not path.is_file() or path.suffix in (".png", ".jpg", ".gif", ".woff", ".woff2", ".ttf", ".db"):
            continue
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        text = raw + "\n" + _visible_text(raw) if path.suffix == ".html" else raw
        found += [f"{path.relative_to(site.checkout)}: {s}" for s in secrets if s in text]
    assert not found, "solution or hidden-test lines in the site:\n" + "\n".join(found[:40])


# Beside the JAX docs (issue 46).
JAX_DOCS = "https://docs.jax.dev/"


def jax_inventory(checkout: Path) -> dict[str, str]:
    """Name -> URL, as Sphinx's intersphinx reads the repository's inventory of JAX's reference."""
    from sphinx.util.inventory import InventoryFile

    raw = (checkout / "site" / "jax-objects.inv").read_bytes()
    inventory = InventoryFile.loads(raw, uri="https://docs.jax.dev/en/latest/").data
    return {name: item.uri for items in inventory.values() for name, item in items.items()}


def test_clicking_jax_lax_scan_in_chapter_04_opens_its_page_in_jax_reference(site, server, page):
    url = jax_inventory(site.checkout)["jax.lax.scan"]
    assert url == "https://docs.jax.dev/en/latest/_autosummary/jax.lax.scan.html#jax.lax.scan"
    chapter = next(p for p in site.chapters() if p.name.startswith("04_"))
    page.goto(server + html_page(chapter, site.checkout), wait_until="load")
    prose = page.locator(f"article p a.reference.external[href='{url}']")
    code = page.locator(f"article div.highlight a[href='{url}']")
    assert prose.count() and code.count(), (prose.count(), code.count())
    for link in (prose.first, code.first):
        assert "scan" in link.inner_text()
        opened = []
        page.route(f"{JAX_DOCS}**", lambda route: (opened.append(route.request.url),
                                                   route.fulfill(status=200, content_type="text/html",
                                                                 body="<title>JAX</title>")))
        try:
            with page.expect_navigation():
                link.click()
            assert page.url == url and opened == [url.split("#")[0]], (page.url, opened)
        finally:
            page.unroute(f"{JAX_DOCS}**")
            page.go_back(wait_until="load")


def test_reference_page_documents_every_public_name(site, server, page):
    import autograder

    page.goto(server + "reference.html", wait_until="load")
    missing = [name for name in autograder.__all__
               if not page.locator(f"dl.py > dt[id='autograder.{name}'] + dd p").count()]
    assert not missing, f"not documented on the reference page: {missing}"


def test_chapters_link_the_helpers_they_call_to_the_reference(site):
    """Each ``ag.NAME`` a chapter's code calls is a link to NAME's entry on the reference page."""
    import autograder

    problems = []
    for chapter in site.chapters():
        code = "\n".join(c.source for c in nbformat.read(str(chapter), as_version=4).cells if c.cell_type == "code")
        called = sorted({n for n in re.findall(r"\bag\.(\w+)", code) if n in autograder.__all__})
        markup = (site.html / html_page(chapter, site.checkout)).read_text()
        problems += [f"{chapter.name}: ag.{n}" for n in called if f'reference.html#autograder.{n}"' not in markup]
    assert not problems, "helpers without a link to their reference:\n" + "\n".join(problems)


def _pages(site) -> list[str]:
    chapters = [html_page(p, site.checkout) for p in site.chapters() + site.exercises()]
    return [*chapters, "index.html", "reference.html", "instructor-guide.html", "search.html?q=scan"]


def test_no_page_makes_an_external_request(site, server, page):
    outside = []
    record = lambda request: None if request.url.startswith(server) else outside.append(request.url)  # noqa: E731
    page.on("request", record)
    try:
        for path in _pages(site):
            page.goto(server + path, wait_until="networkidle")
    finally:
        page.remove_listener("request", record)
    assert not outside, f"requests beyond the site: {sorted(set(outside))}"


CUT_OFF = """() => {
  const article = document.querySelector('article'), edge = article.getBoundingClientRect().right;
  const scrollsVisibly = e => {  // e, or a box around it, scrolls sideways and shows its scrollbar
    for (let a = e; a && a !== article; a = a.parentElement) {
      const s = getComputedStyle(a);
      const bar = a.offsetHeight - a.clientHeight - parseFloat(s.borderTopWidth) - parseFloat(s.borderBottomWidth);
      if ((s.overflowX === 'auto' || s.overflowX === 'scroll') && a.scrollWidth > a.clientWidth && bar > 0) return true;
    }
    return false;
  };
  const found = [];
  for (const e of article.querySelectorAll('pre, table, img, code, .output, .cell_output')) {
    // its contents run past its padding (a box), or it runs past the page's column (a word)
    const past = e.scrollWidth - e.clientWidth - parseFloat(getComputedStyle(e).paddingRight);
    const wide = (e.clientWidth > 0 && past > 1) || e.getBoundingClientRect().right > edge + 1;
    if (!wide) continue;
    const text = e.textContent.trim().slice(0, 70);
    if (e.tagName === 'PRE' && e.closest('.cell_output, .output') && /^claim: /m.test(e.textContent))
      found.push('a claim: verdict does not wrap: ' + text);
    else if (!scrollsVisibly(e))
      found.push(`cut off (${e.tagName.toLowerCase()}, ${e.scrollWidth}px in ${e.clientWidth}px): ` + text);
  }
  if (document.documentElement.scrollWidth > document.documentElement.clientWidth) found.push('the page scrolls sideways');
  return found;
}"""


def test_no_line_of_a_chapter_is_cut_off(site, server, page):
    """On a desktop and on a phone, with the scrollbars a desktop Chromium draws: a ``claim:``
    verdict wraps; whatever else does not fit (a code line, a table, a drawing of a sharding)
    scrolls in a box that shows its scrollbar; nothing makes the page itself scroll sideways."""
    browser = page.context.browser.browser_type.launch(executable_path=CHROMIUM, args=ARGS, headless=True,
                                                       ignore_default_args=["--hide-scrollbars"])
    problems = []
    try:
        for width in (1400, 400):
            view = browser.new_page(viewport={"width": width, "height": 900})
            for chapter in site.chapters():
                view.goto(server + html_page(chapter, site.checkout), wait_until="networkidle")
                view.evaluate("document.fonts.ready.then(() => true)")  # laid out in its own fonts
                problems += [f"{chapter.name} at {width}px: {p}" for p in view.evaluate(CUT_OFF)]
            view.close()
    finally:
        browser.close()
    assert not problems, "\n".join(problems[:30])


def test_one_search_box(site, server, page):
    page.goto(server + html_page(site.chapters()[0], site.checkout), wait_until="load")
    boxes = page.locator(".search-button-field:visible, input[type='search']:visible")
    assert boxes.count() == 1, boxes.count()


# The build's failures, on a clone whose only chapter is a small notebook made for the purpose.
ON_PURPOSE = 'raise ValueError("an error on purpose")'


def _only_chapter(checkout: Path, cells) -> None:
    for path in [*checkout.glob("course/*.ipynb"), *checkout.glob("exercises/*/*.ipynb")]:
        path.unlink()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Chapter 01: a test"), *cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(checkout / "course" / "01_test.ipynb"))


def test_build_fails_on_an_untagged_error_and_a_claim_that_does_not_hold(tmp_path):
    checkout = clone(tmp_path / "course")
    tagged = nbformat.v4.new_code_cell(ON_PURPOSE, metadata={"tags": ["raises-exception"]})

    _only_chapter(checkout, [nbformat.v4.new_code_cell(ON_PURPOSE)])
    proc = build(checkout)
    assert proc.returncode != 0, "an untagged error must fail the build"
    assert "01_test.ipynb" in proc.stdout + proc.stderr

    claim = nbformat.v4.new_code_cell('print("claim: a test claim: does not hold (on purpose)")')
    _only_chapter(checkout, [tagged, claim])
    for attempt in ("first", "again"):
        proc = build(checkout)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, f"a claim that does not hold must fail the build ({attempt})"
        assert "measured claims that do not hold" in out and "a test claim" in out, out[-3000:]
        assert "Executing notebook" in out, f"the failed chapter must be executed again ({attempt})"

    claim.source = 'print("claim: a test claim: holds (on purpose)")'
    prose = nbformat.v4.new_markdown_cell("Under `jax.jit` your function runs once.")
    _only_chapter(checkout, [prose, tagged, claim])
    built_ok(checkout)
    page = checkout / "_site" / "html" / "course" / "01_test.html"
    shown = _visible_text(page.read_text())
    assert "an error on purpose" in shown and "claim: a test claim: holds" in shown
    assert jax_inventory(checkout)["jax.jit"] in page.read_text()

    # a checkout without JAX's inventory: the site is still built, says so, and links nothing to
    # JAX's docs (Sphinx's saved environment goes too: intersphinx keeps the inventories it read)
    (checkout / "site" / "jax-objects.inv").unlink()
    shutil.rmtree(checkout / "_site" / "doctrees")
    out = built_ok(checkout)
    assert "jax-objects.inv is missing" in out, out[-3000:]
    assert "Under jax.jit your function runs once." in _visible_text(page.read_text())
    assert JAX_DOCS not in page.read_text()
    shutil.rmtree(checkout, ignore_errors=True)
