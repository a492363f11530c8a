"""A notebook's saved widget state: withheld from the page, kept on disk.

JupyterLab's widget manager restores every model in ``metadata.widgets`` when it opens a
notebook, trusted or not, and anywidget imports a model's ``_esm`` (and injects its
``_css``) as the model is made: a notebook saved by someone else runs their code. So the
server sends an untrusted notebook without its widget state (:func:`withhold`), and when
the page saves it, puts back what the page did not send (:func:`keep_withheld`)::

    nb = {"metadata": {"widgets": {WIDGET_STATE: {"state": {"a1": {...}}}}}, "cells": [...]}
    withhold(nb)                # 1 (models held back); nb["metadata"] has no "widgets"
    keep_withheld(saved, disk)  # the models on disk that the saved outputs still show

Only the models the saved notebook still shows are kept (a widget-view output's
``model_id``, and every ``IPY_MODEL_`` reference inside a kept model's state, followed
to the end): a model no output shows is never restored into view, and a notebook signed
later (every cell trusted) must not carry a stranger's model that nothing displays.
"""

from __future__ import annotations

from typing import Any

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_REFERENCE = "IPY_MODEL_"
_MAX_DEPTH = 200  # saved state is JSON from a file: nesting is bounded, never recursed on


def _state_block(nb: dict[str, Any]) -> dict[str, Any] | None:
    """The widget state as ipywidgets writes it (``version_major``, ``version_minor``,
    ``state``), or None."""
    metadata = nb.get("metadata")
    widgets = metadata.get("widgets") if isinstance(metadata, dict) else None
    block = widgets.get(WIDGET_STATE) if isinstance(widgets, dict) else None
    return block if isinstance(block, dict) else None


def saved_models(nb: dict[str, Any]) -> dict[str, Any]:
    """The models of a notebook's saved widget state (``{}`` when it has none or the
    state is not the mapping ipywidgets writes)."""
    block = _state_block(nb)
    models = block.get("state") if block is not None else None
    return models if isinstance(models, dict) else {}


def withhold(nb: dict[str, Any]) -> int:
    """Remove the notebook's saved widget state; the number of models it held."""
    metadata = nb.get("metadata")
    if not isinstance(metadata, dict) or "widgets" not in metadata:
        return 0
    count = len(saved_models(nb))
    del metadata["widgets"]
    return count


def _references(value: Any) -> set[str]:
    """Every model id that ``value`` names: ``IPY_MODEL_<id>`` strings and widget-view
    outputs' ``model_id`` (an Output widget's state holds outputs too)."""
    found: set[str] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > _MAX_DEPTH:
            continue
        if isinstance(item, str):
            if item.startswith(_REFERENCE):
                found.add(item[len(_REFERENCE) :])
        elif isinstance(item, dict):
            view = item.get(WIDGET_VIEW)
            if isinstance(view, dict) and isinstance(view.get("model_id"), str):
                found.add(view["model_id"])
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return found


def shown_models(nb: dict[str, Any], models: dict[str, Any]) -> set[str]:
    """The ids among ``models`` that ``nb``'s outputs show, directly or through the
    state of a model they show."""
    outputs = [cell.get("outputs", []) for cell in nb.get("cells", []) if isinstance(cell, dict)]
    shown: set[str] = set()
    todo = _references(outputs) & models.keys()
    while todo:
        model_id = todo.pop()
        shown.add(model_id)
        todo |= (_references(models[model_id]) & models.keys()) - shown
    return shown


def keep_withheld(saved: dict[str, Any], disk: dict[str, Any]) -> int:
    """Put into ``saved`` (a notebook the page is saving) the models of ``disk`` (the
    copy it replaces, whose state a page that opened it untrusted never had) that
    ``saved``'s outputs still show. A model the page sends wins over the one on disk.
    Returns how many were put back."""
    withheld = saved_models(disk)
    kept = shown_models(saved, withheld) - saved_models(saved).keys()
    if not kept:
        return 0
    block = _state_block(saved)
    if block is None:  # the page saves no widget state (the manager's saveState is off)
        versions = {k: v for k, v in (_state_block(disk) or {}).items() if k != "state"}
        block = {**versions, "state": {}}
        metadata = saved.setdefault("metadata", {})
        if not isinstance(metadata.get("widgets"), dict):
            metadata["widgets"] = {}
        metadata["widgets"][WIDGET_STATE] = block
        block = metadata["widgets"][WIDGET_STATE]  # a NotebookNode stores a copy
    if not isinstance(block.get("state"), dict):
        block["state"] = {}
    state = block["state"]
    for model_id in sorted(kept):
        state[model_id] = withheld[model_id]
    return len(kept)
