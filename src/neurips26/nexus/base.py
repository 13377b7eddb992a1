"""Records shared by the optimizers and measurements (a leaf module: imports nothing of the package)."""

from __future__ import annotations

from typing import Any, NamedTuple


class MicroBatch(NamedTuple):
    """One micro-batch tagged with the source its sequences come from (``"mixed"`` for the control)."""

    source: str
    data: Any


def check_step_inputs(micro_batches: Any, loss_fn: Any, sources: "tuple[str, ...] | None" = None,
                      require_all_sources: bool = False) -> "list[tuple[MicroBatch, Any]]":
    """The micro-batches of one outer step paired with their loss functions, validated.

    micro_batches: a non-empty sequence of ``MicroBatch`` (or ``(source, data)`` pairs).
    loss_fn:       one callable ``loss_fn(data) -> scalar tensor`` for all, or one per micro-batch.
    sources:       the known source names; a micro-batch tagged otherwise is refused.
    """
    if loss_fn is None:
        raise TypeError("loss_fn is required: step(micro_batches, loss_fn) needs a loss function "
                        "(a callable data -> scalar loss, or one per micro-batch)")
    try:
        mbs = [MicroBatch(*mb) for mb in micro_batches]
    except TypeError:
        raise TypeError("micro_batches must be a sequence of MicroBatch(source, data) or (source, data) "
                        "pairs") from None
    if not mbs:
        raise ValueError("micro_batches must hold at least one micro-batch (K >= 1)")
    if callable(loss_fn):
        fns = [loss_fn] * len(mbs)
    else:
        fns = list(loss_fn)
        if len(fns) != len(mbs) or not all(callable(f) for f in fns):
            raise TypeError(f"loss_fn must be a callable or a sequence of {len(mbs)} callables, one per "
                            f"micro-batch")
    if sources is not None:
        for k, mb in enumerate(mbs):
            if mb.source not in sources:
                raise ValueError(f"micro-batch {k} is tagged with unknown source {mb.source!r}; "
                                 f"known sources: {list(sources)}")
        if require_all_sources and len(mbs) < len(sources):
            raise ValueError(f"K = {len(mbs)} micro-batches cannot cover all {len(sources)} sources "
                             f"(require_all_sources=True)")
    return list(zip(mbs, fns))
