#!/usr/bin/env bash
# One-shot GPU check (issue: CUDA backend): build with CUDA for the local GPU, run the
# device tests (every golden case on every backend, device-vs-CPU comparisons) and the GPU
# benchmarks, write a report to ${OUT:-.}/device_report.txt. Meant to finish in < 8 min on an H200.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${OUT:-.}"
REPORT="$OUT_DIR/device_report.txt"
exec > >(tee "$REPORT") 2>&1
echo "# pyggml device check — $(date -u)"
nvidia-smi --query-gpu=name,compute_cap,memory.total,clocks.max.sm --format=csv || true
nvcc --version | tail -1
T0=$(date +%s)
cmake -S . -B build/device -G Ninja -DPYGGML_CUDA=ON -DPYGGML_BUILD_PYTHON=ON -DPYGGML_BUILD_BENCH=ON \
  -Dpybind11_DIR="$(python3 -c 'import pybind11; print(pybind11.get_cmake_dir())')" > build_device.log 2>&1 \
  && ninja -C build/device -j"$(nproc)" >> build_device.log 2>&1
rc=$?
echo "build: rc=$rc in $(( $(date +%s) - T0 )) s"; [ $rc -eq 0 ] || { tail -50 build_device.log; exit 1; }
export PYGGML_BUILD_DIR=build/device
python3 -c "import pyggml as gg; print('backends:', gg.backends()); print(gg.cuda_device_info(0))"
echo "## tests on the device"
timeout 300 python3 -m pytest -q -x tests/test_backends.py tests/test_golden.py -k "cuda or backend" 2>&1 | tail -25
echo "## benchmarks"
timeout 180 python3 bench/compare_cuda.py 2>&1 | tail -30
echo "total: $(( $(date +%s) - T0 )) s"
