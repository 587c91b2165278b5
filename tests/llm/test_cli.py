"""The command line: demo (tiny model cached on first use), run (--json), info, graph --dot."""
import json

import pytest

from pyggml.cli import main


@pytest.fixture()
def tiny(tmp_path):
    from pyggml.llm import write_tiny_llama
    return write_tiny_llama(tmp_path / "t.gguf", n_vocab=64, n_embd=32, n_layer=1, n_head=2,
                            n_head_kv=1, n_ff=48, seed=1)


def test_demo_writes_the_model_once_and_generates(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYGGML_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYGGML_OFFLINE", "1")    # the tiny fallback (the real model: test_demo.py)
    assert main(["demo", "-n", "4", "-t", "1"]) == 0
    out = capsys.readouterr().out
    assert "wrote demo model" in out and "tokens/s" in out
    assert main(["demo", "-n", "2", "-t", "1"]) == 0
    assert "wrote demo model" not in capsys.readouterr().out


def test_demo_layer_prints_graph_times_and_planner(capsys):
    assert main(["demo", "--layer", "-t", "1"]) == 0
    out = capsys.readouterr().out
    assert "FLASH_ATTN_EXT" in out and " ms" in out and "memory planner: peak" in out


def test_run_json_and_text(tiny, capsys):
    assert main(["run", tiny, "--tokens", "1,5,7", "-n", "5", "--json", "-t", "1"]) == 0
    d = json.loads(capsys.readouterr().out.strip())
    assert len(d["tokens"]) == 5 and "gen_tokens_per_s" in d["timings"]
    assert main(["run", tiny, "--tokens", "1,5,7", "-n", "5", "--no-flash-attn", "-t", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert [int(x) for x in first.split()] == d["tokens"]      # same greedy ids on both paths


def test_run_rejects_bad_ids(tiny, capsys):
    assert main(["run", tiny, "--tokens", "1,999", "-n", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pyggml run: ") and "out of range" in err and err.count("\n") == 1


def test_info_and_graph_dot(tiny, tmp_path, capsys):
    assert main(["info", tiny]) == 0
    assert "n_embd" in capsys.readouterr().out
    dot = tmp_path / "g.dot"
    assert main(["graph", tiny, "--dot", str(dot)]) == 0
    text = dot.read_text()
    assert text.startswith("digraph") and "result_output" in text and "kqv_out-0" in text


# ---- every user error: one line "pyggml <command>: ...", exit 2 (usage) or 1 (runtime) -------
def _cli(args, env_extra=None, timeout=120):
    """Run `python -m pyggml args...` in a fresh interpreter (the same pyggml as this one)."""
    from util import run_python
    code = "import sys; from pyggml.cli import main; sys.exit(main(sys.argv[1:]))"
    return run_python(f"import sys; sys.argv[1:] = {list(map(str, args))!r}; {code}", env_extra or {},
                      timeout=timeout)


def _assert_one_line_error(proc, command, code, *needles):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pyggml {command}: "), proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture()
def broken(tiny, tmp_path):
    """Malformed files: cut inside the header, cut inside the data, wrong magic, empty."""
    blob = open(tiny, "rb").read()
    files = {}
    for name, data in {"cut_header": blob[:200], "cut_data": blob[:len(blob) - 100],
                       "magic": b"XXXX" + blob[4:], "empty": b""}.items():
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(data)
        files[name] = str(p)
    return files


@pytest.mark.parametrize("command", ["info", "run", "graph"])
def test_malformed_or_missing_gguf_is_one_line(command, broken, tmp_path):
    extra = ["--tokens", "1,2"] if command == "run" else []
    for name, path in broken.items():
        _assert_one_line_error(_cli([command, path] + extra), command, 1, path)
    missing = str(tmp_path / "missing.gguf")
    _assert_one_line_error(_cli([command, missing] + extra), command, 1, "no such file", missing)


@pytest.mark.parametrize("args, command, needle", [
    (["run", "{tiny}", "--tokens", "1", "-t", "0"], "run", "-t/--threads: must be >= 1"),
    (["run", "{tiny}", "--tokens", "1", "-n", "-1"], "run", "argument -n: must be >= 1"),
    (["run", "{tiny}", "--tokens", "1,x"], "run", "--tokens: takes comma-separated integer ids"),
    (["run", "{tiny}", "--tokens", ","], "run", "needs at least one token id"),
    (["graph", "{tiny}", "--n-tokens", "0"], "graph", "--n-tokens: must be >= 1"),
    (["demo", "-t", "0"], "demo", "-t/--threads: must be >= 1"),
    (["demo", "-n", "-1"], "demo", "argument -n: must be >= 1"),
    (["info"], "info", "the following arguments are required: model"),
])
def test_usage_errors_are_one_line_exit_2(tiny, args, command, needle):
    proc = _cli([a.replace("{tiny}", tiny) for a in args])
    _assert_one_line_error(proc, command, 2, needle, f"see pyggml {command} --help")


def test_too_many_threads_is_a_runtime_error(tiny):
    proc = _cli(["run", tiny, "--tokens", "1", "-n", "1", "-t", "100000"])
    _assert_one_line_error(proc, "run", 1, "n_threads=100000")


def test_unwritable_cache_is_one_line(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    proc = _cli(["demo", "-n", "1", "-t", "1"], {"PYGGML_CACHE": str(not_a_dir / "cache")})
    _assert_one_line_error(proc, "demo", 1, "cannot write the demo model", "set PYGGML_CACHE")


def test_corrupt_cached_demo_model_is_written_again(tmp_path):
    from pyggml.demo import DEMO_FILE
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / DEMO_FILE).write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    proc = _cli(["demo", "--tiny", "-n", "2", "-t", "1"], {"PYGGML_CACHE": str(cache)})
    assert proc.returncode == 0, proc.stderr
    assert "damaged" in proc.stdout and "wrote demo model" in proc.stdout and "tokens/s" in proc.stdout
    from pyggml.llm import Model
    assert Model.load(cache / DEMO_FILE).hparams.n_layer > 0      # the cache entry is whole again


def test_version_and_help_show_defaults():
    import pyggml
    proc = _cli(["--version"])
    assert proc.returncode == 0 and proc.stdout.strip() == f"pyggml {pyggml.__version__}"
    proc = _cli(["run", "--help"])
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "(default: 32)" in text and "(default: 0.95)" in text and "(default: 40)" in text


def test_info_lists_tensors_and_json(tiny, capsys):
    from pyggml.llm import Model
    model = Model.load(tiny)
    assert main(["info", tiny]) == 0
    out = capsys.readouterr().out
    for name, t in model.tensors.items():
        line = next(ln for ln in out.splitlines() if ln.split()[:1] == [name])
        assert line.split()[1] in ("f32", "f16") and str(t.ne[:max(1, t.n_dims)]) in line
    assert main(["info", tiny, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {t["name"] for t in d["tensors"]} == set(model.tensors)
    tok = next(t for t in d["tensors"] if t["name"] == "token_embd.weight")
    assert tok["ne"] == [32, 64] and d["hparams"]["n_embd"] == 32 and d["vocab_size"] == 64


def test_graph_json(tiny, capsys):
    assert main(["graph", tiny, "--json", "--n-tokens", "3"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["n_nodes"] == len(d["nodes"]) > 10 and d["n_leafs"] == len(d["leafs"])
    assert d["nodes"][-1]["name"] == "result_output" and d["nodes"][-1]["ne"][:2] == [64, 1]
    assert {"name", "op", "type", "ne"} <= set(d["nodes"][0])


def test_run_draft_ngram_same_ids_and_acceptance_in_json(tiny, capsys):
    args = ["run", tiny, "--tokens", "1,5,7,9,5,7,9,5,7", "-n", "12", "--json", "-t", "1"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out.strip())
    assert main(args + ["--draft", "ngram", "--draft-max", "3"]) == 0
    spec = json.loads(capsys.readouterr().out.strip())
    assert spec["tokens"] == plain["tokens"]                  # greedy speculation is lossless
    s = spec["speculative"]
    assert s["kind"] == "ngram" and s["n_max"] == 3 and s["valid"] is True
    assert s["n_verify_steps"] > 0 and 1.0 <= s["mean_acceptance_length"] <= 4.0
    assert len(s["acceptance_rate_per_pos"]) == 3 and "steps" not in s
    assert main(["run", tiny, "-p", "abcabcabc", "-n", "6", "--json", "-t", "1",
                 "--draft", "ngram"]) == 0
    d = json.loads(capsys.readouterr().out.strip())
    assert "speculative" in d and len(d["tokens"]) <= 6
