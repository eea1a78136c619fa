"""kvreplay report and diff (issue 17): the page's sections, its bytes (stable across runs and hash seeds, and a
golden file), the timeline capture, the diff's verdicts, and one-line errors."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import orjson
import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from kvreplay.report_html import data
from kvreplay.report_html.command import report_html
from kvreplay.report_html.load import load_run

from .report_runs import G1, SMALL, predict, run_cli
from .support import ROOT



class GoldenHTML(SingleFileSnapshotExtension):
    file_extension = "html"
    _write_mode = WriteMode.TEXT

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(ROOT / "golden" / "report")

    @classmethod
    def get_snapshot_name(cls, *, test_location, index=0) -> str:
        return "host-offload-small"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The example's first 4 sessions with --report (requests.jsonl, timeline.jsonl and report.html)."""
    return predict(tmp_path_factory.mktemp("runs") / "small", *SMALL, "--report")


def test_the_page_has_every_section_and_a_plot_for_each(small):
    page = (small / "report.html").read_text()
    for title in ("Summary", "Latency distributions", "Reuse over time", "Occupancy, batch and queue over time",
                  "Per-worker load", "Requests (a sample)"):
        assert f"<h2>{title}</h2>" in page
    # TTFT, TPOT, E2E, ITL; reuse by source; occupancy, batch, queue, preemptions; per-worker load
    assert page.count("<svg") == 10
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") \
        .replace('xmlns:xlink="http://www.w3.org/1999/xlink"', "")
    assert "Why prompt tokens were not reused" not in page and "Miss-ratio curve" not in page  # (no such keys)


def test_the_page_shows_what_the_run_measured(small):
    run = load_run(small)
    assert run.summary["num_requests"] == 16 and len(run.requests) == 16
    assert len(data.latency(run, "ttft_ms")) == 16
    _, _, series = data.reuse_bins(run)
    totals = {name: sum(ys) for name, ys in series}
    # every prompt token is reused from one source or computed
    assert sum(totals.values()) == run.summary["total_input_tokens"]
    assert totals["G1"] == run.summary["first_admission_g1_reused_tokens"]
    timeline = data.timeline_series(run)
    # (the timeline's seconds and the summary's milliseconds are two roundings of one nanosecond clock)
    assert timeline["t"][0] == 0.0 and timeline["t"][-1] == pytest.approx(run.summary["duration_ms"] / 1e3, rel=1e-12)
    assert max(timeline["batch"]) == 4  # (the example's concurrency)
    assert 0 < max(timeline["g1_held"]) <= 1 and "g2" in timeline["tiers"]


@pytest.mark.filterwarnings("ignore:Can not relate snapshot")  # (named after the run, not the test)
def test_the_page_is_the_golden_file(small, snapshot):
    assert (small / "report.html").read_text() == snapshot.use_extension(GoldenHTML)


def test_the_page_is_byte_identical_across_hash_seeds(small, tmp_path):
    pages = []
    for seed in ("1", "4242"):
        out = tmp_path / f"page-{seed}.html"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-m", "kvreplay", "report", str(small), "-o", str(out)], env=env,
                       check=True, capture_output=True)
        pages.append(out.read_bytes())
    assert pages[0] == pages[1] == (small / "report.html").read_bytes()


def test_the_timeline_changes_no_result(small, tmp_path):
    plain = predict(tmp_path / "plain", *SMALL, "--capture-per-request")
    captured = orjson.loads((small / "prediction.json").read_bytes())
    gaps = captured.pop("itl_gap_counts_ns")  # (the timeline adds the exact ITL sample, and changes nothing else)
    assert sum(count for _, count in gaps) == sum(r["output_length"] - 1 for r in load_run(small).completed())
    assert orjson.loads((plain / "prediction.json").read_bytes()) == captured
    assert (plain / "requests.jsonl").read_bytes() == (small / "requests.jsonl").read_bytes()
    assert not (plain / "timeline.jsonl").exists()


def test_miss_classes_and_the_curve_are_shown_when_the_summary_has_them(small, tmp_path):
    folder = tmp_path / "hand-made"
    shutil.copytree(small, folder)
    prediction = orjson.loads((folder / "prediction.json").read_bytes())
    prediction["miss_classes"] = {"compulsory": 9000, "capacity": 1200, "policy": 300, "placement": 0}
    prediction["miss_ratio_curve"] = [[64, 0.1], [256, 0.35], [1024, 0.6], [4096, 0.62]]
    prediction["stages"] = [{"stage": 0, "hit_types": {"apc": 5}}, {"stage": 1, "hit_types": {"apc": 7}}]
    (folder / "prediction.json").write_bytes(orjson.dumps(prediction))
    page = report_html(load_run(folder))
    assert "<h2>Why prompt tokens were not reused</h2>" in page and "<h2>Miss-ratio curve</h2>" in page
    assert page.count("<svg") == 12
    assert "<td>compulsory</td><td>9,000</td><td>0.857143</td>" in page
    assert "miss_ratio_curve" not in page  # (its own section, not summary rows)
    assert "<h2>Stages</h2>" in page and "<tr><td>hit_types.apc</td><td>5</td><td>7</td></tr>" in page
    code, out = run_cli("diff", str(small), str(folder))  # (the diff compares every field, stages included)
    assert code == 0 and "stages[0].hit_types.apc: - -> 5" in out and "miss_classes.capacity: - -> 1,200" in out


