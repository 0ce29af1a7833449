#!/usr/bin/env bash
# The tables of docs/PERFORMANCE.md, from one run on this machine: every figure in them comes
# from here, with the command that measured it.
#
# Builds nicemu, nicemu-mpicc, libmpi_abi.so and the libfabric provider (release), installs
# them in a temporary prefix (`nicemu install`), builds bench/osu_small.c with Debian's MPICH,
# with the installed nicemu-mpicc and (when Open MPI is installed) with mpicc.openmpi, then runs
# ROUNDS rounds of every timed measurement, each round every system in turn so drift of the
# machine hits all columns alike, and prints the median of the rounds per cell:
#
#   nic-cassini, nic-gemini  the NIC tools (`nicemu send-lat`, `gni-write-bw`, ...) over an
#                            emulated pair, threaded engine, beside MPICH shared memory
#   mpi-inprocess            `nicemu osu` (ranks as threads of one process) beside MPICH
#   mpi-processes            osu_small built with nicemu-mpicc under `nicemu run -n 2` (one
#                            process and one emulated NIC per rank) beside MPICH
#   ofi                      osu_small built with Open MPI over the provider `nicemu`
#                            beside Open MPI's shared memory (skipped without Open MPI)
#   engine                   `nicemu bench engine`
#   memory                   `nicemu job` peak RSS per rank, `nicemu devices` per idle NIC
#                            (one run each: they do not depend on the load)
#   machine                  CPU, memory, kernel, load average before and after, commit
# and plots every benchmark of `nicemu osu` on both NICs (4 nodes) with `nicemu plot`.
#
# Every table is printed between `<!-- perf-tables:NAME -->` and `<!-- /perf-tables:NAME -->`
# lines; with --write the blocks of docs/PERFORMANCE.md are replaced by them in place and the
# plot is written to docs/img/osu-all.svg.
#
# usage: bench/perf-tables.sh [--write] [ROUNDS]     (default 3 rounds)
# env:   NICEMU_BIN=dir  the target directory holding nicemu, nicemu-mpicc, libmpi_abi.so and
#                        libnicemu_fi.so (default: `cargo build --release` them)
#        MPIEXEC, MPICC  MPICH's launcher and compiler (default: mpiexec.mpich, mpicc.mpich)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

write=
if [ "${1:-}" = --write ]; then
    write=1
    shift
fi
rounds=${1:-3}
case "$rounds" in '' | *[!0-9]* | 0)
    echo "perf-tables.sh: ROUNDS must be a positive integer (got '$rounds')" >&2
    exit 2
    ;;
esac
find_mpich
export ON_FAILURE=skip
load_start=$(load)
started=$(date -u '+%F %H:%M')

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "${NICEMU_BIN:-}" ]; then
    cargo build --release -q -p nicemu -p mpi-abi -p ofi-provider
    NICEMU_BIN=${CARGO_TARGET_DIR:-target}/release
fi
"$NICEMU_BIN/nicemu" install --from "$NICEMU_BIN" --prefix "$work/prefix" >/dev/null
nicemu=$work/prefix/bin/nicemu
"$mpicc" -O2 -Wall -o "$work/small.mpich" bench/osu_small.c
"$work/prefix/bin/nicemu-mpicc" -O2 -Wall -o "$work/small.nicemu" bench/osu_small.c
ompi=
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
    mpicc.openmpi -O2 -Wall -o "$work/small.ompi" bench/osu_small.c
    ompi=1
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# The systems, as commands that take osu_small's arguments.
mpich() { "$mpiexec" -n 2 "$work/small.mpich" "$@"; }
procs() { # NIC ARGS...: one process per rank under nicemu run
    local nic=$1
    shift
    timeout 600 "$nicemu" run -n 2 --nic "$nic" -- "$work/small.nicemu" "$@"
}
ompi_shm() { timeout 600 mpirun.openmpi -np 2 --bind-to none --mca pml ob1 --mca btl self,vader "$work/small.ompi" "$@"; }
ompi_nicemu() {
    timeout 600 mpirun.openmpi -np 2 --bind-to none --mca pml cm --mca mtl ofi \
        --mca mtl_ofi_provider_include nicemu -x FI_PROVIDER_PATH="$work/prefix/lib/libfabric" \
        -x FI_PROVIDER=nicemu "$work/small.ompi" "$@"
}

