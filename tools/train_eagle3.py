"""Train an EAGLE3 draft head for a llama-family GGUF target and write it as a GGUF that
pyggml and llama.cpp load as an `eagle3` draft of that target.

    python tools/train_eagle3.py --target SmolLM2-135M-Instruct.Q4_1.gguf \
        --out draft.gguf --work /tmp/eagle3 --extract-minutes 8 --train-minutes 18

Needs PyTorch (the `train` extra) besides pyggml. Three stages, each timed:

1. data: Python source text that ships with Python (a few pieces of each of the standard
   library's .py files, half of them laid out as "version 1 / version 2: identical" copy
   tasks like the speculative benchmark's prompts), tokenized by the target and cut into
   segments of --seq-len tokens; the target (run in pyggml) decodes every segment and
   gives, per token, the inputs of the 3 tapped layers (stored as f16) and its greedy next
   token (the label).
2. draft: fc over the 3 features (with the rms norm before it), one decoder layer fed
   concat(rms(embd(token)), rms(g)), its pre-norm output and a head over a reduced draft
   vocabulary (the most frequent target choices, mapped back with `d2t`), initialised from
   the target's token embedding. Trained with cross-entropy against the target's greedy
   token, unrolled --ttt-steps times: step k feeds step k-1's pre-norm state back in as g,
   attending to the real features' keys up to i-k and to its own earlier steps' keys, as
   the draft does when it chains its own tokens at decode time.
3. gguf: llama.cpp's eagle3 keys and tensor names (the target's tokenizer copied in),
   matrices in --out-type (f32, f16 or q8_0).

Position convention (the one pyggml's and llama.cpp's drivers use): the draft at position
i takes (token[i+1], g[i]), g[i] fused from the target's features of token i, and predicts
the target's choice after token[i+1].
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import sysconfig
import time

import numpy as np

DEFAULT_TARGET = os.path.expanduser("~/.cache/pyggml/SmolLM2-135M-Instruct.Q4_1.gguf")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- stage 1: data ---------------------------------------------------------------------------
def stdlib_sources(seed: int, min_chars: int = 2000, max_chars: int = 60000) -> list:
    """Paths of the standard library's .py files of a useful size, shuffled (seeded)."""
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "__pycache__"))
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(dirpath, f)
                try:
                    n = os.path.getsize(p)
                except OSError:
                    continue
                if min_chars <= n <= max_chars:
                    out.append(p)
    random.Random(seed).shuffle(out)
    return out


def stdlib_texts(seed: int, copy_fraction: float = 0.5, copy_chars: int = 700,
                 pieces_per_file: int = 3):
    """Pieces of the standard library's source. A share `copy_fraction` of them is laid out
    as a copy task ("version 1" then "version 2: identical", the kind of prompt the
    speculative benchmark measures); the rest is the file's text as it is."""
    rng = random.Random(seed + 1)
    for path in stdlib_sources(seed):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        name = os.path.basename(path)
        lines, piece, pieces = text.splitlines(keepends=True), [], []
        for line in lines + [None]:
            if line is not None:
                piece.append(line)
            if piece and (line is None or sum(map(len, piece)) >= copy_chars):
                pieces.append("".join(piece))
                piece = []
        # a few consecutive pieces per file: many files in a small budget
        start = rng.randrange(max(len(pieces) - pieces_per_file, 0) + 1)
        for body in pieces[start:start + pieces_per_file]:
            if rng.random() < copy_fraction:
                yield (f"# {name}, version 1\n{body}\n\n"
                       f"# {name}, version 2: identical to version 1\n{body}\n\n\n")
            else:
                yield body