def test_a_run_without_requests_or_timeline_says_which_flag_adds_them(tmp_path):
    folder = predict(tmp_path / "bare", *SMALL)
    code, out = run_cli("report", str(folder))
    assert code == 0 and out == f"wrote {folder / 'report.html'}\n"
    page = (folder / "report.html").read_text()
    assert "rerun with --capture-per-request" in page and "rerun with --capture-timeline" in page
    assert page.count("<svg") == 1  # (ITL, through the summary's percentiles)


def test_diff_of_the_same_config_reports_no_difference(small, tmp_path):
    again = predict(tmp_path / "again", *SMALL, "--report")
    code, out = run_cli("diff", str(small), str(again))
    assert code == 0 and out.endswith("no difference (82 summary fields, 16 requests)\n")
    code, out = run_cli("diff", str(small), str(again), "--format", "json")
    result = orjson.loads(out)
    assert result["identical"] is True and result["summary"] == {} and result["requests"]["matched"] == 16


def test_diff_of_two_g1_capacities_has_the_expected_signs(tmp_path):
    small_g1 = predict(tmp_path / "g1-300", *SMALL, "--set", f"{G1}=300", "--capture-per-request")
    big_g1 = predict(tmp_path / "g1-2499", *SMALL, "--capture-per-request")
    code, out = run_cli("diff", str(small_g1), str(big_g1), "--format", "json")
    result = orjson.loads(out)
    summary = result["summary"]
    assert code == 0 and result["identical"] is False
    assert summary["first_admission_prefix_cache_reused_ratio"]["delta"] > 0  # a bigger G1 reuses more
    assert summary["first_admission_g1_reused_tokens"]["delta"] > 0
    assert "mean_ttft_ms" not in summary or summary["mean_ttft_ms"]["delta"] <= 0  # and is not slower to start
    assert result["requests"]["matched"] == 16 and result["requests"]["only_in_a"] == 0
    code, text = run_cli("diff", str(small_g1), str(big_g1))
    assert "first_admission_prefix_cache_reused_ratio: " in text and "requests: 16 matched" in text
    out_file = tmp_path / "diff.html"
    code, _ = run_cli("diff", str(small_g1), str(big_g1), "--format", "html", "-o", str(out_file))
    page = out_file.read_text()
    assert code == 0 and page.count("<svg") == 4 and "<h2>Per-request deltas</h2>" in page


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing", "no such folder"),
    (lambda d: d, "is not a run folder: it has no prediction.json"),
    (lambda d: (d / "f.txt").write_text("x") and d / "f.txt", "is not a folder"),
    (lambda d: (d / "prediction.json").write_text("{") and d, "prediction.json: not JSON"),
    (lambda d: (d / "prediction.json").write_text("[]") and d, "has no summary fields"),
    (lambda d: (d / "prediction.json").write_text('{"num_requests": 0}') and (d / "requests.jsonl").write_text("{}\n7\n")
     and d, "requests.jsonl:2: a record is a JSON object"),
])
def test_a_bad_run_folder_is_one_line_and_exit_2(tmp_path, capsys, make, message):
    folder = make(tmp_path)
    code, _ = run_cli("report", str(folder))
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err
    code, _ = run_cli("diff", str(folder), str(folder))
    assert code == 2 and message in capsys.readouterr().err