for r in $(seq 1 "$rounds"); do
    echo "round $r of $rounds (load $(load))..." >&2
    # MPICH shared memory: the reference of every table
    measure mpich.lat small mpich latency 8 20000
    measure mpich.bw small mpich bw 4194304 50 16
    measure mpich.rate small mpich rate 8 2000 64
    # NIC tools, Cassini
    measure cxi.send_lat lat "$nicemu" send-lat -s 8 -n 20000
    measure cxi.write_lat lat "$nicemu" write-lat -s 8 -n 20000
    measure cxi.read_lat lat "$nicemu" read-lat -s 8 -n 20000
    measure cxi.atomic_lat lat "$nicemu" atomic-lat -n 20000
    measure cxi.write_bw bw "$nicemu" write-bw -s 4M
    measure cxi.read_bw bw "$nicemu" read-bw -s 4M
    measure cxi.send_bw bw "$nicemu" send-bw -s 4M
    measure cxi.rate rate "$nicemu" send-bw -s 8 -l 64 -n 2000
    # NIC tools, Gemini
    measure gni.send_lat lat "$nicemu" gni-send-lat -s 8 -n 20000
    measure gni.write_lat lat "$nicemu" gni-write-lat -s 8 -n 20000
    measure gni.read_lat lat "$nicemu" gni-read-lat -s 8 -n 20000
    measure gni.atomic_lat lat "$nicemu" gni-atomic-lat -n 20000
    measure gni.write_bw bw "$nicemu" gni-write-bw -s 4M
    measure gni.read_bw bw "$nicemu" gni-read-bw -s 4M
    measure gni.rate rate "$nicemu" gni-send-bw -s 8 -l 64 -n 2000
    # MPI, ranks in one process
    for nic in cassini gemini; do
        measure "in.$nic.lat" osu "$nicemu" osu latency --nic $nic -m 8:8 -i 2000
        measure "in.$nic.bw" osu "$nicemu" osu bw --nic $nic -m 4M:4M -W 16 --iterations-large 20
        measure "in.$nic.rate" osu_rate "$nicemu" osu mbw_mr --nic $nic -m 8:8 -W 64 -i 200
    done
    # MPI, one process per rank (the C ABI, the fabric between processes over shared memory)
    for nic in cassini gemini; do
        measure "pr.$nic.lat" small procs $nic latency 8 2000
        measure "pr.$nic.bw" small procs $nic bw 4194304 10 16
        measure "pr.$nic.rate" small procs $nic rate 8 200 64
    done
    if [ -n "$ompi" ]; then
        measure ompi.shm.lat small ompi_shm latency 8 20000
        measure ompi.shm.bw small ompi_shm bw 4194304 50 16
        measure ompi.shm.rate small ompi_shm rate 8 2000 64
        measure ompi.nicemu.lat small ompi_nicemu latency 8 1000
        measure ompi.nicemu.bw small ompi_nicemu bw 4194304 10 16
        measure ompi.nicemu.rate small ompi_nicemu rate 8 200 64
    fi
    measure engine.det engine_det "$nicemu" bench engine --events 2000000
    again engine.tmr engine_tmr
    again engine.rtt engine_rtt
done
echo "memory (one run each)..." >&2
timed() { /usr/bin/time -f 'maxrss %M' "$@" 2>&1 >/dev/null; }
for nic in cassini gemini; do
    measure "mem.$nic.job" job_rss "$nicemu" job --nic $nic --ranks 256 --engine deterministic
    measure "mem.$nic.job64" job_rss "$nicemu" job --nic $nic --ranks 64 --engine deterministic
done
if [ -x /usr/bin/time ]; then
    measure mem.cassini.idle time_rss timed "$nicemu" devices --cassini 1024 --gemini 0
    measure mem.cassini.idle64 time_rss timed "$nicemu" devices --cassini 64 --gemini 0
    measure mem.gemini.idle time_rss timed "$nicemu" devices --cassini 0 --gemini 1024
    measure mem.gemini.idle64 time_rss timed "$nicemu" devices --cassini 0 --gemini 64
fi
# Every benchmark of `nicemu osu` on both NICs, for the plot docs/img/osu-all.svg.
echo "every OSU benchmark on 4 nodes, for the plot..." >&2
osu_all=(osu all --nodes 4 -m 1:1M -i 100 --iterations-large 10 -W 16)
for nic in cassini gemini; do
    timeout 900 "$nicemu" "${osu_all[@]}" --nic $nic >"$work/osu-all.$nic" 2>"$work/stderr" ||
        { echo "perf-tables.sh: nicemu ${osu_all[*]} --nic $nic failed:" >&2; tail -5 "$work/stderr" >&2; }
