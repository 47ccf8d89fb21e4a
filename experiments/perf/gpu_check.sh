#!/usr/bin/env bash
# The device checks of issue 54, in the order they pay, for one 15-minute lease of a GPU:
#
#   bash experiments/perf/gpu_check.sh          # on the device (the `device` tool's run)
#
# Every step has its own time limit and writes under $OUT (default: results/gpu_check; at
# most 8 files, what the device tool returns), so a lease that ends midway keeps what was done; episode_cost.py's progress on stderr (each
# agent's compile and every chunk, timed) goes to the logs. Steps:
#   1. the reservoir (I = 2) at 1,024 seeds: after the full-precision products (5e27d69),
#      is OptAug's solve certified on the device, and where does its time go (the last
#      lease's run printed no row in 320 s);
#   2. the device's roofline (perf/roofline.py), if the lease has no file of it yet;
#   3. the I = 1 rows at 1,024 seeds, then the other several-constraint row.
# Afterwards, on any machine: perf/roofline.py --measured roofline.json --cost rows.json.
set -u
OUT=${OUT:-results/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-.}
SEEDS=${SEEDS:-1024}  # SEEDS=2 FLAGS="--chunk 10 --early 10": a smoke run on a CPU
FLAGS=${FLAGS:-"--early 200"}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
quiet() { grep "| early:" "$1"; grep -v -i "warn\|^  \|| early:" "$1" | tail -n 2; }
cost() {  # name, seconds, problems
  # shellcheck disable=SC2086
  timeout "$2" python3 experiments/episode_cost.py --seeds "$SEEDS" --agents optaug,optdual \
    --late-after 0 $FLAGS --problems "$3" --out "$OUT/$1.json" >"$OUT/$1.log" 2>&1
  echo "$1: exit status $?"
  quiet "$OUT/$1.log"
}
cost reservoir 240 reservoir
timeout 90 python3 experiments/perf/roofline.py --sizes-mib "${SIZES:-1,16,256,4096}" \
  --out "$OUT/roofline.json" 2>&1 | grep -v -i "warn\|^  "
cost rows 300 lost_sales,delivery,media_streaming,gridworld20_sparse,queue,random_i2
