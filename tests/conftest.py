import os
import sys

# tests/ holds shared helpers (reference.py, util.py) imported by tests in subfolders.
sys.path.insert(0, os.path.dirname(__file__))
