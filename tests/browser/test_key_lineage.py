"""KeyLineage in JupyterLab: it renders the forest, marks reuse, and a click shows lines;
forged saved state and patches never hang or break the page."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.browser


CELLS = [
    "%load_ext jaxlab\n%keys on\nimport jax, warnings\nwarnings.simplefilter('ignore')",
    "k = jax.random.key(0)\n"
    "a, b = jax.random.split(k)\n"
    "x = jax.random.normal(a, (3,))\n"
    "y = jax.random.uniform(a, (2,))",
    "%keys",
]


def test_key_lineage_renders_and_a_click_shows_the_source_line(
    open_notebook: Any, page: Any
) -> None:
    notebook = open_notebook("keys.ipynb", CELLS)
    for i in range(len(CELLS)):
        notebook.run(i)
        notebook.wait_idle()
    row = page.locator('.jaxlab-kl-row[data-id="k1"]')  # the split's first key
    row.wait_for()  # the widget rendered (the static list has no data-id)
    assert row.locator(".jaxlab-kl-label").inner_text() == "split [0]"
    assert "jaxlab-kl-reused" in (row.locator(".jaxlab-kl-label").get_attribute("class") or "")
    assert "1 reuse" in page.locator(".jaxlab-kl-summary").inner_text()
    assert page.locator(".jaxlab-kl-consume").count() == 2  # normal and uniform

    row.click()
    detail = page.locator(".jaxlab-kl-detail")
    text = detail.inner_text()
    assert "Made at In[2], line 2" in text
    assert "a, b = jax.random.split(k)" in text
    assert "Consumed by normal float32[3] at In[2], line 3" in text
    assert "y = jax.random.uniform(a, (2,))" in text

    page.locator('.jaxlab-kl-row[data-id="k0"] .jaxlab-kl-toggle').click()  # collapse the seed
    page.wait_for_function(
        "() => !document.querySelector('.jaxlab-kl-row[data-id=\"k1\"]')?.offsetParent"
    )
    assert page.requests.outside() == []


# ---------------------------------------------------------------- forged saved state
# Every reader of saved or sent state in key_lineage.js is total and bounded (issue 32):
# the module is imported from its source into a blank page and rendered with plain
# JavaScript models, one per forgery; a case may then deliver forged patches (the
# kernel's custom messages). The page must answer after every case, nothing may escape
# the module, and the view is drawn (its twin hidden by the view) or says it could not.

RENDER_CASES = """async ([source, cases]) => {
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  window.__results = [];
  window.__done = false;
  const twin = "0123456789abcdef0123456789abcdef";
  const run = async (i) => {
    if (i >= cases.length) { window.__done = true; return; }
    const [name, stateText, patchesText] = cases[i];
    console.log(`case ${i} start: ${name}`);
    const record = { name, returned: false, thrown: null, sent: [] };
    const t0 = performance.now();
    try {
      const state = JSON.parse(stateText);
      const handlers = new Map();
      const model = {
        get: (k) => state[k],
        set: (k, v) => {
          state[k] = v;
          for (const f of [...(handlers.get(`change:${k}`) || [])]) f();
        },
        on: (e, f) => { if (!handlers.has(e)) handlers.set(e, new Set()); handlers.get(e).add(f); },
        off: (e, f) => handlers.get(e)?.delete(f),
        save_changes() {},
        send: (m) => record.sent.push(JSON.stringify(m).slice(0, 200)),
      };
      const box = document.createElement("section");
      box.innerHTML = `<div class="view"></div>` +
        `<div class="jaxlab-twin" data-jaxlab-twin="${twin}">saved twin</div>`;
      document.body.replaceChildren(box);
      const el = box.querySelector(".view");
      await widget.render({ model, el });
      record.returned = true;
      for (const patch of JSON.parse(patchesText)) {
        for (const f of [...(handlers.get("msg:custom") || [])]) f(patch, []);
      }
      record.twin = getComputedStyle(box.querySelector(".jaxlab-twin")).display !== "none";
      record.error = el.querySelector(".jaxlab-error")?.textContent ?? null;
      record.rows = el.querySelectorAll(".jaxlab-kl-row").length;
      record.summary = el.querySelector(".jaxlab-kl-summary")?.textContent ?? null;
      const rev = state.state && state.state.rev;
      record.rev = typeof rev === "number" ? rev : null;
    } catch (err) {
      record.thrown = String((err && err.stack) || err);
    }
    record.ms = performance.now() - t0;
    window.__results.push(record);
    setTimeout(() => run(i + 1), 0);
  };
  setTimeout(() => run(0), 0);
}"""

DEEP = "__deep__"
BAD = [None, 0, -1, 1e308, "<b>x</b>", True, [], {}, [None, None], DEEP]


def _row(i: int, parent: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": f"k{i}", "parent": parent, "kind": "key", "label": f"split [{i}]",
            "where": "In[2], line 2", "code": "a, b = split(k)", "cell": "In[2]",
            "reused": False, "count": 1, "traced": False, **extra}  # fmt: skip


def _good() -> dict[str, Any]:
    items = [_row(0), _row(1, "k0"), _row(2, "k0")]
    summary = {"keys": 3, "events": 2, "reuses": 0, "unseen": 0, "hidden": 0,
               "by_site": False, "dropped": 0, "cells": ["In[2]"]}  # fmt: skip
    state = {"rev": 1, "items": items, "reuses": [], "summary": summary}
    return {"state": state, "max_items": 2000, "expanded": "", "detail": [],
            "_twin_id": "0123456789abcdef0123456789abcdef"}  # fmt: skip


def _with(good: dict[str, Any], **state: Any) -> dict[str, Any]:
    return {**good, "state": {**good["state"], **state}}


def _cases() -> list[tuple[str, dict[str, Any], list[Any]]]:
    good = _good()
    rows = good["state"]["items"]
    cases: list[tuple[str, dict[str, Any], list[Any]]] = [("good", good, [])]
    for bad in BAD:
        cases.append((f"state = {bad!r}", {**good, "state": bad}, []))
        cases.append((f"detail = {bad!r}", {**good, "detail": bad}, []))
        for key in ("rev", "items", "reuses", "summary"):
            cases.append((f"{key} = {bad!r}", _with(good, **{key: bad}), []))
        for field in ("id", "parent", "kind", "label", "where", "count", "cell", "reused"):
            forged = [{**rows[0], field: bad}, *rows[1:]]
            cases.append((f"a row's {field} = {bad!r}", _with(good, items=forged), []))
        for field in ("keys", "hidden", "cells", "by_site"):
            summary = {**good["state"]["summary"], field: bad}
            cases.append((f"summary {field} = {bad!r}", _with(good, summary=summary), []))
    cycle = [_row(0, "k1"), _row(1, "k0"), _row(2, "k2")]  # parents later, itself
    chain = [_row(i, f"k{i - 1}" if i else None) for i in range(5000)]  # 5,000 deep
    cases += [
        ("parents in a cycle", _with(good, items=cycle), []),
        ("a chain 5,000 deep", _with(good, items=chain), []),
        ("20,000 rows", _with(good, items=[_row(i) for i in range(20_000)]), []),
        ("one id 1,000 times", _with(good, items=[_row(0)] * 1000), []),
        ("a label of 10^5 characters", _with(good, items=[_row(0, label="x" * 10**5)]), []),
        ("20,000 cells", _with(good, summary={"cells": [f"In[{i}]" for i in range(20_000)]}), []),
        ("a huge rev", _with(good, rev=2**80), []),
    ]
    # patches: the kernel's custom messages, forged
    ok = {"kind": "patch", "base": 1, "rev": 2, "rows": [_row(3, "k1")], "gone": [],
          "order": ["k0", "k1", "k3", "k2"], "summary": good["state"]["summary"]}  # fmt: skip
    cases.append(("a good patch", good, [ok]))
    cases.append(("a patch that does not follow", good, [{**ok, "base": 7, "rev": 8}]))
    for key in ("base", "rev", "rows", "gone", "order", "summary", "reuses", "kind"):
        for bad in BAD:
            cases.append((f"patch {key} = {bad!r}", good, [{**ok, key: bad}]))
    cases += [
        ("patch order of 10^5 ids", good, [{**ok, "order": [f"x{i}" for i in range(10**5)]}]),
        ("patch gone of 10^5 ids", good, [{**ok, "gone": [f"k{i}" for i in range(10**5)]}]),
        ("patch rows 20,000", good, [{**ok, "rows": [_row(i) for i in range(20_000)]}]),
        ("a full patch of garbage", good, [{"kind": "patch", "base": None, "rows": DEEP}]),
        ("patches not objects", good, [None, 3, "patch", [ok], DEEP]),
    ]  # fmt: skip
    return cases


def _json(value: Any) -> str:
    deep = "[" * 3000 + "1" + "]" * 3000
    return json.dumps(value).replace(json.dumps(DEEP), deep)


def test_every_forged_state_and_patch_leaves_the_page_responsive(page: Any) -> None:
    page.goto("about:blank")
    cases = _cases()
    started: list[str] = []
    errors: list[str] = []
    page.on("console", lambda m: started.append(m.text) if m.text.startswith("case ") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    from jaxlab.widgets._base import module_source

    source = module_source("key_lineage")  # as the page gets it: the shared _view.js first
    page.evaluate(RENDER_CASES, [source, [[n, _json(s), _json(p)] for n, s, p in cases]])
    try:
        page.wait_for_function("() => window.__done === true", timeout=120_000)
    except Exception as err:  # the page hung: say where
        raise AssertionError(f"the page stopped answering at {started[-1:]}") from err
    results = {r["name"]: r for r in page.evaluate("() => window.__results")}
    assert page.evaluate("() => 1 + 1") == 2 and errors == [], errors
    assert list(results) == [name for name, _, _ in cases]
    for r in results.values():
        assert r["thrown"] is None and r["returned"], r
        if r["error"] is not None:  # never blank: a note and the twin, or a drawing
            assert r["twin"], r
        else:
            assert r["summary"] is not None and not r["twin"], r
    assert results["good"]["rows"] == 3 and results["good"]["summary"].startswith("3 keys")
    assert results["a good patch"]["rows"] == 4 and results["a good patch"]["rev"] == 2
    # a patch that does not follow the state held asks for the whole state
    assert '{"kind":"sync"}' in results["a patch that does not follow"]["sent"][1:]
    assert results["a patch that does not follow"]["rev"] == 1
    assert results["parents in a cycle"]["rows"] == 3
    assert results["a chain 5,000 deep"]["rows"] == 5000
    assert results["20,000 rows"]["rows"] == 5000  # bounded
    assert results["one id 1,000 times"]["rows"] == 1
    assert results["state = '<b>x</b>'"]["summary"].startswith("0 keys")
    assert results["patch rows 20,000"]["rev"] == 2  # applied, the order kept bounded
    assert results["patch base = None"]["rev"] == 2  # a full patch (of the good rows)
