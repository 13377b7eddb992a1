"""Seed corpus (CPython's ``pydoc_data`` help topics, no download) and corpus-scale scoring.

``pydoc_topics()``: the 79 help topics of ``pydoc_data.topics`` sorted by name (~465k characters of
English prose); fallback when the module is absent: docstrings of stdlib modules (``inspect.getdoc``).
Topic i goes to domain i mod 4.

``score_corpus(texts, n_jobs)`` / ``iter_scores``: Ĥ_K of every document, embarrassingly parallel over a
``concurrent.futures.ProcessPoolExecutor`` (order preserved, streamed in chunks). This is the one place
the folder does not use ``harness.parallel.map_tasks``: ``map_tasks`` takes the whole task list and
returns every result at the end, while ``iter_scores`` must *stream* (``neurips26 entropy-filter score``
reads a JSONL corpus of any size and writes each scored record as soon as its chunk is done, holding at
most ``2 * n_jobs`` chunks in memory). The worker count follows the harness's ``default_workers``.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import re
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Any, Iterable, Iterator

from neurips26.entropy_filter.estimators import hk
from neurips26.harness.parallel import default_workers
from neurips26.harness.validation import check_choice, check_scalar

N_DOMAINS = 4
DOMAIN_NAMES = ("encyclopedic", "creative", "scientific", "conversational")  # labels only

_FALLBACK_MODULES = ("os", "re", "json", "collections", "itertools", "functools", "pathlib", "typing",
                     "argparse", "logging", "subprocess", "threading", "asyncio", "inspect", "string",
                     "datetime", "decimal", "fractions", "random", "statistics", "unittest", "zipfile",
                     "tarfile", "csv", "sqlite3", "email", "http.client", "urllib.request", "xml.dom",
                     "shutil", "tempfile", "socket", "struct", "textwrap", "heapq", "bisect", "array",
                     "queue", "sched", "contextlib", "abc", "enum", "dataclasses", "copy", "pickle")


_RULE_LINE = re.compile(r"^[ \t]*([*=\-~^_#+])\1{2,}[ \t]*$", re.MULTILINE)


def strip_markup(text: str) -> str:
    """Remove reStructuredText heading rules (lines of one repeated punctuation character, e.g.
    ``*****`` or ``-----``): markup, not prose; as single-character LM tokens they would dominate the
    toy generator's collapse (ASSUMPTION; ``pydoc_topics(clean=False)`` keeps them)."""
    return _RULE_LINE.sub("", text)


def pydoc_topics(clean: bool = True) -> list[tuple[str, str]]:
    """[(topic name, text)] sorted by name: pydoc_data.topics, else stdlib module docstrings.

    clean: drop reStructuredText heading rules (``strip_markup``).
    """
    try:
        from pydoc_data.topics import topics

        return sorted((k, strip_markup(v) if clean else v) for k, v in topics.items())
    except ImportError:  # pragma: no cover - depends on the Python build
        out = []
        for name in _FALLBACK_MODULES:
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            parts = [inspect.getdoc(mod) or ""]
            for _, obj in inspect.getmembers(mod):
                if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "") == name:
                    parts.append(inspect.getdoc(obj) or "")
            text = "\n\n".join(p for p in parts if p)
            if text:
                out.append((name, text))
        return sorted(out)


def domain_of(topic_index: int) -> int:
    """Topic i (sorted by name) belongs to domain i mod 4."""
    return topic_index % N_DOMAINS


# --------------------------------------------------------------------------------------------------
# corpus-scale scoring
# --------------------------------------------------------------------------------------------------

def _score_one(text: Any, on_error: str = "null", **kw: Any) -> float | None:
    if on_error == "null" and not isinstance(text, str):
        return None  # a bad record scores None: it never sinks the batch
    return hk(text, **kw)


def _score_chunk(texts: list[str], kw: dict[str, Any], on_error: str = "null") -> list[float | None]:
    return [_score_one(t, on_error, **kw) for t in texts]


def _chunks(it: Iterable[Any], size: int) -> Iterator[list[Any]]:
    it = iter(it)
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk


def iter_scores(texts: Iterable[str], n_jobs: int = 1, chunk_size: int = 64, on_error: str = "null",
                **hk_kwargs: Any) -> Iterator[float | None]:
    """Stream Ĥ_K scores of ``texts`` in input order; ``n_jobs`` worker processes (1: in-process).

    on_error:  ``"null"`` (default): a record that is not a string (None, a number) scores None like a
               document too short to score, so one bad record never sinks a batch; ``"raise"``: TypeError.
    hk_kwargs go to ``hk`` (tokenizer, n_trunc, min_tokens, estimator, overlap, ...).
    """
    check_choice(on_error, "on_error", ("null", "raise"))
    if n_jobs != -1:
        check_scalar(n_jobs, "n_jobs (a positive int, or -1 for all cores)", int, min=1)
    check_scalar(chunk_size, "chunk_size", int, min=1)
    if n_jobs == -1:
        n_jobs = default_workers()
    # validate the options once, up front, on a dummy document
    _score_one("", **hk_kwargs)
    if n_jobs == 1:
        for chunk in _chunks(texts, chunk_size):
            yield from _score_chunk(chunk, hk_kwargs, on_error)
        return
    fn = partial(_score_chunk, kw=hk_kwargs, on_error=on_error)
    with ProcessPoolExecutor(max_workers=n_jobs) as pool:
        # bounded look-ahead: at most 2 * n_jobs chunks in flight, results in order
        pending = []
        for chunk in _chunks(texts, chunk_size):
            pending.append(pool.submit(fn, chunk))
            if len(pending) >= 2 * n_jobs:
                yield from pending.pop(0).result()
        for fut in pending:
            yield from fut.result()


def score_corpus(texts: Iterable[str], n_jobs: int = 1, chunk_size: int = 64, on_error: str = "null",
                 **hk_kwargs: Any) -> list[float | None]:
    """Ĥ_K (bits/token; None for short documents and, with ``on_error="null"``, for records that are not
    strings) of every text, in order; parallel over processes."""
    return list(iter_scores(texts, n_jobs=n_jobs, chunk_size=chunk_size, on_error=on_error, **hk_kwargs))