done
"$nicemu" plot -o "$work/osu-all.svg" \
    --title "nicemu ${osu_all[*]}, threaded engine, $(date -u +%F) (pairs: ranks 0 and 1)" \
    "emulated Cassini (cxi transport)=$work/osu-all.cassini" \
    "emulated Gemini (gni transport)=$work/osu-all.gemini" >&2 ||
    echo "perf-tables.sh: no plot of nicemu osu all" >&2
load_end=$(load)

# ---- formatting
num() { # KIND VALUE: lat -> 2 decimals; bw -> MB/s integer; rate -> k/M; mib -> MiB
    awk -v k="$1" -v v="$2" 'BEGIN {
        if (v !~ /^[0-9.e+-]+$/) { print (v == "" ? "-" : v); exit }
        if (k == "lat") printf "%.2f", v
        else if (k == "bw" || k == "mib") printf "%.0f", v
        else if (k == "kib") printf "%.0f", v
        else if (k == "rate") { if (v >= 1e6) printf "%.2f M", v / 1e6; else printf "%.0f k", v / 1e3 }
        else printf "%s", v }'
}
shorten() { # a command line as a reader types it
    sed -e "s|$work/prefix/bin/||g" -e "s|$work/small.mpich|osu_small|g" -e "s|$work/small.ompi|osu_small|g" \
        -e "s|^procs \([a-z]*\) |nicemu run -n 2 --nic \1 -- osu_small |" \
        -e "s|^mpich |$(basename "$mpiexec") -n 2 osu_small |" \
        -e "s|^ompi_shm |mpirun -np 2 --mca pml ob1 --mca btl self,vader osu_small |" \
        -e "s|^ompi_nicemu |mpirun -np 2 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include nicemu osu_small |" \
        -e "s|^timed ||" "$work/$1.cmd"
}
cmd() { echo "\`$(shorten "$1")\`"; }
cell() { # KIND NAME: the median, and how many runs failed if any did
    local v ok=0 bad=0
    v=$(num "$1" "$(median "$2")")
    [ -s "$work/$2" ] && ok=$(wc -l <"$work/$2")
    [ -s "$work/$2.failed" ] && bad=$(wc -l <"$work/$2.failed")
    if [ "$bad" -gt 0 ] && [ "$ok" -gt 0 ]; then
        v="$v ($bad of $((ok + bad)) runs failed)"
    elif [ "$bad" -gt 0 ]; then
        v="failed ($bad of $bad runs)"
    fi
    echo "$v"
}
rat() { # CELL REF: ratio of medians, two significant decimals
    awk -v r="$(ratio "$(median "$1")" "$(median "$2")")" 'BEGIN { if (r == "-") print "-"; else if (r < 10) printf "%.2f", r; else printf "%.0f", r }'
}
caption() { echo "_\`bench/perf-tables.sh\`, median of $rounds rounds; machine and load: see [the machine](#the-machine)._"; }

block() { # NAME: the table of NAME, between its markers
    echo "<!-- perf-tables:$1 -->"
    "table_$1"
    echo "<!-- /perf-tables:$1 -->"
}

table_machine() {
    echo "| | |"
    echo "|---|---|"
    echo "| machine | $(machine) |"
    echo "| measured | $started UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo ?), $rounds rounds |"
    echo "| load average (1, 5, 15 min) | $load_start at the start, $load_end at the end |"
    if awk -v a="$load_start" -v b="$load_end" -v n="$(nproc)" \
        'BEGIN { split(a, x, " "); split(b, y, " "); exit !(x[1] > n / 2 || y[1] > n / 2) }'; then
        echo "| note | **loaded machine**: other work shared the CPUs (1-minute load above half of its $(nproc) CPUs); compare ratios within this run only |"
    fi
    echo "| MPICH | $(basename "$mpiexec") $("$mpiexec" --version 2>/dev/null | awk '/Version:/ { print $2; exit }'), \`bench/osu_small.c\` built with $(basename "$mpicc") -O2, 2 ranks |"
}

