#!/usr/bin/env bash
# The public OSU Micro-Benchmarks built with Debian's Open MPI (mpicc.openmpi), unmodified,
# on three transports of the same Open MPI, from one interleaved run (every cell is run once
# per system in turn, so drift of the machine hits all columns alike):
#   shm      --mca pml ob1 --mca btl self,vader           (Open MPI's own shared memory)
#   ofi-tcp  --mca pml cm --mca mtl ofi, provider tcp      (libfabric's tcp provider)
#   nicemu   --mca pml cm --mca mtl ofi, provider nicemu   (this repository's provider,
#            each rank hosting its own emulated Cassini)
# The table gives the figure of the OSU output's last row, as the median of ROUNDS runs.
#
# usage: bench/osu_ofi_compare.sh OSU_SOURCE_DIR
# env:   PROVIDER_SO=file  libnicemu_fi.so (default: `cargo build --release -p ofi-provider`)
#        ITERS=n           iterations of the 8 B rows (default 10000; 4 MiB rows: ITERS/100,
#                          at least 10, osu_bw with its default window of 64 messages)
#        ROUNDS=n          interleaved rounds (default 3)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

osu=${1:?usage: bench/osu_ofi_compare.sh OSU_SOURCE_DIR}
[ -f "$osu/c/util/osu_util_mpi.c" ] || {
    echo "osu_ofi_compare.sh: $osu does not look like an OSU Micro-Benchmarks source tree (no c/util/osu_util_mpi.c)" >&2
    exit 2
}
osu=$(cd "$osu" && pwd)
iters=${ITERS:-10000}
rounds=${ROUNDS:-3}
for v in "$iters" "$rounds"; do
    case "$v" in '' | *[!0-9]* | 0)
        echo "osu_ofi_compare.sh: ITERS and ROUNDS must be positive integers (got '$v')" >&2
        exit 2
        ;;
    esac
done
big_iters=$((iters / 100 > 10 ? iters / 100 : 10))
for tool in mpicc.openmpi mpirun.openmpi; do
    command -v "$tool" >/dev/null || {
        echo "osu_ofi_compare.sh: $tool not found; install Debian's Open MPI: apt-get install openmpi-bin libopenmpi-dev" >&2
        exit 1
    }
done
if [ -z "${PROVIDER_SO:-}" ]; then
    (cd "$here" && cargo build --release -q -p ofi-provider)
    PROVIDER_SO=${CARGO_TARGET_DIR:-$here/target}/release/libnicemu_fi.so
fi
[ -f "$PROVIDER_SO" ] || {
    echo "osu_ofi_compare.sh: no provider at $PROVIDER_SO" >&2
    exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/prov" "$work/bin"
ln -s "$(cd "$(dirname "$PROVIDER_SO")" && pwd)/$(basename "$PROVIDER_SO")" "$work/prov/libnicemu-fi.so"

echo "building osu_latency and osu_bw with mpicc.openmpi..." >&2
flags=(-O2 -DPACKAGE_VERSION='"7.x"' -DFIELD_WIDTH=18 -DFLOAT_PRECISION=2 -D_ENABLE_MPI3_ -I"$osu/c/util")
for f in osu_util osu_util_mpi osu_util_validation osu_util_graph osu_util_papi; do
    mpicc.openmpi "${flags[@]}" -c "$osu/c/util/$f.c" -o "$work/bin/$f.o"
done
for p in osu_latency osu_bw; do
    mpicc.openmpi "${flags[@]}" -o "$work/bin/$p" "$osu/c/mpi/pt2pt/standard/$p.c" "$work/bin"/osu_util*.o -lm
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# run SYSTEM PROG ARGS...: the OSU output of PROG, two ranks on this host
run() {
    local sys=$1 prog=$2
    shift 2
    local mca
    case "$sys" in
    shm) mca=(--mca pml ob1 --mca btl self,vader) ;;
    ofi-tcp) mca=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp -x FI_PROVIDER=tcp) ;;
    nicemu) mca=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include nicemu
        -x FI_PROVIDER_PATH="$work/prov" -x FI_PROVIDER=nicemu) ;;
    esac
    timeout 600 mpirun.openmpi -np 2 --bind-to none "${mca[@]}" "$work/bin/$prog" "$@"
}
# last row, column 2, of an OSU table
figure() { awk '!/^#/ && NF >= 2 && $1 ~ /^[0-9]/ { v = $2 } END { print v }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

systems="shm ofi-tcp nicemu"
printf '| benchmark | size | unit | Open MPI shm (ob1 vader) | Open MPI ofi tcp | Open MPI ofi nicemu |\n|---|---|---|---|---|---|\n'
# NAME SIZE UNIT ARGS...
row() {
    local prog=$1 size=$2 unit=$3 sys out r line="| $1 | $2 | $3 |"
    shift 3
    for sys in $systems; do : >"$work/$sys.vals"; done
    for ((r = 0; r < rounds; r++)); do
        for sys in $systems; do
            if out=$(run "$sys" "$prog" "$@" 2>"$work/stderr"); then
                figure <<<"$out" >>"$work/$sys.vals"
            else
                echo "osu_ofi_compare.sh: $prog on $sys failed:" >&2
                cat "$work/stderr" >&2
            fi
        done
    done
    for sys in $systems; do
        line="$line $(median <"$work/$sys.vals" | grep . || echo failed) |"
    done
    echo "$line"
}
row osu_latency 8 µs -m 8:8 -i "$iters" -x $((iters / 10))
row osu_bw 4MiB MB/s -m 4194304:4194304 -i "$big_iters" -x 2
