#!/usr/bin/env bash
# The device checks of issue 54, in the order they pay, for one 15-minute lease of a GPU:
#
#   bash experiments/perf/gpu_check.sh          # on the device (the `device` tool's run)
#
# Every step has its own time limit and writes under $OUT (default: results/gpu_check; at
# most 8 files, what the device tool returns), so a lease that ends midway keeps what was
# done; episode_cost.py's progress on stderr (each agent's compile and every chunk, timed)
# goes to the logs. Steps (STEPS, default "compile reservoir rows"; "roofline" adds the
# device's roofline, which docs/results/episode_cost/gpu has for the H200):
#   compile: the reservoir at 16 seeds, each agent's compile and first chunk timed, with
#      XLA's GEMM autotuning on and off (--xla_gpu_autotune_level=0): after the
#      full-precision products (5e27d69) the last lease's run printed no row in 320 s, and
#      a compile that autotunes every small product at HIGHEST is the first suspect;
#   reservoir: the reservoir (I = 2) at 1,024 seeds: is OptAug's solve certified on the
#      device, and where does its time go;
#   rows: the I = 1 rows at 1,024 seeds, then the other several-constraint row.
# The steps' limits add up to 560 s, within one device call's 600.
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
first() {  # name, seconds, extra XLA flags: the compile and first chunk of each agent, 16 seeds
  local flags="${XLA_FLAGS:-}"
  [ -n "$3" ] && flags="${flags:+$flags }$3"  # XLA reads a lone space as a file's name
  env ${flags:+"XLA_FLAGS=$flags"} timeout "$2" python3 experiments/episode_cost.py --seeds 16 \
    --agents optaug,optdual --late-after 0 --early 100 --problems reservoir --out "/tmp/$1.json" \
    >"$OUT/$1.log" 2>&1  # its log only: 8 files in all
  echo "$1: exit status $?"
  grep -i "compiled\|| early:" "$OUT/$1.log" | head -n 3
}
STEPS=${STEPS:-"compile reservoir rows"}
for step in $STEPS; do
  case $step in
    compile)
      first compile_autotuned 90 ""
      first compile_untuned 90 "--xla_gpu_autotune_level=0"
      ;;
    reservoir) cost reservoir 200 reservoir ;;
    roofline)
      timeout 90 python3 experiments/perf/roofline.py --sizes-mib "${SIZES:-1,16,256,4096}" \
        --out "$OUT/roofline.json" 2>&1 | grep -v -i "warn\|^  "
      ;;
    rows) cost rows 180 lost_sales,delivery,media_streaming,gridworld20_sparse,queue,random_i2 ;;
    *) echo "unknown step: $step" ;;
  esac
done