nic_table() { # PREFIX
    local p=$1
    echo "| measurement | command | nicemu | MPICH shm | nicemu / MPICH |"
    echo "|---|---|---|---|---|"
    if [ "$p" = cxi ]; then
        echo "| 8 B send latency (µs) | $(cmd cxi.send_lat) | $(cell lat cxi.send_lat) | $(cell lat mpich.lat) | $(rat cxi.send_lat mpich.lat) |"
        echo "| 8 B RDMA write latency (µs) | $(cmd cxi.write_lat) | $(cell lat cxi.write_lat) | | |"
        echo "| 8 B RDMA read latency (µs) | $(cmd cxi.read_lat) | $(cell lat cxi.read_lat) | | |"
        echo "| 8 B atomic (SUM) latency (µs) | $(cmd cxi.atomic_lat) | $(cell lat cxi.atomic_lat) | | |"
        echo "| 4 MiB RDMA write bandwidth (MB/s) | $(cmd cxi.write_bw) | $(cell bw cxi.write_bw) | $(cell bw mpich.bw) | $(rat cxi.write_bw mpich.bw) |"
        echo "| 4 MiB RDMA read bandwidth (MB/s) | $(cmd cxi.read_bw) | $(cell bw cxi.read_bw) | | $(rat cxi.read_bw mpich.bw) |"
        echo "| 4 MiB send bandwidth (MB/s) | $(cmd cxi.send_bw) | $(cell bw cxi.send_bw) | | $(rat cxi.send_bw mpich.bw) |"
        echo "| 8 B send rate (msg/s) | $(cmd cxi.rate) | $(cell rate cxi.rate) | $(cell rate mpich.rate) | $(rat cxi.rate mpich.rate) |"
    else
        echo "| 8 B SMSG send latency (µs) | $(cmd gni.send_lat) | $(cell lat gni.send_lat) | $(cell lat mpich.lat) | $(rat gni.send_lat mpich.lat) |"
        echo "| 8 B FMA PUT latency (µs) | $(cmd gni.write_lat) | $(cell lat gni.write_lat) | | |"
        echo "| 8 B FMA GET latency (µs) | $(cmd gni.read_lat) | $(cell lat gni.read_lat) | | |"
        echo "| 8 B AMO (FADD) latency (µs) | $(cmd gni.atomic_lat) | $(cell lat gni.atomic_lat) | | |"
        echo "| 4 MiB BTE write bandwidth (MB/s) | $(cmd gni.write_bw) | $(cell bw gni.write_bw) | $(cell bw mpich.bw) | $(rat gni.write_bw mpich.bw) |"
        echo "| 4 MiB BTE read bandwidth (MB/s) | $(cmd gni.read_bw) | $(cell bw gni.read_bw) | | $(rat gni.read_bw mpich.bw) |"
        echo "| 8 B SMSG send rate (msg/s) | $(cmd gni.rate) | $(cell rate gni.rate) | $(cell rate mpich.rate) | $(rat gni.rate mpich.rate) |"
    fi
    caption
}
table_nic-cassini() { nic_table cxi; }
table_nic-gemini() { nic_table gni; }

mpi_table() { # PREFIX
    local p=$1
    echo "| measurement | MPICH shm | Cassini | / MPICH | Gemini | / MPICH | command (Cassini; Gemini: \`--nic gemini\`) |"
    echo "|---|---|---|---|---|---|---|"
    local row k unit ref
    for row in "lat:lat:8 B latency (µs)" "bw:bw:4 MiB bandwidth (MB/s)" "rate:rate:8 B message rate (msg/s)"; do
        k=${row%%:*}
        unit=$(cut -d: -f2 <<<"$row")
        ref=mpich.$k
        echo "| ${row##*:} | $(cell "$unit" "$ref") | $(cell "$unit" "$p.cassini.$k") | $(rat "$p.cassini.$k" "$ref") | $(cell "$unit" "$p.gemini.$k") | $(rat "$p.gemini.$k" "$ref") | $(cmd "$p.cassini.$k") |"
    done
    caption
}
table_mpi-inprocess() { mpi_table in; }
table_mpi-processes() { mpi_table pr; }