def default_target_layers(n_layer: int) -> tuple:
    """Low, middle and high layer inputs, as EAGLE3 heads usually tap them."""
    return (2, n_layer // 2, n_layer - 3) if n_layer >= 6 else (0, n_layer // 2, n_layer - 1)


class FeatureStore:
    """Fixed-length segments on disk: tokens int32 [N, T], the target's greedy next token
    int32 [N, T] and the concatenated tapped features f16 [N, T, n_enc]."""

    def __init__(self, folder: str):
        self.folder = folder
        with open(os.path.join(folder, "meta.json")) as f:
            self.meta = json.load(f)
        n, t, e = self.meta["n_segments"], self.meta["seq_len"], self.meta["n_enc"]
        self.tokens = np.fromfile(os.path.join(folder, "tokens.i32"), np.int32).reshape(n, t)
        self.argmax = np.fromfile(os.path.join(folder, "argmax.i32"), np.int32).reshape(n, t)
        self.feats = np.memmap(os.path.join(folder, "feats.f16"), np.float16, "r", shape=(n, t, e))

    def __len__(self):
        return self.meta["n_segments"]


def extract(target_path: str, folder: str, *, seq_len: int, target_layers, threads: int,
            max_tokens: int, minutes: float, seed: int, texts=None,
            copy_fraction: float = 0.5) -> FeatureStore:
    """Run the target over the text segments and store what the draft trains on."""
    from pyggml.llm import Context, Model
    from pyggml.llm.speculative.taps import layer_input_names
    os.makedirs(folder, exist_ok=True)
    model = Model.load(target_path, progress=False)
    names = layer_input_names(model, target_layers)
    ctx = Context(model, n_ctx=seq_len, n_threads=threads, n_batch=seq_len, n_ubatch=seq_len,
                  outputs=names)
    n_enc = len(names) * model.hparams.n_embd
    files = {k: open(os.path.join(folder, k), "wb") for k in ("tokens.i32", "argmax.i32",
                                                              "feats.f16")}
    pieces = stdlib_texts(seed, copy_fraction) if texts is None else None
    texts = iter(texts) if texts is not None else None
    t0, n_seg, buf, n_pieces = time.perf_counter(), 0, [], 0
    deadline = t0 + minutes * 60.0
    try:
        while n_seg * seq_len < max_tokens and time.perf_counter() < deadline:
            if len(buf) < seq_len:
                if texts is not None:
                    nxt = next(texts, None)
                    if nxt is None:
                        break
                    buf += [int(x) for x in nxt]
                    continue
                piece = next(pieces, None)
                if piece is None:
                    break
                buf += [int(x) for x in model.tokenize(piece)]
                n_pieces += 1
                continue
            seg, buf = np.asarray(buf[:seq_len], np.int32), buf[seq_len:]
            ctx.reset()
            ctx.collected = {}
            res = ctx._decode(seg, True, 0, ("greedy",))
            ids = np.asarray(res.sampled_view(), np.int32)
            feats = np.concatenate([np.concatenate(ctx.collected[n]).reshape(seq_len, -1)
                                    for n in names], axis=1)
            ctx.collected = None
            files["tokens.i32"].write(seg.tobytes())
            files["argmax.i32"].write(ids.tobytes())
            # the residual stream's largest activations stay inside the f16 range
            files["feats.f16"].write(np.clip(feats, -65000, 65000).astype(np.float16).tobytes())
            n_seg += 1
            if n_seg % 20 == 0:
                dt = time.perf_counter() - t0
                log(f"extract: {n_seg} segments, {n_seg * seq_len} tokens, "
                    f"{n_seg * seq_len / dt:.0f} tok/s, {n_pieces} text pieces")
    finally:
        for f in files.values():
            f.close()
    meta = dict(target=os.path.abspath(target_path), n_segments=n_seg, seq_len=seq_len,
                n_enc=n_enc, target_layers=list(target_layers), n_pieces=n_pieces,
                copy_fraction=copy_fraction,
                seconds=time.perf_counter() - t0)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f)
    log(f"extract: {n_seg} segments of {seq_len} tokens from {n_pieces} text pieces in "
        f"{meta['seconds']:.0f} s")
    return FeatureStore(folder)


# ---- stage 2: the draft in torch -------------------------------------------------------------
def target_tensors(target_path: str) -> dict:
    """The target's hyperparameters and its token embedding (dequantized, [V, D])."""
    import gguf
    r = gguf.GGUFReader(target_path)
    arch = str(r.fields["general.architecture"].contents())
    kv = {k: f.contents() for k, f in r.fields.items()
          if k.startswith(arch + ".") and not k.endswith("chat_template")}
    by_name = {t.name: t for t in r.tensors}

    def rows(t):
        return np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type)
                                    .reshape(-1, int(t.shape[0])), np.float32)
    embd = rows(by_name["token_embd.weight"])
    # the draft head starts as the target's own output rows (tied: the embedding)
    head = rows(by_name["output.weight"]) if "output.weight" in by_name else embd
    return dict(reader=r, arch=arch, kv=kv, embd=embd, head=head)


