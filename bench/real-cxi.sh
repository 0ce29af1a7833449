#!/usr/bin/env bash
# HPE's own Cassini software on emulated Cassini: libcxi (its utilities and its criterion test
# program), libfabric's CXI provider (fi_info, fabtests and the provider's criterion program
# cxitest), built unmodified from the source trees given here and run with libnicemu_cxi.so
# preloaded (crate cxi-preload; `nicemu run` sets LD_PRELOAD for its Cassini ranks). See
# docs/real-cxi.md for what passes, what fails and why.
#
# Fetches nothing and writes nothing into the source trees or the repository: each tree is
# copied into $REAL_CXI_WORK/build and installed into $REAL_CXI_WORK/prefix.
#
# usage: bench/real-cxi.sh LIBCXI_SRC CASSINI_HEADERS_SRC CXI_DRIVER_SRC LIBFABRIC_SRC
#   LIBCXI_SRC           checkout of HewlettPackard/shs-libcxi
#   CASSINI_HEADERS_SRC  checkout of HewlettPackard/shs-cassini-headers
#   CXI_DRIVER_SRC       checkout of HewlettPackard/shs-cxi-driver (include/uapi is used)
#   LIBFABRIC_SRC        checkout of ofiwg/libfabric (fabtests is inside it)
# env:
#   REAL_CXI_WORK=dir    builds, logs and TAP reports (default ${TMPDIR:-/tmp}/nicemu-real-cxi);
#                        a prefix this script built there earlier is reused (REBUILD=1: no)
#   REAL_CXI_PREFIX=dir  use third-party software already installed there (skip building)
#   PARTS="tools fabtests libcxi_test cxitest"   what to run (default: all four)
#   CXITEST_SUITES=glob  which cxitest suites to run, a shell pattern (default: every suite)
#   TEST_TIMEOUT=s       criterion's per-test timeout (default 60)
#   NO_APT=1             do not install the Debian packages the configure scripts need
#   JOBS=n               make's parallelism (default: nproc)
#   NO_CARGO=1           use the nicemu and libnicemu_cxi.so already in target/release
#
# Prints one row per program: PASS/FAIL and its figure (latency in us, bandwidth in MB/s or
# the criterion totals); the logs of every run stay in $REAL_CXI_WORK/logs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

