#!/usr/bin/env bash
# Real Gemini software on emulated Gemini: Open MPI 4.1 built unmodified with its ugni BTL
# against nicemu's libugni.so.0 and gni_pub.h, and the public OSU Micro-Benchmarks built with
# that Open MPI, run under its own mpirun with each rank hosting its own emulated Gemini
# (libugni finds the other ranks through pmi::rendezvous; docs/real-ugni.md).
#
# Fetches nothing: give it an unpacked Open MPI 4.1 source tree (Debian's `apt-get source
# openmpi`, or a 4.1.x release) and an unpacked OSU source tree (7.x). Everything is built
# outside the repository, under $UGNI_WORK.
#
# usage: bench/real-ugni.sh OMPI_SRC OSU_SRC
# env:   UGNI_WORK=dir   where the builds go (default ${TMPDIR:-/tmp}/nicemu-real-ugni); an
#                        Open MPI already installed there is reused
#        ITERS=n         iterations of the small-message rows (default 1000; large rows:
#                        ITERS/10, at least 10)
#        NPS="2"         process counts (all on this host)
#        BTLS="ugni,self" BTL lists (with vader in the list, vader carries the messages
#                        between ranks of one host: the counters then show no SMSG)
#
# First a check that the ugni BTL is the one in use (btl_base_verbose: the component
# initialised, the BML chose it for the peer). Then one table row per benchmark, process
# count and BTL list: the figure of the OSU output's last row and, from
# NICEMU_UGNI_COUNTER_REPORT, what rank 0's library did (SMSG messages, FMA and BTE GETs
# and PUTs); then the protocol rows: an 8 B message (SMSG), a 1 MiB message (GET
# rendezvous) and a 1 MiB + 1 B message (ob1's put fallback, as the ugni BTL's get declines
# an unaligned length). The one-sided rows run osc/rdma over MPI_Win_create windows: with
# MPI_Win_allocate, ranks of one host share the window's memory (osc/sm, or osc/rdma's
# shared-memory path) and no transfer reaches the BTL.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

ompi=${1:?usage: bench/real-ugni.sh OMPI_SRC OSU_SRC}
osu=${2:?usage: bench/real-ugni.sh OMPI_SRC OSU_SRC}
[ -f "$ompi/opal/mca/btl/ugni/btl_ugni_module.c" ] || {
    echo "real-ugni.sh: $ompi is not an Open MPI 4.1 source tree (no opal/mca/btl/ugni)" >&2
    exit 2
}
[ -f "$osu/c/util/osu_util_mpi.c" ] || {
    echo "real-ugni.sh: $osu is not an OSU Micro-Benchmarks source tree (no c/util/osu_util_mpi.c)" >&2
    exit 2
}
ompi=$(cd "$ompi" && pwd)
osu=$(cd "$osu" && pwd)
work=${UGNI_WORK:-${TMPDIR:-/tmp}/nicemu-real-ugni}
mkdir -p "$work"
work=$(cd "$work" && pwd)
iters=${ITERS:-1000}
case "$iters" in '' | *[!0-9]* | 0)
    echo "real-ugni.sh: ITERS must be a positive integer (got '$iters')" >&2
    exit 2
    ;;
esac
big_iters=$((iters / 10 > 10 ? iters / 10 : 10))
nps=${NPS:-2}
btls=${BTLS:-ugni,self}

# 1. libugni.so.0, gni_pub.h and the pkg-config files Open MPI's configure looks for.
echo "== building libugni (cargo build --release -p ugni)" >&2
(cd "$here" && cargo build --release -q -p ugni)
lib=${CARGO_TARGET_DIR:-$here/target}/release/libugni.so
ugni=$work/ugni
mkdir -p "$ugni/lib/pkgconfig" "$ugni/include"
cp -f "$lib" "$ugni/lib/libugni.so.0"
ln -sf libugni.so.0 "$ugni/lib/libugni.so"
cp -f "$here/crates/ugni/include/gni_pub.h" "$ugni/include/"
for pc in cray-ugni cray-gni-headers; do
    sed "s|@PREFIX@|$ugni|" "$here/crates/ugni/pkgconfig/$pc.pc.in" >"$ugni/lib/pkgconfig/$pc.pc"
