#!/usr/bin/env bash
# Run the benchmark suite: engine vs. LangGraph 1.2 on the same graphs, in one run, as ratios.
#
#   bash benchmarks/run.sh                  # every benchmark module
#   bash benchmarks/run.sh engine_core      # only benchmarks/engine_core.py
#   BENCH_REPEAT=9 bash benchmarks/run.sh   # more interleaved repetitions
#   bash benchmarks/run.sh engine_core --only fan-out --repeat 9   # options go to each module
#
# Uses its own virtualenv, .venv-bench, never .venv: LangGraph pulls in langchain-core, which
# changes engine.graph.message.add_messages (it then builds langchain message objects), so the
# test venv must stay without it. The venv is created when missing (Python 3.12 from pyenv,
# else python3.12 on PATH; override with PYTHON=) and the dependencies are installed again only
# when pyproject.toml or the list below changes (a stamp file named by their hash).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

VENV=.venv-bench
BENCH_DEPS=("langgraph>=1.2,<1.3" "langgraph-checkpoint-sqlite" "langgraph-checkpoint-postgres" "psycopg[binary,pool]")

if [[ -z "${PYTHON:-}" ]]; then
  PYENV_ROOT_DIR=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
  PYTHON=$(ls -d "$PYENV_ROOT_DIR"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -V | tail -n 1 || true)
  [[ -n "$PYTHON" ]] || PYTHON=$(command -v python3.12 || true)
fi

if ! "$VENV/bin/python" -c 'import sys; raise SystemExit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
  if [[ -z "$PYTHON" ]]; then
    echo "error: Python 3.12 not found (pyenv versions or python3.12 on PATH); pass PYTHON=..." >&2
    exit 1
  fi
  echo "Creating $VENV with $PYTHON"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi

HASH=$( { cat pyproject.toml; printf '%s\n' "${BENCH_DEPS[@]}"; } | sha256sum | cut -c1-16)
STAMP="$VENV/.bench-deps-$HASH"
if [[ ! -f "$STAMP" ]]; then
  echo "Installing the project and LangGraph into $VENV (log: $VENV/pip.log)"
  if ! "$VENV/bin/python" -m pip install --progress-bar off -e . "${BENCH_DEPS[@]}" \
    >"$VENV/pip.log" 2>&1; then
    tail -n 40 "$VENV/pip.log" >&2
    echo "error: pip install failed (full log: $VENV/pip.log)" >&2
    exit 1
  fi
  rm -f "$VENV"/.bench-deps-*
  touch "$STAMP"
fi

[[ "${BENCH_SETUP_ONLY:-}" == 1 ]] && exit 0

# Leading words name modules; everything from the first option on goes to each module.
MODULES=()
while [[ $# -gt 0 && "$1" != -* ]]; do
  module=${1%.py}
  MODULES+=("${module#benchmarks/}")
  shift
done
[[ ${#MODULES[@]} -gt 0 ]] || MODULES=(engine_core checkpointers)

status=0
for module in "${MODULES[@]}"; do
  echo
  "$VENV/bin/python" -m "benchmarks.$module" "$@" || status=$?
done
exit "$status"