if [ $# -ne 4 ]; then
    sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
abspath() { (cd "$1" && pwd -P); }
LIBCXI_SRC=$(abspath "$1")
CASSINI_SRC=$(abspath "$2")
DRIVER_SRC=$(abspath "$3")
LIBFABRIC_SRC=$(abspath "$4")
for f in "$LIBCXI_SRC/src/libcxi.c" "$CASSINI_SRC/include/cxi_prov_hw.h" \
    "$DRIVER_SRC/include/uapi/misc/cxi.h" "$LIBFABRIC_SRC/prov/cxi/configure.m4" \
    "$LIBFABRIC_SRC/fabtests/configure.ac"; do
    [ -f "$f" ] || {
        echo "real-cxi.sh: missing $f: wrong source directory?" >&2
        exit 2
    }
done
work=${REAL_CXI_WORK:-${TMPDIR:-/tmp}/nicemu-real-cxi}
mkdir -p "$work/logs"
work=$(abspath "$work")
logs=$work/logs
JOBS=${JOBS:-$(nproc)}
timeout_s=${TEST_TIMEOUT:-60}
parts=${PARTS:-tools fabtests libcxi_test cxitest}

# ---------------------------------------------------------------------------------------
# 1. Third-party software, built unmodified.
# ---------------------------------------------------------------------------------------
build_step() { # NAME CMD...: run with the output in a log; show its tail on failure
    local name=$1
    shift
    echo "== $name" >&2
    if ! "$@" >"$logs/build-$name.log" 2>&1; then
        tail -30 "$logs/build-$name.log" >&2
        echo "real-cxi.sh: $name failed (log: $logs/build-$name.log)" >&2
        exit 1
    fi
}
copy_src() { rm -rf "$2" && mkdir -p "$2" && tar -C "$1" --exclude=.git -cf - . | tar -C "$2" -xf -; }

build_third_party() {
    local prefix=$1 build=$work/build
    local pkgs="autoconf automake libtool pkg-config make gcc python3 libconfig-dev libuv1-dev
        libfuse-dev libyaml-dev libnl-3-dev libnl-genl-3-dev libnuma-dev libsensors-dev
        libcriterion-dev libjson-c-dev libcurl4-openssl-dev"
    if [ "${NO_APT:-0}" != 1 ]; then
        local missing="" p
        for p in $pkgs; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
        done
        if [ -n "$missing" ]; then
            [ "$(id -u)" = 0 ] || {
                echo "real-cxi.sh: need root to install$missing (or NO_APT=1)" >&2
                exit 1
            }
            apt-get update -qq
            # shellcheck disable=SC2086
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
        fi
    fi
    rm -rf "$prefix" "$build"
    mkdir -p "$prefix" "$build"
    # libcxi's Makefile.am finds the headers as siblings of its tree:
    # ../cassini-headers/install/{include,share/cassini-headers} and ../cxi-driver/include.
    stage_headers() {
        local inst=$build/cassini-headers/install
        mkdir -p "$inst/include" "$inst/share" "$build/cxi-driver" "$prefix/include/uapi" "$prefix/share"
        cp -a "$CASSINI_SRC/include/." "$CASSINI_SRC/lib/casuc/." "$CASSINI_SRC/lib/craypldm/." "$inst/include/"
        cp -a "$CASSINI_SRC/share/cassini-headers" "$inst/share/"
        cp -a "$DRIVER_SRC/include" "$build/cxi-driver/include"
        cp -a "$inst/include/." "$prefix/include/"
        cp -a "$inst/share/cassini-headers" "$prefix/share/"
        cp -a "$DRIVER_SRC/include/uapi/." "$prefix/include/uapi/"
    }
    build_step headers stage_headers
    copy_src "$LIBCXI_SRC" "$build/libcxi"
    (
        cd "$build/libcxi"
        build_step libcxi-autoreconf autoreconf -fi
        build_step libcxi-configure ./configure --prefix="$prefix" CPPFLAGS="-I$prefix/include" \
            --with-criterion=/usr --without-systemd --with-systemdsystemunitdir=no --with-udevrulesdir=no
        build_step libcxi-make make -j"$JOBS"
        build_step libcxi-install make install
    )
    copy_src "$LIBFABRIC_SRC" "$build/libfabric"
    (
        cd "$build/libfabric"
        build_step libfabric-autogen ./autogen.sh
        build_step libfabric-configure ./configure --prefix="$prefix" --enable-only \
            --enable-cxi="$prefix" --enable-tcp --enable-udp --enable-shm --enable-rxm \
            --with-cassini-headers="$prefix" --with-cxi-uapi-headers="$prefix" --with-criterion=/usr
        grep -q 'Built-in providers:.*cxi' "$logs/build-libfabric-configure.log" || {
            echo "real-cxi.sh: libfabric's configure did not enable cxi" >&2
            exit 1
        }
        build_step libfabric-make make -j"$JOBS"
        build_step libfabric-install make install
        cd fabtests
        build_step fabtests-autogen ./autogen.sh
        # The efa, lpp and verbs tests need headers of providers not built here.
        build_step fabtests-configure ./configure --prefix="$prefix" --with-libfabric="$prefix" \
            --disable-efa --disable-lpp --disable-verbs
        build_step fabtests-make make -j"$JOBS"
        build_step fabtests-install make install
    )
    touch "$prefix/.real-cxi-prefix"
}

if [ -n "${REAL_CXI_PREFIX:-}" ]; then
    prefix=$(abspath "$REAL_CXI_PREFIX")
else
    prefix=$work/prefix
    if [ "${REBUILD:-0}" = 1 ] || [ ! -f "$prefix/.real-cxi-prefix" ] || [ ! -x "$prefix/bin/cxitest" ]; then
        echo "== building libcxi, libfabric and fabtests into $prefix (takes a while)" >&2
        build_third_party "$prefix"
    fi
fi
bin=$prefix/bin
for b in cxi_stat libcxi_test cxitest fi_info fi_pingpong cxi_send_lat; do
    [ -x "$bin/$b" ] || {
        echo "real-cxi.sh: $bin/$b is missing" >&2
        exit 1
    }
done

# ---------------------------------------------------------------------------------------
# 2. nicemu and libnicemu_cxi.so.
# ---------------------------------------------------------------------------------------
if [ "${NO_CARGO:-0}" != 1 ]; then
    echo "== cargo build --release -p nicemu -p cxi-preload" >&2
    (cd "$here" && cargo build --release -q -p nicemu -p cxi-preload)
fi
target=${CARGO_TARGET_DIR:-$here/target}/release
nicemu=$target/nicemu
preload=$target/libnicemu_cxi.so
export NICEMU_CXI_LIBRARY=$preload
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$bin:$PATH
# The client side of a pair retries a refused connect() (bench/real-cxi/connect-retry.c).
export REAL_CXI_RETRY=$work/connect-retry.so
gcc -shared -fPIC -O2 -Wall -o "$REAL_CXI_RETRY" "$here/bench/real-cxi/connect-retry.c" -ldl

# ---------------------------------------------------------------------------------------
# 3. The runs.
# ---------------------------------------------------------------------------------------
printf '%-34s %-5s %s\n' program result figure
row() { printf '%-34s %-5s %s\n' "$1" "$2" "$3"; }
# pair NAME PARSER CMD...: under `nicemu run -n 2`, rank 0 runs CMD (the server) and rank 1
# runs CMD with the server's address appended (the client), as on two real nodes. Both
# bring their NIC up as they start (NICEMU_CXI_JOIN=start, crates/cxi-preload/src/node.rs):
# these programs talk over a socket before they open the device.
pair() {
    local name=$1 parser=$2 log=$logs/$1.log
    shift 2
    if timeout 240 "$nicemu" run -n 2 --nic cassini --timeout ${PAIR_TIMEOUT:-180} -l -- sh -c \
        'export NICEMU_CXI_JOIN=start
         if [ "$PMI_RANK" = 0 ]; then exec "$@"; fi
         LD_PRELOAD="$LD_PRELOAD $REAL_CXI_RETRY" exec "$@" 127.0.0.1' \
        sh "$@" >"$log" 2>&1; then
        row "$name" PASS "$($parser <"$log")"
    else
        row "$name" FAIL "(log: $log)"
    fi
}
# Parsers: the figure of the last result row of the client (rank 1) or the server.
# libcxi's tools: lat rows are SIZE COUNT MIN MAX MEAN STDDEV, bw rows SIZE COUNT MB/S MPKT/S.
cxi_lat() { awk '/^\[[01]\] +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ *$/ { v = $2 " B: mean " $6 " us, min " $4 " us" } END { print v }'; }
cxi_bw() { awk '/^\[[01]\] +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ *$/ { v = $2 " B: " $4 " MB/s" } END { print v }'; }
# fabtests: BYTES ITERS TOTAL TIME MB/SEC USEC/XFER MXFERS/SEC.
ft() { awk '/^\[[01]\] +[0-9]+[kmg]? +[0-9]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+s / { v = $2 " B: " $7 " us/xfer, " $6 " MB/s" } END { print v }'; }
none() { echo; }

if [[ " $parts " == *" tools "* ]]; then
    log=$logs/cxi_stat.log
    if timeout 120 "$nicemu" run -n 1 --nic cassini -- cxi_stat >"$log" 2>&1 && grep -q '^Device: cxi0' "$log"; then
        row cxi_stat PASS "$(grep -m1 'Link MTU' "$log" | tr -s ' ')"
    else
        row cxi_stat FAIL "(log: $log)"
    fi
    for t in send write read atomic; do
        pair "cxi_${t}_lat" cxi_lat "cxi_${t}_lat" -n 1000
        pair "cxi_${t}_bw" cxi_bw "cxi_${t}_bw" -n 20
    done
    pair "cxi_send_bw 8B" cxi_bw cxi_send_bw -n 20 -s 8
    # The doorbell watcher's cost: the same latencies with its idle pause capped at 50 us
    # instead of 10 ms (crates/cxi-preload/src/doorbell.rs).
    NICEMU_CXI_POLL_SLEEP_MAX_US=50 pair "cxi_send_lat (poll <= 50us)" cxi_lat cxi_send_lat -n 1000
    NICEMU_CXI_POLL_SLEEP_MAX_US=50 pair "cxi_write_lat (poll <= 50us)" cxi_lat cxi_write_lat -n 1000
fi

if [[ " $parts " == *" fabtests "* ]]; then
    log=$logs/fi_info.log
    if timeout 120 "$nicemu" run -n 1 --nic cassini -- fi_info -p cxi >"$log" 2>&1 && grep -q 'domain: cxi0' "$log"; then
        row "fi_info -p cxi" PASS "$(grep -c '^provider: cxi' "$log") infos"
    else
        row "fi_info -p cxi" FAIL "(log: $log)"
    fi
    # fi_pingpong has its own control socket (no -E) and defaults to dgram endpoints.
    pair "fi_pingpong -p cxi -e rdm" ft fi_pingpong -p cxi -e rdm -I 1000 -S 8
    pair "fi_rdm_tagged_pingpong" ft fi_rdm_tagged_pingpong -p cxi -E -I 1000 -S 8
    NICEMU_CXI_POLL_SLEEP_MAX_US=50 pair "fi_rdm_tagged_pingpong (poll <= 50us)" ft fi_rdm_tagged_pingpong -p cxi -E -I 1000 -S 8
    pair "fi_rdm_tagged_pingpong 64KiB" ft fi_rdm_tagged_pingpong -p cxi -E -I 100 -S 65536
    pair "fi_rdm_tagged_bw" ft fi_rdm_tagged_bw -p cxi -E -I 100 -S 1048576
    pair "fi_rma_bw -o write" ft fi_rma_bw -p cxi -E -e rdm -o write -I 100 -S 1048576
    pair "fi_rma_bw -o read" ft fi_rma_bw -p cxi -E -e rdm -o read -I 100 -S 1048576
    # The provider refuses fi_writedata unless FI_CXI_ENABLE_WRITEDATA=1 (prov/cxi/test/test.sh
    # sets it for its writedata runs).
    FI_CXI_ENABLE_WRITEDATA=1 pair "fi_rma_bw -o writedata" ft fi_rma_bw -p cxi -E -e rdm -o writedata -I 100 -S 65536
    pair "fi_rdm_atomic" none fi_rdm_atomic -p cxi -E -I 10
fi

# criterion NAME PROGRAM: one process per suite (criterion forks and execs a fresh worker per
# test, each hosting its own NIC; a runner error such as criterion 2.4's "invalid state
# 'timeout'" then ends one suite, not the run), TAP reports joined; the figure is the totals.
criterion() {
    local name=$1 prog=$2 log=$logs/$1.log tap=$logs/$1.tap suite
    : >"$log"
    : >"$tap"
    for suite in $("$prog" --list 2>/dev/null | sed -n 's/^\([A-Za-z0-9_]*\): [0-9]* tests\{0,1\}$/\1/p'); do
        if [ -n "${CRITERION_FILTER:-}" ] && [[ $suite != $CRITERION_FILTER ]]; then continue; fi
        timeout 1800 env LD_PRELOAD="$preload" "$prog" -j1 --timeout "$timeout_s" \
            --filter="$suite/*" --tap="$logs/$name.$suite.tap" >>"$log" 2>&1 || true
        # Only this suite's lines: the report lists the filtered-out tests as skipped too.
        if [ -s "$logs/$name.$suite.tap" ]; then
            awk -v s="$suite::" '/^(not )?ok - / { keep = index($0, "- " s) > 0 } keep && !/^#/' \
                "$logs/$name.$suite.tap" >>"$tap"
        else
            echo "not ok - $suite::(runner) no report" >>"$tap"
        fi
    done
    local pass fail skip
    pass=$(grep -a -c '^ok - ' "$tap" | tr -d ' ')
    skip=$(grep -a -c '^ok - .*# SKIP' "$tap" | tr -d ' ')
    fail=$(grep -a -c '^not ok - ' "$tap" | tr -d ' ')
    pass=$((pass - skip))
    if [ "$fail" = 0 ]; then row "$name" PASS "$pass passed, $skip skipped"; else row "$name" FAIL "$pass passed, $fail failed, $skip skipped (tap: $tap)"; fi
    # Per suite: passed, failed (incl. crashed), skipped; then the failing tests.
    awk '
        /^(not )?ok - / {
            split($0, a, " - "); split(a[2], b, "::"); st = b[1]
            if (!(st in seen)) { seen[st] = 1; order[++n] = st }
            if ($0 ~ /# SKIP/) skip[st]++; else if ($1 == "not") fail[st]++; else pass[st]++
            if ($1 == "not") { sub(/ +\(.*$/, "", a[2]); bad[a[2]] = 1 }
        }
        END {
            for (i = 1; i <= n; i++) printf "    %-40s pass %3d  fail %3d  skip %3d\n", order[i], pass[order[i]], fail[order[i]], skip[order[i]]
            for (t in bad) printf "    failed: %s\n", t
        }' "$tap" | tee "$logs/$name.suites"
}
if [[ " $parts " == *" libcxi_test "* ]]; then
    # HPE's libcxi test VMs load the driver with active_qos_profile=1 (HPC): the cps suite
    # expects its traffic classes (NICEMU_CXI_QOS_PROFILE, docs/real-cxi.md).
    NICEMU_CXI_QOS_PROFILE=1 criterion libcxi_test "$bin/libcxi_test"
fi
if [[ " $parts " == *" cxitest "* ]]; then
    CRITERION_FILTER=${CXITEST_SUITES:-} criterion cxitest "$bin/cxitest"
fi
