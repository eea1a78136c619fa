"""`kvreplay diff A B`: what changed from run A to run B (deltas are B - A).

Summary: every scalar field of either summary (data.flatten, opal's stages
and the miss-ratio curve included; not the ITL sample `itl_gap_counts_ns`,
whose percentiles are summary fields), numbers with
their delta and relative change, other values as changed or not.
Requests: matched by id (a repeated id by its occurrence), each compared
field counted where it differs, with the mean delta and the requests of
largest TTFT change.  Values are compared exactly: the replay is
deterministic, so the same config gives no difference at all.
"""
from __future__ import annotations

import orjson

from . import data, figures, page
from .figures import salt_of

REQUEST_FIELDS = ("ttft_ms", "itl_ms", "e2e_latency_ms", "reused_input_tokens", "first_admission_reused_input_tokens",
                  "admission_count", "output_length", "terminal_status")
LARGEST = 10
SAMPLES = ("itl_gap_counts_ns",)  # (every field but this one: thousands of [gap, count] pairs)

def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _delta(a, b) -> dict:
    entry = {"a": a, "b": b}
    if _number(a) and _number(b):
        entry["delta"] = b - a
        entry["relative"] = (b - a) / abs(a) if a else None
    return entry


def _keyed(run) -> dict:
    out, seen = {}, {}
    for r in run.requests:
        rid = str(r.get("id", r.get("index")))
        n = seen[rid] = seen.get(rid, 0) + 1
        out[rid if n == 1 else f"{rid}#{n}"] = r
    return out


def compare_requests(a, b) -> dict:
    ka, kb = _keyed(a), _keyed(b)
    matched = [k for k in ka if k in kb]
    fields = {}
    differing = set()
    for name in REQUEST_FIELDS:
        changed = [k for k in matched if ka[k].get(name) != kb[k].get(name)]
        differing.update(changed)
        deltas = [kb[k][name] - ka[k][name] for k in matched
                  if _number(ka[k].get(name)) and _number(kb[k].get(name))]
        fields[name] = {"differing": len(changed), "mean_delta": sum(deltas) / len(deltas) if deltas else None}
    ttft = [(kb[k]["ttft_ms"] - ka[k]["ttft_ms"], k) for k in matched
            if _number(ka[k].get("ttft_ms")) and _number(kb[k].get("ttft_ms"))]
    ttft.sort(key=lambda pair: (-abs(pair[0]), pair[1]))
    largest = [{"id": k, "ttft_a_ms": ka[k]["ttft_ms"], "ttft_b_ms": kb[k]["ttft_ms"], "delta_ms": d}
               for d, k in ttft[:LARGEST] if d]
    return {"matched": len(matched), "only_in_a": len(ka) - len(matched), "only_in_b": len(kb) - len(matched),
            "differing": len(differing), "fields": fields, "largest_ttft_changes": largest}


def compare(a, b) -> dict:
    fa, fb = dict(data.flatten(a.summary, skip=SAMPLES)), dict(data.flatten(b.summary, skip=SAMPLES))
    keys = sorted(set(fa) | set(fb))
    changed = {k: _delta(fa.get(k), fb.get(k)) for k in keys if fa.get(k) != fb.get(k)}
    requests = compare_requests(a, b) if a.has_requests and b.has_requests else None
    identical = not changed and (requests is None or not (requests["differing"] or requests["only_in_a"]
                                                          or requests["only_in_b"]))
    return {"identical": identical, "summary_fields_compared": len(keys), "summary": changed, "requests": requests}


