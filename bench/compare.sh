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
# Then it sweeps message sizes from 1 B to 4 MiB (MPICH: osu_small at every power of two;
# nicemu: `nicemu osu latency|bw -m 1:4M` on each NIC) and draws latency and bandwidth against
# message size, the three systems side by side, with `nicemu plot` into $SVG.
#
# usage: bench/compare.sh [ROUNDS]          (default 3)
#        bench/compare.sh --plot-only       the sweep and the plot, no table
#        SVG=file      where the plot goes (default docs/img/mpi-vs-mpich.svg; empty: no plot)
# env:   NICEMU=path   use this nicemu binary instead of building one
#        MPIEXEC=cmd   the launcher (default: Debian's mpiexec.mpich if installed, else mpiexec)
#        MPICC=cmd     the compiler (default: Debian's mpicc.mpich if installed, else mpicc)
# Debian's MPICH installs mpiexec.mpich and mpicc.mpich; the plain names are alternatives that
# Open MPI takes over when it is installed too (and Open MPI's mpiexec refuses to run as root).
# The script looks for the MPICH names first so it measures MPICH either way.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

plot_only=
if [ "${1:-}" = --plot-only ]; then
    plot_only=1
    shift
fi
rounds=${1:-3}
case "$rounds" in
'' | *[!0-9]* | 0)
    echo "compare.sh: ROUNDS must be a positive integer (got '$rounds')" >&2
    exit 2
    ;;
esac
svg=${SVG-docs/img/mpi-vs-mpich.svg}
find_mpich

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$mpicc" -O2 -Wall -o "$work/osu_small" bench/osu_small.c
echo "compare.sh: MPICH from $(command -v "$mpicc") and $(command -v "$mpiexec")" >&2
if [ -z "${NICEMU:-}" ]; then
    cargo build --release -q -p nicemu
    NICEMU=${CARGO_TARGET_DIR:-target}/release/nicemu
fi

mpi() { "$mpiexec" -n 2 "$work/osu_small" "$@"; }
osu() { "$NICEMU" osu "$@"; }

if [ -z "$plot_only" ]; then
    for r in $(seq 1 "$rounds"); do
        echo "round $r of $rounds..." >&2
        measure lat.mpich small mpi latency 8 20000
        measure lat.cxi osu osu latency --nic cassini -m 8:8 -i 2000
        measure lat.gni osu osu latency --nic gemini -m 8:8 -i 2000
        measure bw.mpich small mpi bw 4194304 50 16
        measure bw.cxi osu osu bw --nic cassini -m 4M:4M -W 16 --iterations-large 20
        measure bw.gni osu osu bw --nic gemini -m 4M:4M -W 16 --iterations-large 20
        measure rate.mpich small mpi rate 8 2000 64
        measure rate.cxi osu_rate osu mbw_mr --nic cassini -m 8:8 -W 64 -i 200
        measure rate.gni osu_rate osu mbw_mr --nic gemini -m 8:8 -W 64 -i 200
        measure niclat.cxi lat "$NICEMU" send-lat -s 8 -n 20000
        measure niclat.gni lat "$NICEMU" gni-send-lat -s 8 -n 20000
        measure nicbw.cxi bw "$NICEMU" write-bw -s 4M
        measure nicbw.gni bw "$NICEMU" gni-write-bw -s 4M
        measure nicrate.cxi rate "$NICEMU" send-bw -s 8 -l 64 -n 2000
        measure nicrate.gni rate "$NICEMU" gni-send-bw -s 8 -l 64 -n 2000
    done

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
fi

[ -n "$svg" ] || exit 0
# The sweep: MPICH's figures as OSU tables (one osu_small run per size), nicemu's as printed.
echo "sweeping 1 B to 4 MiB for the plot..." >&2
{
    echo "# OSU MPI Latency Test"
    echo "# Size       Avg Latency(us)"
    for ((s = 1; s <= 4194304; s *= 2)); do
        mpi latency "$s" $((s > 8192 ? 100 : 1000)) | figure_of small | sed "s/^/$s /"
    done
    echo "# OSU MPI Bandwidth Test"
    echo "# Size      Bandwidth (MB/s)"
    for ((s = 1; s <= 4194304; s *= 2)); do
        mpi bw "$s" $((s > 8192 ? 10 : 100)) 16 | figure_of small | sed "s/^/$s /"
    done
} >"$work/sweep.mpich"
for nic in cassini gemini; do
    {
        osu latency --nic "$nic" -m 1:4M -i 1000 --iterations-large 100
        osu bw --nic "$nic" -m 1:4M -W 16 -i 100 --iterations-large 10
    } >"$work/sweep.$nic"
done
mkdir -p "$(dirname "$svg")"
"$NICEMU" plot -o "$svg" \
    --title "MPI between two ranks: MPICH shared memory and nicemu in one process ($(date -u +%F))" \
    "MPICH $("$mpiexec" --version 2>/dev/null | awk '/Version:/ { print $2; exit }') shared memory=$work/sweep.mpich" \
    "nicemu, emulated Cassini (cxi)=$work/sweep.cassini" \
    "nicemu, emulated Gemini (gni)=$work/sweep.gemini" >&2
