"""The pyggml command line."""
import argparse


def main(argv=None):
    parser = argparse.ArgumentParser(prog="pyggml")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo", help="build and compute a LLaMA-style layer with random weights")
    args = parser.parse_args(argv)
    if args.cmd == "demo":
        from .demo import run_layer_demo
        run_layer_demo()
    return 0