def build_draft_model(torch, *, n_embd, n_enc, n_head, n_head_kv, head_dim, n_ff, embd,
                      out_init, rope_base, eps):
    nn, F = torch.nn, torch.nn.functional

    class Eagle3Draft(nn.Module):
        def __init__(self):
            super().__init__()
            D = n_embd
            self.n_head, self.n_head_kv, self.head_dim, self.eps = n_head, n_head_kv, head_dim, eps
            self.enc_norm = nn.Parameter(torch.ones(n_enc))
            self.fc = nn.Linear(n_enc, D, bias=False)
            self.attn_norm = nn.Parameter(torch.ones(D))
            self.attn_norm_2 = nn.Parameter(torch.ones(D))
            self.wq = nn.Linear(2 * D, n_head * head_dim, bias=False)
            self.wk = nn.Linear(2 * D, n_head_kv * head_dim, bias=False)
            self.wv = nn.Linear(2 * D, n_head_kv * head_dim, bias=False)
            self.wo = nn.Linear(n_head * head_dim, D, bias=False)
            self.ffn_norm = nn.Parameter(torch.ones(D))
            self.gate = nn.Linear(D, n_ff, bias=False)
            self.up = nn.Linear(D, n_ff, bias=False)
            self.down = nn.Linear(n_ff, D, bias=False)
            self.output_norm = nn.Parameter(torch.ones(D))
            self.head = nn.Linear(D, out_init.shape[0], bias=False)
            with torch.no_grad():
                self.head.weight.copy_(torch.from_numpy(out_init))
                # logits of about unit size at first (a uniform-ish start, not a confident
                # wrong one): scale the norm by the head rows' mean length
                row = float(np.linalg.norm(out_init, axis=1).mean())
                self.output_norm.fill_(1.0 / max(row, 1e-6))
                # small residual branches at first: g passes through, as a fresh block should
                self.wo.weight.mul_(0.5)
                self.down.weight.mul_(0.5)
            self.register_buffer("embd", torch.from_numpy(np.array(embd)), persistent=False)
            inv = rope_base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
            self.register_buffer("inv_freq", inv.float(), persistent=False)

        def rms(self, x, w):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

        def rope(self, x, cos, sin):
            # adjacent pairs (x[2i], x[2i+1]) rotate by pos * base^(-2i/d) (llama-style NORM)
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)

        def attention(self, q, keys, vals, k):
            """Step k's query at i sees step 0's keys at j <= i - k and step m's key at
            i - (k - m) for m = 1..k (its own chain of draft positions)."""
            B, T = q.shape[0], q.shape[2]
            r = self.n_head // self.n_head_kv
            scale = 1.0 / math.sqrt(self.head_dim)
            k0 = keys[0].repeat_interleave(r, 1)
            v0 = vals[0].repeat_interleave(r, 1)
            s0 = (q @ k0.transpose(-1, -2)) * scale
            i = torch.arange(T)
            s0 = s0.masked_fill(i[None, :] > (i[:, None] - k), float("-inf"))
            diag, vdiag = [], []
            for m in range(1, k + 1):
                sh = k - m
                km = keys[m].repeat_interleave(r, 1)
                vm = vals[m].repeat_interleave(r, 1)
                if sh:
                    km = F.pad(km, (0, 0, sh, 0))[:, :, :T]
                    vm = F.pad(vm, (0, 0, sh, 0))[:, :, :T]
                s = (q * km).sum(-1, keepdim=True) * scale
                if sh:
                    s = s.masked_fill((i < sh)[:, None], float("-inf"))
                diag.append(s)
                vdiag.append(vm)
            p = torch.softmax(torch.cat([s0] + diag, -1), -1)
            out = p[..., :T] @ v0
            for m, vm in enumerate(vdiag):
                out = out + p[..., T + m:T + m + 1] * vm
            return out.transpose(1, 2).reshape(B, T, -1)

        def forward(self, feats, next_tokens, n_steps):
            """Logits [B, T, V_draft] of each unrolled step (a list of n_steps)."""
            B, T = next_tokens.shape
            H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
            en = self.rms(self.embd[next_tokens], self.attn_norm)
            g = self.fc(self.rms(feats, self.enc_norm))
            ang = torch.arange(T, dtype=torch.float32)[:, None] * self.inv_freq[None, :]
            cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
            keys, vals, out = [], [], []
            for k in range(n_steps):
                if k:
                    g = F.pad(h, (0, 0, 1, 0))[:, :T]     # position i takes step k-1's h[i-1]
                x = torch.cat([en, self.rms(g, self.attn_norm_2)], -1)
                q = self.rope(self.wq(x).view(B, T, H, d), cos, sin).transpose(1, 2)
                kk = self.rope(self.wk(x).view(B, T, Hkv, d), cos, sin).transpose(1, 2)
                vv = self.wv(x).view(B, T, Hkv, d).transpose(1, 2)
                keys.append(kk)
                vals.append(vv)
                f = self.wo(self.attention(q, keys, vals, k)) + g
                y = self.rms(f, self.ffn_norm)
                h = self.down(F.silu(self.gate(y)) * self.up(y)) + f
                out.append(self.head(self.rms(h, self.output_norm)))
            return out

    return Eagle3Draft()


