#!/usr/bin/env bash
# nicemu beside MPICH shared memory, from one interleaved run on this machine.
#
# Builds bench/osu_small.c (ours) with Debian's mpich, builds nicemu (release), then runs ROUNDS
# rounds; each round runs every measurement once on every system in turn (MPICH shm, nicemu on
# emulated Cassini, nicemu on emulated Gemini), so drift of the machine hits all columns alike.
# Prints the median of the rounds per cell and the ratio to MPICH.
#
# Rows: MPI 8 B latency (osu_latency), MPI 4 MiB bandwidth (osu_bw, window 16), MPI 8 B message
# rate (osu_mbw_mr, one pair, window 64); then the NIC tools under MPI (send-lat, write-bw,
# send-bw -l 64 and their gni twins) against the same MPICH figures. The NIC tools run as many
# iterations as MPICH's side (20,000 round trips; 2,000 windows of 64), so both columns are
# steady-state figures rather than the tools' short defaults (100 and 10).
#
# usage: bench/compare.sh [ROUNDS]          (default 3)
# env:   NICEMU=path   use this nicemu binary instead of building one
#        MPIEXEC=cmd   the launcher (default: Debian's mpiexec.mpich if installed, else mpiexec)
#        MPICC=cmd     the compiler (default: Debian's mpicc.mpich if installed, else mpicc)
# Debian's MPICH installs mpiexec.mpich and mpicc.mpich; the plain names are alternatives that
# Open MPI takes over when it is installed too (and Open MPI's mpiexec refuses to run as root).
# The script looks for the MPICH names first so it measures MPICH either way.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
case "$rounds" in
'' | *[!0-9]* | 0)
    echo "compare.sh: ROUNDS must be a positive integer (got '$rounds')" >&2
    exit 2
    ;;
esac
# first_of NAME...: the first NAME found on PATH (or the last NAME, for the error below)
first_of() {
    local t
    for t in "$@"; do
        command -v "$t" >/dev/null && break
    done
    echo "$t"
}
mpiexec=${MPIEXEC:-$(first_of mpiexec.mpich mpiexec)}
mpicc=${MPICC:-$(first_of mpicc.mpich mpicc)}
for tool in "$mpicc" "$mpiexec"; do
    command -v "$tool" >/dev/null || {
        echo "compare.sh: $tool not found; install Debian's MPICH: apt-get install mpich libmpich-dev" >&2
        exit 1
    }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$mpicc" -O2 -Wall -o "$work/osu_small" bench/osu_small.c
echo "compare.sh: MPICH from $(command -v "$mpicc") and $(command -v "$mpiexec")" >&2
if [ -z "${NICEMU:-}" ]; then
    cargo build --release -q -p nicemu
    NICEMU=${CARGO_TARGET_DIR:-target}/release/nicemu
fi

# run NAME COMMAND...: append the figure COMMAND prints to $work/NAME; the parser is chosen
# by the kind of output (see value()).
value() { # KIND < output
    case "$1" in
    mpich) awk 'NF == 3 { print $3 }' ;;                      # "<test> <size> <value>"
    osu) awk '!/^#/ && NF >= 2 { v = $2 } END { print v }' ;; # OSU table, last row
    osu_rate) awk '!/^#/ && NF >= 3 { v = $3 } END { print v }' ;;
    lat) awk '/^ +[0-9]+ +[0-9]+ / { v = $5 } END { print v }' ;;  # Mean[us]
    bw) awk '/^ +[0-9]+ +[0-9]+ / { v = $3 } END { print v }' ;;   # BW[MB/s]
    rate) awk '/^ +[0-9]+ +[0-9]+ / { v = $4 * 1e6 } END { print v }' ;; # PktRate[Mpkt/s]
    esac
}
run() { # NAME KIND COMMAND...
    local name=$1 kind=$2
    shift 2
    local out v
    if ! out=$("$@" 2>"$work/stderr"); then
        echo "compare.sh: '$*' failed:" >&2
        cat "$work/stderr" >&2
        exit 1
    fi
    v=$(value "$kind" <<<"$out")
    [ -n "$v" ] || {
        echo "compare.sh: no figure in the output of '$*':" >&2
        echo "$out" >&2
        exit 1
    }
    echo "$v" >>"$work/$name"
}

mpi() { "$mpiexec" -n 2 "$work/osu_small" "$@"; }
osu() { "$NICEMU" osu "$@"; }

for r in $(seq 1 "$rounds"); do
    echo "round $r of $rounds..." >&2
    run lat.mpich mpich mpi latency 8 20000
    run lat.cxi osu osu latency --nic cassini -m 8:8 -i 2000
    run lat.gni osu osu latency --nic gemini -m 8:8 -i 2000
    run bw.mpich mpich mpi bw 4194304 50 16
    run bw.cxi osu osu bw --nic cassini -m 4M:4M -W 16 --iterations-large 20
    run bw.gni osu osu bw --nic gemini -m 4M:4M -W 16 --iterations-large 20
    run rate.mpich mpich mpi rate 8 2000 64
    run rate.cxi osu_rate osu mbw_mr --nic cassini -m 8:8 -W 64 -i 200
    run rate.gni osu_rate osu mbw_mr --nic gemini -m 8:8 -W 64 -i 200
    run niclat.cxi lat "$NICEMU" send-lat -s 8 -n 20000
    run niclat.gni lat "$NICEMU" gni-send-lat -s 8 -n 20000
    run nicbw.cxi bw "$NICEMU" write-bw -s 4M
    run nicbw.gni bw "$NICEMU" gni-write-bw -s 4M
    run nicrate.cxi rate "$NICEMU" send-bw -s 8 -l 64 -n 2000
    run nicrate.gni rate "$NICEMU" gni-send-bw -s 8 -l 64 -n 2000
done

median() { sort -g "$work/$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

echo
echo "nicemu beside MPICH shm: median of $rounds interleaved rounds ($(nproc) CPUs, $(date -u +%F))"
printf '%-30s %12s %12s %8s %12s %8s  %s\n' "measurement" "MPICH shm" "nicemu cxi" "ratio" "nicemu gni" "ratio" "goal"
row() { # LABEL MPICH-CELL PREFIX GOAL
    local m c g
    m=$(median "$2.mpich")
    c=$(median "$3.cxi")
    g=$(median "$3.gni")
    printf '%-30s %12s %12s %8s %12s %8s  %s\n' "$1" "$m" "$c" "$(ratio "$c" "$m")" "$g" "$(ratio "$g" "$m")" "$4"
}
row "MPI 8 B latency (us)" lat lat "<= 1.5"
row "MPI 4 MiB bandwidth (MB/s)" bw bw ">= 0.8"
row "MPI 8 B message rate (msg/s)" rate rate ">= 0.5"
row "NIC 8 B send latency (us)" lat niclat "<= 2"
row "NIC 4 MiB write bw (MB/s)" bw nicbw ">= 0.8"
row "NIC 8 B send rate (msg/s)" rate nicrate ">= 0.5"
