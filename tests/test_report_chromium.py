"""The report in a real headless Chromium (issue 17): it loads with no console error and no network request,
every plot is drawn, and a screenshot shows them.  Debian's chromium is installed when the machine has none
(chromium.installed); the tests never skip."""
from __future__ import annotations

import json

import pytest

from . import chromium
from .report_runs import SMALL, predict

BINARY = chromium.installed()

# per plot: its <svg>'s drawn size and how many shapes it holds
PLOTS = """JSON.stringify({
  plots: Array.from(document.querySelectorAll("figure.plot svg")).map(s => {
    const box = s.getBoundingClientRect();
    return {width: box.width, height: box.height, shapes: s.querySelectorAll("path, rect, use").length,
            text: s.querySelectorAll("text").length};
  }),
  figures: document.querySelectorAll("figure.plot").length,
  sections: Array.from(document.querySelectorAll("section h2")).map(h => h.textContent),
})"""


@pytest.fixture(scope="module")
def visited(tmp_path_factory):
    folder = predict(tmp_path_factory.mktemp("runs") / "small", *SMALL, "--report")
    url = (folder / "report.html").as_uri()
    return url, chromium.visit(BINARY, url, PLOTS)


def test_the_report_loads_with_no_error_and_fetches_nothing(visited):
    url, seen = visited
    assert seen["console_errors"] == [] and seen["exceptions"] == [] and seen["log_errors"] == []
    assert seen["requests"] == [url]  # the page itself, nothing else


def test_every_plot_is_drawn(visited):
    _, seen = visited
    page = json.loads(seen["value"])
    assert page["figures"] == len(page["plots"]) == 10
    for plot in page["plots"]:
        assert plot["width"] > 300 and plot["height"] > 100 and plot["shapes"] >= 10 and plot["text"] >= 4, plot
    assert page["sections"][:3] == ["Summary", "Latency distributions", "Reuse over time"]


def test_the_screenshot_is_not_blank(visited):
    _, seen = visited
    dark, total = chromium.non_white(seen["png"])
    assert total > 500_000 and 0.01 < dark / total < 0.5


def test_the_checks_see_errors_and_requests(tmp_path):
    """(The checks above can fail: a page that logs an error and fetches an image is caught.)"""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom")</script>'
                   '<img src="http://127.0.0.1:9/nothing.png"></body></html>')
    seen = chromium.visit(BINARY, bad.as_uri(), "document.images.length")
    assert [c["args"][0]["value"] for c in seen["console_errors"]] == ["boom"]
    assert "http://127.0.0.1:9/nothing.png" in seen["requests"] and seen["value"] == 1