def json_text(result: dict, a, b) -> str:
    return orjson.dumps({"a": a.path.as_posix(), "b": b.path.as_posix(), **result},
                        option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode() + "\n"


def _show(value) -> str:
    return page.fmt(value).replace("&#x27;", "'")


def text(result: dict, a, b) -> str:
    lines = [f"A: {a.path.as_posix()}", f"B: {b.path.as_posix()}"]
    if result["identical"]:
        lines.append(f"no difference ({result['summary_fields_compared']} summary fields"
                     + (f", {result['requests']['matched']} requests)" if result["requests"] else ")"))
        return "\n".join(lines) + "\n"
    lines.append(f"summary: {len(result['summary'])} of {result['summary_fields_compared']} fields differ")
    for key, entry in result["summary"].items():
        change = f"  {_show(entry.get('delta'))} ({entry['relative']:+.2%})" if entry.get("relative") is not None \
            else f"  {_show(entry.get('delta'))}" if "delta" in entry else ""
        lines.append(f"  {key}: {_show(entry['a'])} -> {_show(entry['b'])}{change}")
    requests = result["requests"]
    if requests is None:
        lines.append("requests: not compared (a run has no requests.jsonl)")
    else:
        lines.append(f"requests: {requests['matched']} matched, {requests['differing']} differ, "
                     f"{requests['only_in_a']} only in A, {requests['only_in_b']} only in B")
        for name, entry in requests["fields"].items():
            if entry["differing"]:
                lines.append(f"  {name}: {entry['differing']} differ, mean delta {_show(entry['mean_delta'])}")
        for entry in requests["largest_ttft_changes"]:
            lines.append(f"  TTFT {entry['id']}: {_show(entry['ttft_a_ms'])} -> {_show(entry['ttft_b_ms'])} ms")
    return "\n".join(lines) + "\n"


def _overlaid(a, b) -> list[tuple[str, str]]:
    if not (a.has_requests and b.has_requests):
        return []
    body = []
    for label, field in data.LATENCIES:
        title = f"{label} CDF, A and B"
        svg = figures.cdf(salt_of(title), [(f"A {a.name}", data.latency(a, field)),
                                           (f"B {b.name}", data.latency(b, field))], f"{label} (ms)")
        body.append(page.figure(svg, title))
    span = max(data.span_ms(a), data.span_ms(b))
    (xs, ra), (_, rb) = data.reuse_ratio_bins(a, span), data.reuse_ratio_bins(b, span)
    title = "Prompt reuse over time, A and B"
    body.append(page.figure(figures.lines(salt_of(title), xs, [("A", ra), ("B", rb)], "first admission (s)",
                                          "reused fraction of prompt tokens", step=True), title))
    out = [("Overlaid distributions", "".join(body))]
    if a.timeline and b.timeline:
        ta, tb = data.timeline_series(a), data.timeline_series(b)
        title = "G1 held by requests, A and B"
        svg = figures.render(salt_of(title), lambda ax: (ax.step(ta["t"], ta["g1_held"], where="post", label="A"),
                                                         ax.step(tb["t"], tb["g1_held"], where="post", label="B"),
                                                         ax.set_xlabel("virtual time (s)"),
                                                         ax.set_ylabel("fraction of G1"), ax.legend()))
        out.append(("Occupancy, A and B", page.figure(svg, title)))
    return out


def html(result: dict, a, b) -> str:
    rows = [[k, e["a"], e["b"], e.get("delta"), e.get("relative")] for k, e in result["summary"].items()]
    verdict = "no difference" if result["identical"] else f"{len(rows)} summary fields differ"
    sections = [("Summary deltas", page.note(verdict) + page.table(["field", "A", "B", "B - A", "relative"], rows))]
    requests = result["requests"]
    if requests is not None:
        counts = page.table(["matched", "differing", "only in A", "only in B"],
                            [[requests["matched"], requests["differing"], requests["only_in_a"],
                              requests["only_in_b"]]])
        fields = page.table(["field", "requests differing", "mean delta"],
                            [[n, e["differing"], e["mean_delta"]] for n, e in requests["fields"].items()])
        largest = page.table(["id", "TTFT A (ms)", "TTFT B (ms)", "B - A"],
                             [[e["id"], e["ttft_a_ms"], e["ttft_b_ms"], e["delta_ms"]]
                              for e in requests["largest_ttft_changes"]])
        sections.append(("Per-request deltas", counts + fields + largest))
    sections += _overlaid(a, b)
    return page.page(f"kvreplay diff: {a.name} vs {b.name}", f"A = {a.path.as_posix()}, B = {b.path.as_posix()}; "
                     "deltas are B - A", sections)
