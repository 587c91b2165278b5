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


def test_run_rejects_bad_ids(tiny):
    with pytest.raises(SystemExit, match="out of range"):
        main(["run", tiny, "--tokens", "1,999", "-n", "2"])


def test_info_and_graph_dot(tiny, tmp_path, capsys):
    assert main(["info", tiny]) == 0
    assert "n_embd" in capsys.readouterr().out
    dot = tmp_path / "g.dot"
    assert main(["graph", tiny, "--dot", str(dot)]) == 0
    text = dot.read_text()
    assert text.startswith("digraph") and "result_output" in text and "kqv_out-0" in text
