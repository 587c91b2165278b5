"""The feed-forward builders of the graph context (llama.cpp's build_ffn / build_moe_ffn):
dense FFNs with their gate and activation variants, and routed experts with their gating,
weighting and SWIGLU clamps. `GraphContext` (graph.py) mixes them in; they use its `ctx0`,
`cb`, `expand`, `build_lora_mm` and `build_lora_mm_id`."""
from __future__ import annotations

import math
from enum import IntEnum

import pyggml as gg


class FfnOp(IntEnum):               # llm_ffn_op_type
    SILU = 0
    GELU = 1
    RELU = 2
    RELU_SQR = 3
    SWIGLU = 4                      # one tensor, halves = gate | linear
    GEGLU = 5
    REGLU = 6
    SWIGLU_OAI_MOE = 7


class FfnGate(IntEnum):             # llm_ffn_gate_type
    SEQ = 0                         # gate(up(x))
    PAR = 1                         # gate(x) next to up(x)


class ClampMode(IntEnum):
    """SWIGLU clamp semantics: clamp the activated gate (most archs) or the gate input
    (dsv4 family: silu(min(g, L)) * clamp(u, -L, L))."""
    ACTIVATED = 0
    GATE_INPUT = 1


class Gating(IntEnum):              # llama_expert_gating_func_type
    SOFTMAX = 1
    SIGMOID = 2
    SOFTMAX_WEIGHT = 3
    SQRT_SOFTPLUS = 4