done

# 2. Open MPI with --with-ugni (built once per work directory).
prefix=$work/openmpi
if [ ! -x "$prefix/bin/mpicc" ]; then
    echo "== configuring and building Open MPI from $ompi into $prefix (takes a while)" >&2
    build=$work/openmpi-build
    rm -rf "$build"
    mkdir -p "$build"
    (cd "$build" && PKG_CONFIG_PATH=$ugni/lib/pkgconfig "$ompi/configure" \
        --prefix="$prefix" --with-ugni --disable-mpi-fortran --disable-oshmem \
        --without-ucx --without-verbs --without-ofi --without-psm2 --without-cuda \
        --disable-mpi-java --enable-mca-no-build=btl-uct,btl-usnic,btl-openib \
        >"$work/ompi-configure.log" 2>&1) || {
        echo "real-ugni.sh: Open MPI's configure failed; see $work/ompi-configure.log" >&2
        exit 1
    }
    grep -q "Cray uGNI (Gemini/Aries): yes" "$work/ompi-configure.log" || {
        echo "real-ugni.sh: Open MPI's configure did not take uGNI; see $work/ompi-configure.log" >&2
        exit 1
    }
    (cd "$build" && make -j"$(nproc)" >"$work/ompi-make.log" 2>&1 && make install >>"$work/ompi-make.log" 2>&1) || {
        echo "real-ugni.sh: building Open MPI failed; see $work/ompi-make.log" >&2
        exit 1
    }
fi
[ -f "$prefix/lib/openmpi/mca_btl_ugni.so" ] || {
    echo "real-ugni.sh: $prefix has no ugni BTL (mca_btl_ugni.so)" >&2
    exit 1
}

# 3. The OSU benchmarks with that Open MPI's mpicc.
echo "== building the OSU benchmarks" >&2
bin=$work/osu-bin
mkdir -p "$bin"
flags=(-O2 -DPACKAGE_VERSION='"7.x"' -DFIELD_WIDTH=18 -DFLOAT_PRECISION=2 -D_ENABLE_MPI3_ -I"$osu/c/util")
for f in osu_util osu_util_mpi osu_util_validation osu_util_graph osu_util_papi; do
    "$prefix/bin/mpicc" "${flags[@]}" -c "$osu/c/util/$f.c" -o "$bin/$f.o"
done
for p in pt2pt/standard/osu_latency pt2pt/standard/osu_bw pt2pt/standard/osu_bibw \
    collective/blocking/osu_allreduce collective/blocking/osu_alltoall \
    one-sided/osu_put_latency one-sided/osu_get_latency one-sided/osu_get_bw; do
    "$prefix/bin/mpicc" "${flags[@]}" -o "$bin/$(basename "$p")" "$osu/c/mpi/$p.c" "$bin"/osu_util*.o -lm
done

