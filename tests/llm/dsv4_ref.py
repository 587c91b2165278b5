"""A float64 numpy DeepSeek V4 forward for one sequence at positions 0..T-1, written from the
model's description (hyper-connections with Sinkhorn, low-rank q, shared K=V head with tail
RoPE/YaRN and inverse RoPE on the output, sinks, raw sliding window, CSA/HCA compressed
keys, the lightning indexer's top-k, sqrt-softplus MoE with hash routing and a shared
expert, SWIGLU clamped on the gate input). Weights come from the GGUF through gguf-py's own
reader; the configuration is the tiny writer's arguments."""
from __future__ import annotations

import inspect
import math

import gguf
import numpy as np

from pyggml.llm.tiny import write_tiny_deepseek4


def config(**kw) -> dict:
    sig = inspect.signature(write_tiny_deepseek4)
    cfg = {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}
    cfg.update(kw)
    return cfg


def load_weights(path) -> dict:
    r = gguf.GGUFReader(str(path))
    return {t.name: np.array(t.data, dtype=np.float64 if t.data.dtype != np.int32 else np.int32)
            for t in r.tensors}


def rms(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


class Rope:
    """Rotation of the last n_rot dims (adjacent pairs), optionally with YaRN."""

    def __init__(self, n_rot, base, freq_scale=1.0, ext=0.0, n_ctx_orig=0, beta_fast=32.0, beta_slow=1.0):
        i = np.arange(n_rot // 2)
        self.n_rot = n_rot
        self.inv = base ** (-2.0 * i / n_rot)
        self.fs, self.ext = freq_scale, ext
        if ext:
            def corr(beta):
                return n_rot * math.log(n_ctx_orig / (beta * 2 * math.pi)) / (2 * math.log(base))
            lo = max(0.0, math.floor(corr(beta_fast)))
            hi = min(n_rot - 1.0, math.ceil(corr(beta_slow)))
            self.ramp = (1 - np.clip((i - lo) / max(0.001, hi - lo), 0, 1)) * ext

    def theta(self, pos):
        t_ext = np.asarray(pos, np.float64)[:, None] * self.inv[None, :]
        t_int = self.fs * t_ext
        if not self.ext:
            return t_int
        return t_int * (1 - self.ramp) + t_ext * self.ramp   # magnitude is exactly 1 for dsv4

    def __call__(self, x, pos, back=False):
        """x [T, ..., d]; pos [T]."""
        x = x.copy()
        th = self.theta(pos)
        th = th.reshape(th.shape[0], *([1] * (x.ndim - 2)), th.shape[1])
        cos, sin = np.cos(th), np.sin(th) * (-1 if back else 1)
        off = x.shape[-1] - self.n_rot
        a = x[..., off::2][..., :self.n_rot // 2].copy()
        b = x[..., off + 1::2][..., :self.n_rot // 2].copy()
        x[..., off::2] = a * cos - b * sin
        x[..., off + 1::2] = a * sin + b * cos
        return x


def forward(cfg: dict, w: dict, tokens, selections: dict | None = None) -> np.ndarray:
    """Logits [T, V]. `selections` (optional) collects per CSA layer the indexer's
    (scores, chosen rows) so a test can check the top-k margins."""
    tokens = np.asarray(tokens)
    T, D, H, d = len(tokens), cfg["n_embd"], cfg["n_head"], cfg["head_dim"]
    hc, eps_hc, eps = cfg["hc"], cfg["hc_eps"], cfg["rms_eps"]
    n_rot, G, Ro = cfg["n_rot"], cfg["o_groups"], cfg["o_lora_rank"]
    Hi, di, top_k = cfg["indexer_n_head"], cfg["indexer_head_dim"], cfg["indexer_top_k"]
    n_swa, L_clamp = cfg["n_swa"], cfg["swiglu_clamp"]
    pos = np.arange(T)
    yf = cfg["yarn_factor"]
    rope_raw = Rope(n_rot, cfg["rope_freq_base"])
    rope_comp = Rope(n_rot, cfg["compress_rope_base"], 1.0 / yf if yf else 1.0, 1.0 if yf else 0.0,
                     cfg["n_ctx_train"])

    def hc_pre(X, p):
        flat = rms(X.reshape(T, hc * D), eps)
        mixes = flat @ w[p + "_fn.weight"].T
        sc, base = w[p + "_scale.weight"], w[p + "_base.weight"]
        pre = sigmoid(mixes[:, :hc] * sc[0] + base[:hc]) + eps_hc
        post = 2 * sigmoid(mixes[:, hc:2 * hc] * sc[1] + base[hc:2 * hc])
        C = (mixes[:, 2 * hc:] * sc[2] + base[2 * hc:]).reshape(T, hc, hc).transpose(0, 2, 1)  # [t, dst, src]
        C = np.exp(C - C.max(axis=1, keepdims=True))
        C = C / C.sum(axis=1, keepdims=True) + eps_hc
        C = C / (C.sum(axis=2, keepdims=True) + eps_hc)
        for _ in range(cfg["sinkhorn_iters"] - 1):
            C = C / (C.sum(axis=1, keepdims=True) + eps_hc)
            C = C / (C.sum(axis=2, keepdims=True) + eps_hc)
        return np.einsum("thd,th->td", X, pre), post, C

    def hc_post(x, R, post, C):
        return x[:, None, :] * post[:, :, None] + np.einsum("tsd,tos->tod", R, C)

    def compress(a, p, r, dc, overlap):
        kv = a @ w[p + "_kv.weight"].T
        sc = a @ w[p + "_gate.weight"].T + w[p + "_ape.weight"][pos % r]
        rows = []
        for j in range(T // r):
            b = r * j
            if overlap:
                if b - r >= 0:
                    pv, ps = kv[b - r:b, :dc], sc[b - r:b, :dc]
                else:
                    pv, ps = np.zeros((r, dc)), np.full((r, dc), -np.inf)
                vals = np.concatenate([pv, kv[b:b + r, dc:]])
                scs = np.concatenate([ps, sc[b:b + r, dc:]])
            else:
                vals, scs = kv[b:b + r], sc[b:b + r]
            e = np.exp(scs - scs.max(axis=0, keepdims=True))
            c = (e / e.sum(axis=0, keepdims=True) * vals).sum(axis=0)
            c = rms(c, eps) * w[p + "_norm.weight"]
            rows.append(rope_comp(c[None, :], [b])[0])
        return np.array(rows).reshape(-1, dc)

    def ffn_clamped(f, gate, up, down):
        g, u = f @ gate.T, f @ up.T
        return (silu(np.minimum(g, L_clamp)) * np.clip(u, -L_clamp, L_clamp)) @ down.T

    X = np.repeat(w["token_embd.weight"][tokens][:, None, :], hc, axis=1)     # [T, hc, D]
    for il, ratio in enumerate(cfg["compress_ratios"]):
        p = f"blk.{il}."
        R = X
        a, post, C = hc_pre(X, p + "hc_attn")
        a = rms(a, eps) * w[p + "attn_norm.weight"]
        rope = rope_comp if ratio else rope_raw
        qr = rms(a @ w[p + "attn_q_a.weight"].T, eps) * w[p + "attn_q_a_norm.weight"]
        q = rope(rms((qr @ w[p + "attn_q_b.weight"].T).reshape(T, H, d), eps), pos)
        kv = rope(rms(a @ w[p + "attn_kv.weight"].T, eps) * w[p + "attn_kv_a_norm.weight"], pos)
        keys = [kv]
        allowed = [(pos[None, :] <= pos[:, None]) & (pos[:, None] - pos[None, :] < n_swa)]
        if ratio:
            comp = compress(a, p + "attn_compressor", ratio, d, ratio == 4)
            vis = np.arange(len(comp))[None, :] < ((pos + 1) // ratio)[:, None]
            if ratio == 4:
                lid = compress(a, p + "indexer_compressor", 4, di, True)
                iq = rope_comp((qr @ w[p + "indexer.attn_q_b.weight"].T).reshape(T, Hi, di), pos)
                iw = (a @ w[p + "indexer.proj.weight"].T) / math.sqrt(di * Hi)
                score = np.einsum("th,thj->tj", iw, np.maximum(np.einsum("thd,jd->thj", iq, lid), 0))
                score = np.where(vis, score, -np.inf)
                chosen = np.zeros_like(vis)
                for t in range(T):
                    order = np.argsort(-score[t], kind="stable")[:top_k]
                    chosen[t, order] = True
                vis = vis & chosen
                if selections is not None:
                    selections[il] = score
            keys.append(comp)
            allowed.append(vis)
        K = np.concatenate(keys)
        M = np.concatenate(allowed, axis=1)
        s = np.einsum("thd,jd->thj", q, K) / math.sqrt(d)
        s = np.where(M[:, None, :], s, -np.inf)
        sink = w[p + "attn_sinks.weight"][None, :, None]
        m = np.maximum(s.max(axis=2, keepdims=True), sink)
        e = np.exp(s - m)
        prob = e / (e.sum(axis=2, keepdims=True) + np.exp(sink - m))
        o = np.einsum("thj,jd->thd", prob, K)
        o = rope(o, pos, back=True).reshape(T, G, H * d // G)
        wo_a = w[p + "attn_output_a.weight"].reshape(G, Ro, H * d // G)
        oa = np.einsum("grk,tgk->tgr", wo_a, o).reshape(T, G * Ro)
        X = hc_post(oa @ w[p + "attn_output_b.weight"].T, R, post, C)

        R = X
        f, post, C = hc_pre(X, p + "hc_ffn")
        f = rms(f, eps) * w[p + "ffn_norm.weight"]
        logits = f @ w[p + "ffn_gate_inp.weight"].T
        probs = np.sqrt(np.logaddexp(0, logits))
        if il < cfg["hash_layer_count"]:
            ids = w[p + "ffn_gate_tid2eid.weight"][tokens]
        else:
            ids = np.argsort(-(probs + w[p + "exp_probs_b.bias"]), axis=1, kind="stable")[:, :cfg["n_expert_used"]]
        wt = np.take_along_axis(probs, ids, axis=1)
        wt = wt / np.maximum(wt.sum(axis=1, keepdims=True), 6.103515625e-5) * cfg["expert_weights_scale"]
        y = np.zeros((T, D))
        for t in range(T):
            for k, e_ in enumerate(ids[t]):
                y[t] += wt[t, k] * ffn_clamped(f[t], w[p + "ffn_gate_exps.weight"][e_],
                                               w[p + "ffn_up_exps.weight"][e_],
                                               w[p + "ffn_down_exps.weight"][e_])
        y += ffn_clamped(f, w[p + "ffn_gate_shexp.weight"], w[p + "ffn_up_shexp.weight"],
                         w[p + "ffn_down_shexp.weight"])
        X = hc_post(y, R, post, C)

    flat = rms(X.reshape(T, hc * D), eps)
    pre = sigmoid(flat @ w["output_hc_fn.weight"].T * w["output_hc_scale.weight"][0]
                  + w["output_hc_base.weight"]) + eps_hc
    h = rms(np.einsum("thd,th->td", X, pre), eps) * w["output_norm.weight"]
    return h @ w["output.weight"].T
