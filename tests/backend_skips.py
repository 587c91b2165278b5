"""Which graphs a backend cannot run, asked from the backend itself (Backend.unsupported_reason,
the same answer Graph.compute refuses with before anything runs); nothing here is kept as data."""
import pyggml as gg


def unsupported_nodes(backend: str, *outputs) -> list:
    """(op, reason) for every node of the graph of `outputs` that `backend` (a device such as
    'cuda:0', or a kind such as 'cuda', answerable without a device) cannot compute."""
    ctx_holder = gg.Context(1 << 16, no_alloc=True)
    g = gg.Graph(ctx_holder)
    for t in outputs:
        g.build_forward_expand(t)
    out = []
    for node in g.nodes:
        why = gg.backend_unsupported_reason(backend, node)
        if why:
            out.append((node.op, why))
    return out


def skip_reason(backend: str, *outputs):
    """A pytest skip reason when `backend` cannot compute the graph of `outputs`, else None."""
    if backend == "cpu":
        return None
    missing = unsupported_nodes(backend, *outputs)
    if not missing:
        return None
    return "; ".join(f"{op}: {why}" for op, why in missing)