# 4. The table.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PMI_GNI_PTAG=${PMI_GNI_PTAG:-16} PMI_GNI_COOKIE=${PMI_GNI_COOKIE:-1073741824}
# run NP BTLS PROG ARGS...: the OSU output of PROG and the counter lines on stderr
run() {
    local np=$1 btl=$2 prog=$3
    shift 3
    local osc=()
    case "$prog" in osu_put_* | osu_get_* | osu_acc_*) osc=(--mca osc rdma) ;; esac
    timeout "${RUN_TIMEOUT:-900}" "$prefix/bin/mpirun" -np "$np" --oversubscribe --bind-to none \
        --mca pml ob1 --mca btl "$btl" \
        "${osc[@]}" ${MPIRUN_ARGS:-} \
        -x PMI_GNI_PTAG -x PMI_GNI_COOKIE -x NICEMU_UGNI_COUNTER_REPORT=1 \
        -x LD_LIBRARY_PATH="$ugni/lib" "$bin/$prog" "$@" 2>&1
}
# figure: the value of the OSU output's last row (a size and a number; other lines that
# begin with a digit, such as mpirun's messages, are not rows)
figure() { awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+(\.[0-9]+)?$/ { v = $2 } END { print v }'; }
# count NAME: rank 0's counter NAME from the counter lines
count() { sed -n "s/^nicemu-ugni: rank 0 of .*[ ]$1=\([0-9]*\).*/\1/p" | head -1; }

# The BTL in use: with only ugni and self, MPI_Init fails unless ugni reaches the peer;
# the verbose lines say so in Open MPI's own words.
echo "btl check (osu_latency, 2 processes, --mca btl ugni,self, btl_base_verbose 100):"
MPIRUN_ARGS="--mca btl_base_verbose 100" run 2 ugni,self osu_latency -m 8:8 -i 10 -x 1 |
    grep -E "select: init of component ugni|bml: Using ugni btl" | sed 's/^/  /' | sort -u
echo
printf '%-16s %3s %-16s %-9s %12s %10s %10s %10s %10s %10s\n' benchmark np btl size figure \
    smsg fma_gets rdma_gets fma_puts rdma_puts
row() { # NAME NP BTL SIZE PROG ARGS...
    local name=$1 np=$2 btl=$3 size=$4 prog=$5 out
    shift 5
    if out=$(run "$np" "$btl" "$prog" "$@"); then
        printf '%-16s %3s %-16s %-9s %12s %10s %10s %10s %10s %10s\n' "$name" "$np" "$btl" "$size" \
            "$(figure <<<"$out")" "$(count ugni.smsg_sends <<<"$out")" "$(count ugni.fma_gets <<<"$out")" \
            "$(count ugni.rdma_gets <<<"$out")" "$(count ugni.fma_puts <<<"$out")" "$(count ugni.rdma_puts <<<"$out")"
    else
        printf '%-16s %3s %-16s %-9s %12s\n' "$name" "$np" "$btl" "$size" FAILED
        printf '%s\n' "$out" | tail -20 >&2
    fi
}
small=(-i "$iters" -x $((iters / 10)))
large=(-i "$big_iters" -x 2)
for btl in $btls; do
    for np in $nps; do
        if [ "$np" = 2 ]; then
            row osu_latency 2 "$btl" 8B osu_latency -m 8:8 "${small[@]}"
            row osu_latency 2 "$btl" 1MiB osu_latency -m 1048576:1048576 "${large[@]}"
            row osu_bw 2 "$btl" 8B osu_bw -m 8:8 "${small[@]}"
            row osu_bw 2 "$btl" 1MiB osu_bw -m 1048576:1048576 "${large[@]}"
            row osu_bibw 2 "$btl" 1MiB osu_bibw -m 1048576:1048576 "${large[@]}"
            row osu_put_latency 2 "$btl" 8B osu_put_latency -w create -m 8:8 "${small[@]}"
            row osu_get_latency 2 "$btl" 8B osu_get_latency -w create -m 8:8 "${small[@]}"
            row osu_get_bw 2 "$btl" 1MiB osu_get_bw -w create -m 1048576:1048576 "${large[@]}"
        fi
        row osu_allreduce "$np" "$btl" 8B osu_allreduce -m 8:8 "${small[@]}"
        row osu_allreduce "$np" "$btl" 1MiB osu_allreduce -m 1048576:1048576 "${large[@]}"
        row osu_alltoall "$np" "$btl" 8B osu_alltoall -m 8:8 "${small[@]}"
        row osu_alltoall "$np" "$btl" 64KiB osu_alltoall -m 65536:65536 "${large[@]}"
    done
done
echo
echo "protocols (ugni,self, 2 processes; rank 0's library counters):"
row "SMSG" 2 ugni,self 8B osu_latency -m 8:8 -i 100 -x 10
row "GET rendezvous" 2 ugni,self 1MiB osu_latency -m 1048576:1048576 -i 10 -x 2
# Known to hang (both ranks polling, nothing in flight; docs/real-ugni.md): bounded.
RUN_TIMEOUT=120 row "put fallback" 2 ugni,self 1MiB+1 osu_latency -m 1048577:1048577 -i 10 -x 2