table_ofi() {
    if [ -z "$ompi" ]; then
        echo "_Not measured in this run: Open MPI (mpicc.openmpi, mpirun.openmpi) is not installed._"
        return
    fi
    echo "| measurement | Open MPI shm (ob1, vader) | Open MPI over the provider \`nicemu\` (cm, ofi) | nicemu / shm | command (provider) |"
    echo "|---|---|---|---|---|"
    local row k unit
    for row in "lat:lat:8 B latency (µs)" "bw:bw:4 MiB bandwidth (MB/s)" "rate:rate:8 B message rate (msg/s)"; do
        k=${row%%:*}
        unit=$(cut -d: -f2 <<<"$row")
        echo "| ${row##*:} | $(cell "$unit" "ompi.shm.$k") | $(cell "$unit" "ompi.nicemu.$k") | $(rat "ompi.nicemu.$k" "ompi.shm.$k") | $(cmd "ompi.nicemu.$k") |"
    done
    echo "_\`bench/perf-tables.sh\`, median of $rounds rounds; $(mpirun.openmpi --version 2>/dev/null | head -1), $(fi_info --version 2>/dev/null | awk '/^libfabric:/ { print "libfabric " $2 }'); one emulated Cassini per rank process._"
}

table_engine() {
    echo "| workload | command | result |"
    echo "|---|---|---|"
    echo "| deterministic engine, 16 toy devices passing 64 B packets through a switch | $(cmd engine.det) | $(cell rate engine.det | sed 's/ M$/ M events\/s/; s/ k$/ k events\/s/') |"
    echo "| deterministic engine, timer events only | $(cmd engine.tmr) | $(cell rate engine.tmr | sed 's/ M$/ M events\/s/; s/ k$/ k events\/s/') |"
    echo "| threaded engine, doorbell ping-pong between two toy devices | $(cmd engine.rtt) | $(num lat "$(median engine.rtt)") µs per round trip |"
    caption
}

per() { # A B N [FORMAT]: (median A - median B) / N
    awk -v a="$(median "$1")" -v b="$(median "$2")" -v n="$3" -v f="${4:-%.1f}" 'BEGIN { if (a !~ /^[0-9.e+-]+$/ || b !~ /^[0-9.e+-]+$/) print "-"; else printf f, (a - b) / n }'
}
table_memory() {
    echo "| what | command | peak RSS (MiB) | per node or NIC |"
    echo "|---|---|---|---|"
    local nic
    for nic in cassini gemini; do
        echo "| MPI job, 64 ranks, one node each | $(cmd "mem.$nic.job64") | $(cell mib "mem.$nic.job64") | |"
        echo "| MPI job, 256 ranks, one node each | $(cmd "mem.$nic.job") | $(cell mib "mem.$nic.job") | $(per "mem.$nic.job" "mem.$nic.job64" 192 "%.1f MiB") (slope 64 to 256) |"
    done
    if [ -s "$work/mem.cassini.idle" ]; then
        for nic in cassini gemini; do
            echo "| 64 idle NICs, probed by the driver | $(cmd "mem.$nic.idle64") | $(cell mib "mem.$nic.idle64") | |"
            echo "| 1,024 idle NICs | $(cmd "mem.$nic.idle") | $(cell mib "mem.$nic.idle") | $(per "mem.$nic.idle" "mem.$nic.idle64" 960 %.5f | awk '$1 ~ /^[0-9.-]+$/ { printf "%.0f KiB", $1 * 1024; next } { print }') (slope 64 to 1,024) |"
        done
    fi
    echo "_\`bench/perf-tables.sh\`, one run each (\`nicemu job\` prints its peak RSS; idle NICs under \`/usr/bin/time\`)._"
}

names="machine nic-cassini nic-gemini mpi-inprocess mpi-processes ofi engine memory"
for n in $names; do
    block "$n"
    echo
done >"$work/tables.md"
cat "$work/tables.md"

if [ -n "$write" ]; then
    doc=docs/PERFORMANCE.md
    # Replace each block of the doc by the block of the same name just made.
    awk -v tables="$work/tables.md" '
        BEGIN {
            while ((getline line < tables) > 0) {
                if (line ~ /^<!-- perf-tables:/) { name = line; body[name] = line "\n" }
                else if (name != "") { body[name] = body[name] line "\n" }
                if (line ~ /^<!-- \/perf-tables:/) name = ""
            }
        }
        /^<!-- perf-tables:/ { if ($0 in body) { printf "%s", body[$0]; skip = 1; next } }
        skip && /^<!-- \/perf-tables:/ { skip = 0; next }
        !skip { print }
    ' "$doc" >"$work/doc.md"
    cp "$work/doc.md" "$doc"
    if [ -s "$work/osu-all.svg" ]; then
        mkdir -p docs/img
        cp "$work/osu-all.svg" docs/img/osu-all.svg
    fi
    echo "perf-tables.sh: $doc and docs/img/osu-all.svg updated" >&2
fi
