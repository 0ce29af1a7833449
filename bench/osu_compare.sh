#!/usr/bin/env bash
# The public OSU Micro-Benchmarks on nicemu (emulated Cassini and Gemini, under `nicemu run`)
# beside MPICH shared memory (Debian's mpich, under mpiexec.hydra), from one interleaved run.
#
# Fetches nothing: give it an unpacked OSU source tree (7.x; the tree's c/util and c/mpi are
# used, its build system is not). The same benchmark sources are compiled twice, unchanged:
# with nicemu's wrapper (nicemu-mpicc, MPI 5.0 standard ABI, libmpi_abi.so.1) and with
# mpicc.mpich. Every cell is run once per system in turn (MPICH, Cassini, Gemini) so drift of
# the machine hits all columns alike; the table gives the figure of the OSU output's last row.
#
# usage: bench/osu_compare.sh OSU_SOURCE_DIR
# env:   NICEMU_BIN=dir   directory holding nicemu, nicemu-mpicc and libmpi_abi.so
#                         (default: build them with `cargo build --release`)
#        ITERS=n          iterations of the small-message rows (default 1000; 4 MiB rows:
#                         ITERS/100, at least 2, with a window of 8 messages for the
#                         bandwidth benchmarks)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

osu=${1:?usage: bench/osu_compare.sh OSU_SOURCE_DIR}
[ -f "$osu/c/util/osu_util_mpi.c" ] || {
    echo "osu_compare.sh: $osu does not look like an OSU Micro-Benchmarks source tree (no c/util/osu_util_mpi.c)" >&2
    exit 2
}
osu=$(cd "$osu" && pwd)
iters=${ITERS:-1000}
case "$iters" in '' | *[!0-9]* | 0)
    echo "osu_compare.sh: ITERS must be a positive integer (got '$iters')" >&2
    exit 2
    ;;
esac
big_iters=$((iters / 100 > 2 ? iters / 100 : 2))
for tool in mpicc.mpich mpiexec.hydra; do
    command -v "$tool" >/dev/null || {
        echo "osu_compare.sh: $tool not found; install Debian's MPICH: apt-get install mpich libmpich-dev" >&2
        exit 1
    }
done
if [ -z "${NICEMU_BIN:-}" ]; then
    (cd "$here" && cargo build --release -q -p nicemu -p mpi-abi)
    NICEMU_BIN=${CARGO_TARGET_DIR:-$here/target}/release
fi
nicemu=$NICEMU_BIN/nicemu

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

benchmarks="pt2pt/standard/osu_latency pt2pt/standard/osu_bw pt2pt/standard/osu_bibw
pt2pt/standard/osu_mbw_mr collective/blocking/osu_bcast collective/blocking/osu_allreduce
collective/blocking/osu_alltoall collective/blocking/osu_barrier one-sided/osu_put_latency
one-sided/osu_get_bw"

build() { # OUTDIR CC
    local out=$1 cc=$2 f p
    mkdir -p "$out"
    local flags=(-O2 -DPACKAGE_VERSION='"7.x"' -DFIELD_WIDTH=18 -DFLOAT_PRECISION=2 -D_ENABLE_MPI3_ -I"$osu/c/util")
    for f in osu_util osu_util_mpi osu_util_validation osu_util_graph osu_util_papi; do
        "$cc" "${flags[@]}" -c "$osu/c/util/$f.c" -o "$out/$f.o"
    done
    for p in $benchmarks; do
        "$cc" "${flags[@]}" -o "$out/$(basename "$p")" "$osu/c/mpi/$p.c" "$out"/osu_util*.o -lm
    done
}
echo "building the benchmarks with nicemu-mpicc and mpicc.mpich..." >&2
build "$work/nicemu" "$NICEMU_BIN/nicemu-mpicc"
build "$work/mpich" mpicc.mpich

# run SYSTEM NP PROG ARGS...: the OSU output of PROG on SYSTEM (mpich | cassini | gemini)
run() {
    local sys=$1 np=$2 prog=$3
    shift 3
    case "$sys" in
    mpich) timeout 600 mpiexec.hydra -n "$np" "$work/mpich/$prog" "$@" ;;
    *) timeout 600 "$nicemu" run -n "$np" --nic "$sys" -- "$work/nicemu/$prog" "$@" ;;
    esac
}
# last row, column COL, of an OSU table
figure() { awk -v c="$1" '!/^#/ && NF >= c && $1 ~ /^[0-9]/ { v = $c } END { print v }'; }

printf '| benchmark | ranks | size | unit | MPICH shm | Cassini | Gemini |\n|---|---|---|---|---|---|---|\n'
# NAME NP SIZE UNIT COL ARGS...
row() {
    local prog=$1 np=$2 size=$3 unit=$4 col=$5 sys out v line="| $1 | $2 | $3 | $4 |"
    shift 5
    for sys in mpich cassini gemini; do
        if out=$(run "$sys" "$np" "$prog" "$@" 2>"$work/stderr"); then
            v=$(figure "$col" <<<"$out")
        else
            echo "osu_compare.sh: $prog on $sys failed:" >&2
            cat "$work/stderr" >&2
            v=
        fi
        line="$line ${v:-failed} |"
    done
    echo "$line"
}
small=(-i "$iters" -x $((iters / 10)))
large=(-i "$big_iters" -x 1)
window=(-W 8)
row osu_latency 2 8 µs 2 -m 8:8 "${small[@]}"
row osu_latency 2 4MiB µs 2 -m 4194304:4194304 "${large[@]}"
row osu_bw 2 8 MB/s 2 -m 8:8 "${small[@]}"
row osu_bw 2 4MiB MB/s 2 -m 4194304:4194304 "${large[@]}" "${window[@]}"
row osu_bibw 2 4MiB MB/s 2 -m 4194304:4194304 "${large[@]}" "${window[@]}"
row osu_mbw_mr 2 8 msg/s 3 -m 8:8 "${small[@]}"
row osu_mbw_mr 2 4MiB MB/s 2 -m 4194304:4194304 "${large[@]}" "${window[@]}"
for np in 2 4; do
    row osu_bcast "$np" 8 µs 2 -m 8:8 "${small[@]}"
    row osu_bcast "$np" 4MiB µs 2 -m 4194304:4194304 "${large[@]}"
    row osu_allreduce "$np" 8 µs 2 -m 8:8 "${small[@]}"
    row osu_allreduce "$np" 4MiB µs 2 -m 4194304:4194304 "${large[@]}"
    row osu_alltoall "$np" 8 µs 2 -m 8:8 "${small[@]}"
    row osu_alltoall "$np" 1MiB µs 2 -m 1048576:1048576 "${large[@]}"
    row osu_barrier "$np" - µs 1 "${small[@]}"
done
row osu_put_latency 2 8 µs 2 -m 8:8 "${small[@]}"
row osu_get_bw 2 4MiB MB/s 2 -m 4194304:4194304 "${large[@]}" "${window[@]}"