def test_a_long_timeline_is_the_coarser_grid_it_would_have_sampled(small, monkeypatch):
    """With room for fewer samples the interval doubles; what is kept is what the doubled interval takes."""
    from kvreplay.runtime.outputs import timeline

    class Clocked:  # (the state a sample reads, without a replay)
        log = type("L", (), {"total": 0})()
        after_instant: list = []
        single_step = False

        def ranks(self):
            return []

    instants = [0, 30, 90, 100, 150, 210, 260, 330, 390, 420, 500, 640, 800, 810]

    def sampled(interval_ms, limit):
        monkeypatch.setattr(timeline, "MAX_SAMPLES", limit)
        line = timeline.Timeline.attach(Clocked(), interval_ms)
        for at in instants:
            line.after_instant(at * 1_000_000)
        return [r["t_ms"] for r in line.records], line.interval_ns

    fine, _ = sampled(100, 1000)
    assert fine == [0, 100, 210, 330, 420, 500, 640, 800]
    coarse, interval = sampled(100, 5)
    assert interval == 200_000_000 and coarse == sampled(200, 1000)[0] == [0, 210, 420, 640, 800]
    coarse, interval = sampled(100, 3)
    assert interval == 400_000_000 and coarse == sampled(400, 1000)[0] == [0, 420, 800]


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "abc"])
def test_a_bad_timeline_interval_is_a_usage_error(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as stop:
        run_cli("predict", "-c", str(ROOT / "examples" / "host-offload-prediction.yaml"), "--output-dir",
                str(tmp_path / "out"), "--capture-timeline", value)
    assert stop.value.code == 2 and "--capture-timeline" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_predict_explain_misses_gets_both_sections(tmp_path):
    """The sections read what predict --explain-misses writes (runtime/analysis/): the classes and the curve
    as ratios of prompt tokens, with the replay's own point on it."""
    folder = predict(tmp_path / "explained", *SMALL, "--report", "--explain-misses")
    run = load_run(folder)
    curve = data.curve_of(run.summary)
    assert curve["replay"] == [(2499, run.summary["first_admission_prefix_cache_reused_ratio"])]
    assert curve["lru"][-1][1] >= curve["replay"][0][1] and len(curve["belady"]) == 1
    page = (folder / "report.html").read_text()
    assert "<h2>Why prompt tokens were not reused</h2>" in page and "<h2>Miss-ratio curve</h2>" in page
    # ... and beside the curve, the gap to the ideal LRU at the replay's capacity, with its plot by class
    assert page.count("<svg") == 13 and "compulsory " in page  # (and each sampled request's classes)
    gap = run.summary["miss_ratio_curve"]["gap"]
    assert f"<td>gap (ideal - replay)</td><td>{gap['ideal_lru_hit_tokens'] - gap['replay_hit_tokens']:,}</td>" \
        in page
    assert "Gap to the ideal LRU by class" in page


def test_the_itl_cdf_is_exact(tmp_path):
    """--capture-timeline adds every gap between tokens as [ns, count] (the ITL percentiles' own sample).  With the
    scenarios' fixed timing (prefill 10 ms, decode 1 ms, a mixed pass the sum): R0's first token at 10 ms; R1,
    arrived at 1.5 ms, is prefilled beside R0's decode, so R0's second token comes 11 ms later; then 1 ms passes
    give R0 two more gaps and R1 two: four gaps of 1 ms, one of 11 ms."""
    from .scenarios import aggregated_config, predict_scenario, row

    rows = [row(0, 8, 4, [1, 2]), row(1.5, 8, 3, [3, 4])]
    out = predict_scenario(tmp_path, rows, aggregated_config({}, g1_blocks=16), "itl.yaml", "--capture-timeline",
                           "--capture-per-request")
    run = load_run(out)
    assert run.summary["itl_gap_counts_ns"] == [[1_000_000, 4], [11_000_000, 1]]
    assert run.summary["mean_itl_ms"] == (4 * 1 + 11) / 5
    assert data.itl_cdf(run.summary) == ([1.0, 11.0], [0.8, 1.0])
    # the report draws it as a step CDF, without the "through the summary's percentiles" label
    page = report_html(run)
    assert "through the summary" not in page and "ITL CDF" in page


def test_reuse_by_source_splits_the_tiers_behind_g1(tmp_path):
    """The G3 example restores blocks G3 read into G2 and blocks G2 kept itself: the report's reuse table has a
    row for each, and with G1 they add up to the first admissions' reuse."""
    out = tmp_path / "g3"
    code, _ = run_cli("predict", "-c", str(ROOT / "examples" / "g3-storage.yaml"), "--output-dir", str(out),
                      "--report", "--no-progress")
    assert code == 0
    run = load_run(out)
    _, _, series = data.reuse_bins(run)
    totals = {name: int(sum(ys)) for name, ys in series}
    host = sum(r["first_admission_host_reused_input_tokens"] for r in run.requests)
    assert totals["G3 (read into G2)"] > 0 and data.HOST_CHAIN not in totals
    assert totals["G3 (read into G2)"] + totals.get("G2", 0) + totals.get("KVCR pulls", 0) == host
    assert totals["G1"] == run.summary["first_admission_g1_reused_tokens"]
    page = (out / "report.html").read_text()
    assert f"<td>G3 (read into G2)</td><td>{totals['G3 (read into G2)']:,}</td>" in page
