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
    **{op: "conv kernels not written for CUDA yet" for op in (
        "im2col", "conv_2d", "conv_2d_dw", "conv_transpose_1d", "conv_transpose_2d")},
    "pool_1d": "pool kernels not written for CUDA yet",
    "pool_2d": "pool kernels not written for CUDA yet",
    "upscale": "upscale kernel not written for CUDA yet",
    **{op: "window kernels not written for CUDA yet" for op in (
        "win_part", "win_unpart", "get_rel_pos", "add_rel_pos")},
    **{op: "linear attention kernels not written for CUDA yet" for op in (
        "gated_linear_attn", "rwkv_wkv6", "rwkv_wkv7")},
    "gated_delta_net": "delta-net kernel not written for CUDA yet",
}


def skip_reason(backend: str, op: str):
    if backend.startswith("cuda"):
        return CUDA_SKIPS.get(op)
    return None
