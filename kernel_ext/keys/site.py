"""Where the user asked for a key: the innermost frame of user code, as a person reads it.

::

    where = user_site()   # Site("In[3], line 2", "In[3]", "k1, k2 = jax.random.split(k)")

Frames of jaxlab, JAX, the standard library and installed packages (equinox, flax nnx,
optax, ...) are skipped, so a split inside ``nnx.Rngs`` is charged to the user's line
that called it. Which files are user code is decided once per file and cached: the
wrappers ask on every call of every ``jax.random`` function.
"""

from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import CodeType, FrameType

from ..explain.source import is_user_file, label

_USER_FILE: dict[str, bool] = {}
_MAX_DEPTH = 64  # frames searched before giving up (deep library stacks)


@dataclass(frozen=True)
class Site:
    """A user's line: ``where`` (``In[3], line 2``), its cell (``In[3]``) and its text."""

    where: str
    cell: str | None
    code: str
    filename: str = ""
    lineno: int = 0
    via: str = ""  # the library's line that called jax.random, when not the user's own

    @classmethod
    def unknown(cls) -> Site:
        """The one site of calls whose line is not known (a records' list of sites holds
        it once)."""
        return _UNKNOWN


def is_user(filename: str) -> bool:
    """Whether ``filename`` holds user code (cached per file)."""
    found = _USER_FILE.get(filename)
    if found is None:
        found = is_user_file(filename) and not filename.startswith("<jaxlab")
        if len(_USER_FILE) > 4096:  # cells are files too: keep the cache bounded
            _USER_FILE.clear()
        _USER_FILE[filename] = found
    return found


_UNKNOWN = Site("unknown line", None, "")
_SITES: dict[tuple[str, int], Site] = {}
# (id(code), instruction offset) -> (code, site): a wrapper looks here first
SPOTS: dict[tuple[int, int], tuple[CodeType, Site]] = {}


def site_of(filename: str, lineno: int) -> Site:
    """The :class:`Site` of a file and line (cells named as IPython names them)."""
    found = _SITES.get((filename, lineno))
    if found is None:
        if len(_SITES) > 4096:
            _SITES.clear()
        found = _SITES[(filename, lineno)] = _site(filename, lineno)
    return found


def _site(filename: str, lineno: int) -> Site:
    where = label(filename, lineno)
    cell = where.split(",")[0] if where.startswith("In[") else None
    code = linecache.getline(filename, lineno).strip()
    return Site(where, cell, code, filename, lineno)


def user_site(start: FrameType | None = None) -> Site:
    """The user's line that (through any library) called the caller: the innermost frame
    of user code (jaxlab's and libraries' skipped), searched from ``start`` (a wrapper
    passes its caller's frame) or from the caller's own frame. Asked on every tracked
    call: one function, the caches read in line."""
    frame: FrameType | None = sys._getframe(1) if start is None else start
    via = None  # ``start``, when a library's frame: the line of its that made the call
    for _ in range(_MAX_DEPTH):
        if frame is None:
            break
        filename = frame.f_code.co_filename
        user = _USER_FILE.get(filename)
        if user if user is not None else is_user(filename):
            # by the instruction: a frame computes its line number from a table, each time
            code, spot = frame.f_code, (id(frame.f_code), frame.f_lasti)
            found = SPOTS.get(spot)
            if found is not None and found[0] is code:
                return found[1] if via is None else _through(found[1], via)
            site = site_of(filename, frame.f_lineno)
            if len(SPOTS) > 4096:
                SPOTS.clear()
            SPOTS[spot] = (code, site)  # the code held: its id is no other's meanwhile
            return site if via is None else _through(site, via)
        if via is None and start is not None and frame is start:
            via = frame if not filename.startswith(OWN_CODE) else None
        frame = frame.f_back
    return Site.unknown()


# jaxlab's own files, and code made at run time (a %%jit cell's "<jaxlab cell>": the user's):
# never a library's line
OWN_CODE = (str(Path(__file__).resolve().parents[1]), "<")
_THROUGH: dict[tuple[int, str], Site] = {}  # (id(site), via) -> the site with it


def _through(site: Site, frame: FrameType) -> Site:
    """``site`` reached through a library's line (``frame``, the caller of jax.random)."""
    via = site_of(frame.f_code.co_filename, frame.f_lineno).where
    found = _THROUGH.get((id(site), via))
    if found is None or found.where != site.where:  # (an id of a site gone: another's)
        if len(_THROUGH) > 4096:
            _THROUGH.clear()
        found = _THROUGH[(id(site), via)] = replace(site, via=via)
    return found
