"""Ops (golden op families) each device backend does not run yet, with the reason.
Kept as data so the gap is visible in one place; the CPU backend has no entries."""

CUDA_SKIPS = {
    "dsv4_hc_comb": "dsv4 hyper-connection kernels not written for CUDA yet",
    "dsv4_hc_pre": "dsv4 hyper-connection kernels not written for CUDA yet",
    "dsv4_hc_pre_gated": "dsv4 hyper-connection kernels not written for CUDA yet",
    "dsv4_hc_post": "dsv4 hyper-connection kernels not written for CUDA yet",
    "lightning_indexer": "lightning indexer kernel not written for CUDA yet",
    "ssm_conv": "ssm kernels not written for CUDA yet",
    "ssm_scan": "ssm kernels not written for CUDA yet",
    "argsort": "sort kernels not written for CUDA yet",
    "top_k": "sort kernels not written for CUDA yet",
    "cumsum": "reduce kernels not written for CUDA yet",
    "sum_rows": "reduce kernels not written for CUDA yet",
    "mean": "reduce kernels not written for CUDA yet",
    "concat": "concat kernel not written for CUDA yet",
    **{op: "not written for CUDA yet" for op in (
        "log", "sin", "cos", "leaky_relu", "xielu", "sum", "argmax", "count_equal", "acc", "set",
        "add1", "add_id", "diag", "diag_mask_inf", "diag_mask_zero", "roll", "pad_reflect_1d",
        "timestep_embedding", "l2_norm", "group_norm", "out_prod", "solve_tri", "soft_max_ext_back")},
}


def skip_reason(backend: str, op: str):
    if backend.startswith("cuda"):
        return CUDA_SKIPS.get(op)
    return None