def step_losses(torch, logits_steps, labels_draft, weights):
    """Cross-entropy per unrolled step over its valid positions; step k at i predicts the
    target's choice after token i+1 (labels_draft[:, i+1], -100 outside the draft vocab)."""
    F = torch.nn.functional
    losses, accs = [], []
    T = labels_draft.shape[1]
    for k, lg in enumerate(logits_steps):
        lab = labels_draft[:, k + 1:]                  # positions i = k .. T-2
        lg = lg[:, k:T - 1]
        losses.append(F.cross_entropy(lg.reshape(-1, lg.shape[-1]), lab.reshape(-1),
                                      ignore_index=-100))
        with torch.no_grad():
            ok = lab >= 0
            accs.append(float(((lg.argmax(-1) == lab) & ok).sum()) / max(lab.numel(), 1))
    total = sum(w * l for w, l in zip(weights, losses))
    return total, [float(l.detach()) for l in losses], accs


def train(store: FeatureStore, tt: dict, *, n_vocab_draft: int, n_ff: int, ttt_steps: int,
          batch: int, lr: float, minutes: float, max_steps: int, threads: int, seed: int,
          val_segments: int):
    import torch
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    kv, arch = tt["kv"], tt["arch"]
    D = int(kv[f"{arch}.embedding_length"])
    H = int(kv[f"{arch}.attention.head_count"])
    Hkv = int(kv.get(f"{arch}.attention.head_count_kv", H))
    hd = int(kv.get(f"{arch}.attention.key_length", D // H))
    V = tt["embd"].shape[0]
    eps = float(kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5))
    rope_base = float(kv.get(f"{arch}.rope.freq_base", 10000.0))
    n_seg = len(store)
    n_val = min(val_segments, max(n_seg // 10, 1)) if n_seg > 1 else 0
    train_ids = np.arange(n_val, n_seg)
    # draft vocabulary: the target's most frequent choices in the training segments
    counts = np.bincount(store.argmax[train_ids].ravel(), minlength=V)
    Vd = min(int(n_vocab_draft), V)
    d2t = np.sort(np.argsort(-counts, kind="stable")[:Vd]).astype(np.int64)
    t2d = np.full(V, -100, np.int64)
    t2d[d2t] = np.arange(Vd)
    coverage = counts[d2t].sum() / max(counts.sum(), 1)
    log(f"train: draft vocabulary {Vd} of {V} tokens covers {coverage * 100:.1f}% of the "
        f"target's choices; {len(train_ids)} train / {n_val} val segments")
    model = build_draft_model(torch, n_embd=D, n_enc=store.meta["n_enc"], n_head=H,
                              n_head_kv=Hkv, head_dim=hd, n_ff=n_ff, embd=tt["embd"],
                              out_init=tt["head"][d2t], rope_base=rope_base, eps=eps)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    weights = [0.8 ** k for k in range(ttt_steps)]
    t2d_t = torch.from_numpy(t2d)

    def tensors(ids):
        ids = np.sort(ids)
        feats = torch.from_numpy(np.asarray(store.feats[ids], np.float32))
        toks = torch.from_numpy(store.tokens[ids].astype(np.int64))
        lab = t2d_t[torch.from_numpy(store.argmax[ids].astype(np.int64))]
        nxt = torch.cat([toks[:, 1:], toks[:, -1:]], 1)    # token[i+1] (last one unused)
        return feats, nxt, lab

    def evaluate():
        if not n_val:
            return None
        model.eval()
        tot, n = None, 0
        with torch.no_grad():
            for b in range(0, n_val, batch):
                f, x, y = tensors(np.arange(b, min(b + batch, n_val)))
                _, losses, accs = step_losses(torch, model(f, x, ttt_steps), y, weights)
                row = np.array(losses + accs) * len(f)
                tot = row if tot is None else tot + row
                n += len(f)
        model.train()
        tot = tot / n
        return list(tot[:ttt_steps]), list(tot[ttt_steps:])

    history = []
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    budget = minutes * 60.0
    step, warmup, order, pos = 0, 5, rng.permutation(train_ids), 0
    first = evaluate()
    if first:
        log(f"train: before: val loss/step {np.round(first[0], 3).tolist()} "
            f"acc/step {np.round(first[1], 3).tolist()}")
    while step < max_steps and time.perf_counter() - t0 < budget:
        frac = max((time.perf_counter() - t0) / budget, step / max_steps)
        cur = lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for gr in opt.param_groups:
            gr["lr"] = cur
        if pos + batch > len(order):
            order, pos = rng.permutation(train_ids), 0
        f, x, y = tensors(order[pos:pos + batch])
        pos += batch
        loss, losses, accs = step_losses(torch, model(f, x, ttt_steps), y, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append(losses)
        step += 1
        if step % 25 == 0 or step == 1:
            log(f"train: step {step} {time.perf_counter() - t0:.0f} s lr {cur:.2e} "
                f"loss/step {np.round(losses, 3).tolist()} acc/step {np.round(accs, 3).tolist()}")
    last = evaluate()
    if last:
        log(f"train: after {step} steps: val loss/step {np.round(last[0], 3).tolist()} "
            f"acc/step {np.round(last[1], 3).tolist()}")
    report = dict(steps=step, seconds=time.perf_counter() - t0, vocab_coverage=float(coverage),
                  first_loss=history[0] if history else None,
                  last_loss=np.mean(history[-10:], axis=0).tolist() if history else None,
                  val_before=first, val_after=last)
    hp = dict(n_embd=D, n_head=H, n_head_kv=Hkv, head_dim=hd, n_ff=n_ff, rms_eps=eps,
              rope_freq_base=rope_base, n_vocab=V, target_layers=store.meta["target_layers"])
    return model, d2t, hp, report


# ---- stage 3: the GGUF ------------------------------------------------------------------------
def write_gguf(path: str, model, d2t: np.ndarray, hp: dict, tt: dict, out_type: str = "f16"):
    import gguf
    a = "eagle3"
    w = gguf.GGUFWriter(os.fspath(path), a)
    w.add_name("pyggml-trained-eagle3")
    t_kv, t_arch = tt["kv"], tt["arch"]
    n_ctx = int(t_kv.get(f"{t_arch}.context_length", 4096))
    for key, val in (("vocab_size", hp["n_vocab"]), ("context_length", n_ctx),
                     ("embedding_length", hp["n_embd"]), ("block_count", 1),
                     ("feed_forward_length", hp["n_ff"]), ("attention.head_count", hp["n_head"]),
                     ("attention.head_count_kv", hp["n_head_kv"]),
                     ("attention.key_length", hp["head_dim"]),
                     ("attention.value_length", hp["head_dim"]),
                     ("rope.dimension_count", hp["head_dim"]),
                     ("target_hidden_size", hp["n_embd"])):
        w.add_uint32(f"{a}.{key}", int(val))
    w.add_float32(f"{a}.rope.freq_base", float(hp["rope_freq_base"]))
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", float(hp["rms_eps"]))
    w.add_key_value(f"{a}.target_layers", [int(x) for x in hp["target_layers"]],
                    gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    w.add_bool(f"{a}.norm_before_fc", True)
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "q8_0": gguf.GGMLQuantizationType.Q8_0}[out_type]
    w.add_file_type({"f32": 0, "f16": 1, "q8_0": 7}[out_type])
    for key, field in tt["reader"].fields.items():      # the target's vocabulary, as it is
        if not key.startswith("tokenizer."):
            continue
        types = field.types
        if types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, field.contents(), types[0], sub_type=types[-1])
        else:
            w.add_key_value(key, field.contents(), types[0])

    def vec(name, t):
        w.add_tensor(name, t.detach().float().numpy().astype(np.float32))

    def mat(name, t):
        arr = np.ascontiguousarray(t.detach().float().numpy(), np.float32)   # (n_out, n_in)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, arr)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)

    m = model
    mat("fc.weight", m.fc.weight)
    vec("enc.output_norm.weight", m.enc_norm)
    vec("output_norm.weight", m.output_norm)
    mat("output.weight", m.head.weight)
    w.add_tensor("d2t", np.asarray(d2t, np.int64), raw_dtype=gguf.GGMLQuantizationType.I64)
    p = "blk.0."
    vec(p + "attn_norm.weight", m.attn_norm)
    vec(p + "attn_norm_2.weight", m.attn_norm_2)
    mat(p + "attn_q.weight", m.wq.weight)
    mat(p + "attn_k.weight", m.wk.weight)
    mat(p + "attn_v.weight", m.wv.weight)
    mat(p + "attn_output.weight", m.wo.weight)
    vec(p + "ffn_norm.weight", m.ffn_norm)
    mat(p + "ffn_gate.weight", m.gate.weight)
    mat(p + "ffn_up.weight", m.up.weight)
    mat(p + "ffn_down.weight", m.down.weight)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return os.fspath(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default=DEFAULT_TARGET)
    ap.add_argument("--out", required=True, help="the draft GGUF to write")
    ap.add_argument("--work", required=True, help="folder for the feature dump")
    ap.add_argument("--reuse", action="store_true", help="train on an existing dump in --work")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--target-layers", default="", help="3 comma-separated layer ids")
    ap.add_argument("--max-tokens", type=int, default=200000)
    ap.add_argument("--copy-fraction", type=float, default=0.5,
                    help="share of text pieces laid out as a copy task")
    ap.add_argument("--extract-minutes", type=float, default=12.0)
    ap.add_argument("--train-minutes", type=float, default=15.0)
    ap.add_argument("--max-steps", type=int, default=10 ** 9)
    ap.add_argument("--draft-vocab", type=int, default=2048)
    ap.add_argument("--n-ff", type=int, default=768)
    ap.add_argument("--ttt-steps", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--val-segments", type=int, default=16)
    ap.add_argument("--out-type", choices=("f32", "f16", "q8_0"), default="f16")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    tt = target_tensors(args.target)
    n_layer = int(tt["kv"][f"{tt['arch']}.block_count"])
    layers = (tuple(int(x) for x in args.target_layers.split(",")) if args.target_layers
              else default_target_layers(n_layer))
    if len(layers) != 3:
        raise SystemExit(f"--target-layers: EAGLE3 taps exactly 3 layers, got {layers}")
    if args.reuse:
        store = FeatureStore(args.work)
    else:
        store = extract(args.target, args.work, seq_len=args.seq_len, target_layers=layers,
                        threads=args.threads, max_tokens=args.max_tokens,
                        minutes=args.extract_minutes, seed=args.seed,
                        copy_fraction=args.copy_fraction)
    if len(store) < 2:
        raise SystemExit("train_eagle3: fewer than 2 segments of data; raise --extract-minutes")
    model, d2t, hp, report = train(store, tt, n_vocab_draft=args.draft_vocab, n_ff=args.n_ff,
                                   ttt_steps=args.ttt_steps, batch=args.batch, lr=args.lr,
                                   minutes=args.train_minutes, max_steps=args.max_steps,
                                   threads=args.threads, seed=args.seed,
                                   val_segments=args.val_segments)
    write_gguf(args.out, model, d2t, hp, tt, args.out_type)
    report.update(total_seconds=time.perf_counter() - t_start, out=os.path.abspath(args.out),
                  extract=store.meta)
    with open(os.path.splitext(args.out)[0] + ".report.json", "w") as f:
        json.dump(report, f, indent=1)
    log(f"wrote {args.out}; total {report['total_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