class FfnBuilders:
    """Feed-forward builders; a mixin of `GraphContext`."""

    @staticmethod
    def swiglu_limit(table, il: int) -> float:
        """The clamp limit of layer il from a scalar or per-layer table (0: no clamp)."""
        if table is None or il < 0:
            return 0.0
        return float(table[il]) if hasattr(table, "__len__") else float(table)

    def build_act(self, cur, up, type_op: FfnOp, par: bool, limit: float = 0.0,
                  prefix: str = "ffn", il: int = -1, act_scales=None):
        """The activation shared by build_ffn and build_moe_ffn. `cur` is the gate branch,
        `up` the linear branch; `par` says whether a separate gate exists (then the GLU
        consumes both). SILU with a limit > 1e-6 clamps as `swiglu_clamp_mode` says.
        Returns (h, par_left): par_left is True when the caller must still multiply by up."""
        c = self.ctx0
        if type_op == FfnOp.SILU:
            if par and limit > 1e-6:
                if self.swiglu_clamp_mode == ClampMode.GATE_INPUT:
                    cur = gg.swiglu_clamp(c, cur, up, limit)
                else:
                    up = self.cb(gg.clamp(c, up, -limit, limit), f"{prefix}_up_clamped", il)
                    act = self.cb(gg.silu(c, cur), f"{prefix}_silu", il)
                    act = self.cb(gg.clamp(c, act, -math.inf, limit), f"{prefix}_silu_clamped", il)
                    cur = gg.mul(c, act, up)
                return self.cb(cur, f"{prefix}_swiglu_limited", il), False
            if par:
                return self.cb(gg.swiglu_split(c, cur, up), f"{prefix}_swiglu", il), False
            return self.cb(gg.silu(c, cur), f"{prefix}_silu", il), False
        if type_op == FfnOp.GELU:
            if par:
                return self.cb(gg.geglu_split(c, cur, up), f"{prefix}_geglu", il), False
            cur = self.cb(gg.gelu(c, cur), f"{prefix}_gelu", il)
            if act_scales is not None:
                cur = self.cb(gg.div(c, cur, act_scales), f"{prefix}_act", il)
            return cur, False
        if type_op == FfnOp.RELU:
            if par:
                return self.cb(gg.reglu_split(c, cur, up), f"{prefix}_reglu", il), False
            return self.cb(gg.relu(c, cur), f"{prefix}_relu", il), False
        if type_op == FfnOp.RELU_SQR:
            cur = self.cb(gg.relu(c, cur), f"{prefix}_relu", il)
            return self.cb(gg.sqr(c, cur), f"{prefix}_sqr(relu)", il), par
        if type_op == FfnOp.SWIGLU:
            return self.cb(gg.swiglu(c, cur), f"{prefix}_swiglu", il), par
        if type_op == FfnOp.GEGLU:
            return self.cb(gg.geglu(c, cur), f"{prefix}_geglu", il), par
        if type_op == FfnOp.REGLU:
            return self.cb(gg.reglu(c, cur), f"{prefix}_reglu", il), par
        if type_op == FfnOp.SWIGLU_OAI_MOE:
            if not par:
                raise ValueError(f"{prefix}: SWIGLU_OAI_MOE requires a parallel gate")
            return self.cb(gg.swiglu_oai(c, cur, up, 1.702, 7.0), f"{prefix}_swiglu_oai", il), False
        raise ValueError(f"{prefix}: unsupported activation {type_op!r}")

    def build_ffn(self, cur, up=None, up_b=None, up_s=None, gate=None, gate_b=None, gate_s=None,
                  down=None, down_b=None, down_s=None, act_scales=None, type_op=FfnOp.SILU,
                  type_gate=FfnGate.PAR, il: int = -1):
        """Dense FFN. Order: matmul (LoRA inside), then bias, then _s scale."""
        c = self.ctx0
        tmp = self.build_lora_mm(up, cur) if up is not None else cur
        self.cb(tmp, "ffn_up", il)
        if up_b is not None:
            tmp = self.cb(gg.add(c, tmp, up_b), "ffn_up_b", il)
        if up_s is not None:
            tmp = self.cb(gg.mul(c, tmp, up_s), "ffn_up_s", il)
        if gate is not None:
            cur = self.cb(self.build_lora_mm(gate, tmp if type_gate == FfnGate.SEQ else cur), "ffn_gate", il)
            if gate_b is not None:
                cur = self.cb(gg.add(c, cur, gate_b), "ffn_gate_b", il)
            if gate_s is not None:
                cur = self.cb(gg.mul(c, cur, gate_s), "ffn_gate_s", il)
        else:
            cur = tmp
        par = gate is not None and type_gate == FfnGate.PAR
        cur, par = self.build_act(cur, tmp, type_op, par, self.swiglu_limit(self.swiglu_clamp_shexp, il),
                                  "ffn", il, act_scales)
        if par:
            cur = self.cb(gg.mul(c, cur, tmp), "ffn_gate_par", il)
        if down is not None:
            cur = self.build_lora_mm(down, cur)
        if down_b is not None:
            self.cb(cur, "ffn_down", il)
            cur = gg.add(c, cur, down_b)
        if down_s is not None:
            cur = self.cb(gg.mul(c, cur, down_s), "ffn_down_s", il)
        return cur

    def build_moe_ffn(self, cur, gate_inp, up_exps, gate_exps, down_exps, exp_probs_b=None, *,
                      n_expert: int, n_expert_used: int, type_op=FfnOp.SILU, norm_w=True,
                      w_scale=0.0, gating_op=Gating.SOFTMAX, il: int = -1, gate_inp_b=None,
                      up_exps_s=None, gate_exps_s=None, down_exps_s=None, probs_in=None,
                      selected_experts_in=None):
        """Mixture of experts route, mul_mat_id per selected expert, weight, sum.
        `selected_experts_in` [k, T] I32 bypasses the selection (dsv4 hash layers)."""
        c = self.ctx0
        n_embd, n_tokens = cur.ne[0], cur.ne[1]
        if probs_in is None:
            logits = self.cb(self.build_lora_mm(gate_inp, cur), "ffn_moe_logits", il)
        else:
            logits = probs_in
        if gate_inp_b is not None:
            logits = self.cb(gg.add(c, logits, gate_inp_b), "ffn_moe_logits_biased", il)
        if gating_op == Gating.SOFTMAX:
            probs = gg.soft_max(c, logits)
        elif gating_op == Gating.SIGMOID:
            probs = gg.sigmoid(c, logits)
        elif gating_op == Gating.SOFTMAX_WEIGHT:
            probs = logits
        elif gating_op == Gating.SQRT_SOFTPLUS:
            probs = gg.sqrt(c, gg.softplus(c, logits))
        else:
            raise ValueError(f"build_moe_ffn: unknown gating function {gating_op!r}")
        self.cb(probs, "ffn_moe_probs", il)
        selection = probs
        if exp_probs_b is not None:  # the bias steers selection only
            selection = self.cb(gg.add(c, probs, exp_probs_b), "ffn_moe_probs_biased", il)
        selected = selected_experts_in
        if selected is None:
            selected = gg.argsort_top_k(c, selection, n_expert_used)
        self.cb(selected, "ffn_moe_topk", il)
        weights = gg.get_rows(c, gg.reshape_3d(c, probs, 1, n_expert, n_tokens), selected)
        self.cb(weights, "ffn_moe_weights", il)
        if gating_op == Gating.SOFTMAX_WEIGHT:
            w = gg.soft_max(c, gg.reshape_2d(c, weights, n_expert_used, n_tokens))
            weights = self.cb(gg.reshape_3d(c, w, 1, n_expert_used, n_tokens), "ffn_moe_weights_softmax", il)
        if norm_w:
            w = gg.reshape_2d(c, weights, n_expert_used, n_tokens)
            wsum = self.cb(gg.sum_rows(c, w), "ffn_moe_weights_sum", il)
            wsum = self.cb(gg.clamp(c, wsum, 6.103515625e-5, math.inf), "ffn_moe_weights_sum_clamped", il)
            w = self.cb(gg.div(c, w, wsum), "ffn_moe_weights_norm", il)
            weights = gg.reshape_3d(c, w, 1, n_expert_used, n_tokens)
        if w_scale not in (0.0, 1.0):
            weights = self.cb(gg.scale(c, weights, w_scale), "ffn_moe_weights_scaled", il)
        self.expand(weights)
        cur = gg.reshape_3d(c, cur, n_embd, 1, n_tokens)
        up = self.cb(self.build_lora_mm_id(up_exps, cur, selected, up_exps_s), "ffn_moe_up", il)
        if gate_exps is not None:
            cur = self.cb(self.build_lora_mm_id(gate_exps, cur, selected, gate_exps_s), "ffn_moe_gate", il)
        else:
            cur = up
        has_gate = gate_exps is not None
        cur, par = self.build_act(cur, up, type_op, has_gate,
                                  self.swiglu_limit(self.swiglu_clamp_exp, il), "ffn_moe", il)
        if par:
            cur = self.cb(gg.mul(c, cur, up), "ffn_moe_gate_par", il)
        experts = self.cb(self.build_lora_mm_id(down_exps, cur, selected, down_exps_s), "ffn_moe_down", il)
        experts = self.cb(gg.mul(c, experts, weights), "ffn_moe_weighted", il)
        self.expand(experts)
        views = [gg.view_2d(c, experts, n_embd, n_tokens, experts.nb[2], i * experts.nb[1])
                 for i in range(n_expert_used)]
        for v in views:  # the views before the adds, as upstream
            self.expand(v)
        out = views[0]
        for v in views[1:]:
            out = self.expand(gg.add(c, out, v))
        if n_expert_used == 1:
            out = gg.cont(c, out)
        return self.cb(out, "ffn_moe_out", il)
