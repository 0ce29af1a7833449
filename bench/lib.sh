# Helpers shared by bench/compare.sh and bench/perf-tables.sh (sourced, not run).
#
# measure NAME KIND COMMAND...   run COMMAND, append the figure it prints to $work/NAME
#                                (KIND picks the parser, see figure_of) and keep the command
#                                line in $work/NAME.cmd; stops the script if it fails
#                                (ON_FAILURE=skip: marks the cell failed and goes on)
# again NAME KIND              another figure (KIND) of the last measured output
# median NAME                    the median of the figures of NAME
# ratio A B                      A / B with three decimals

# first_of NAME...: the first NAME found on PATH (or the last NAME, for the error after it)
first_of() {
    local t
    for t in "$@"; do
        command -v "$t" >/dev/null && break
    done
    echo "$t"
}

# Debian's MPICH installs mpiexec.mpich and mpicc.mpich; the plain names are alternatives that
# Open MPI takes over when it is installed too (and Open MPI's mpiexec refuses to run as root),
# so the MPICH names come first. Sets $mpiexec and $mpicc, or stops with the install command.
find_mpich() {
    mpiexec=${MPIEXEC:-$(first_of mpiexec.mpich mpiexec)}
    mpicc=${MPICC:-$(first_of mpicc.mpich mpicc)}
    local tool
    for tool in "$mpicc" "$mpiexec"; do
        command -v "$tool" >/dev/null || {
            echo "$(basename "$0"): $tool not found; install Debian's MPICH: apt-get install mpich libmpich-dev" >&2
            exit 1
        }
    done
}

figure_of() { # KIND < output
    case "$1" in
    small) awk '$1 ~ /^(latency|bw|rate)$/ && NF == 3 { print $3 }' ;; # bench/osu_small.c
    osu) awk '!/^#/ && NF >= 2 && $1 ~ /^[0-9]/ { v = $2 } END { print v }' ;; # OSU table, last row
    osu_rate) awk '!/^#/ && NF >= 3 && $1 ~ /^[0-9]/ { v = $3 } END { print v }' ;;
    lat) awk '/^ +[0-9]+ +[0-9]+ / { v = $5 } END { print v }' ;;           # tools: Mean[us]
    bw) awk '/^ +[0-9]+ +[0-9]+ / { v = $3 } END { print v }' ;;            # tools: BW[MB/s]
    rate) awk '/^ +[0-9]+ +[0-9]+ / { v = $4 * 1e6 } END { print v }' ;;    # tools: PktRate[Mpkt/s]
    engine_det) awk '/packets via fabric/ { v = $(NF - 1) * 1e6 } END { print v }' ;;
    engine_tmr) awk '/timers only/ { v = $(NF - 1) * 1e6 } END { print v }' ;;
    engine_rtt) awk '/doorbell ping-pong/ { v = $(NF - 1) } END { print v }' ;;
    job_rss) awk '/^peak RSS:/ { v = $3 } END { print v }' ;;             # MiB
    job_wall) awk '/^wall time:/ { v = $3 } END { print v }' ;;
    time_rss) awk '/^maxrss / { v = $2 / 1024 } END { print v }' ;;       # /usr/bin/time KB -> MiB
    esac
}

measure() { # NAME KIND COMMAND...
    local name=$1 kind=$2
    shift 2
    local out v
    echo "$*" >"$work/last.cmd"
    [ -f "$work/$name.cmd" ] || cp "$work/last.cmd" "$work/$name.cmd"
    if ! out=$("$@" 2>"$work/stderr"); then
        echo "$(basename "$0"): '$*' failed:" >&2
        tail -5 "$work/stderr" >&2
        # ON_FAILURE=skip (bench/perf-tables.sh): the cell reads "failed" unless another
        # round measured it; otherwise the script stops.
        [ "${ON_FAILURE:-stop}" = skip ] || exit 1
        echo "$*" >>"$work/$name.failed"
        return 0
    fi
    printf '%s\n' "$out" >"$work/last.out"
    v=$(figure_of "$kind" <<<"$out")
    [ -n "$v" ] || {
        echo "$(basename "$0"): no figure in the output of '$*':" >&2
        echo "$out" >&2
        exit 1
    }
    echo "$v" >>"$work/$name"
}

# again NAME KIND: another figure from the output of the last measure (same command)
again() {
    local v
    [ -f "$work/$1.cmd" ] || cp "$work/last.cmd" "$work/$1.cmd"
    v=$(figure_of "$2" <"$work/last.out")
    [ -n "$v" ] || { echo "$(basename "$0"): no $2 figure in the last output" >&2; exit 1; }
    echo "$v" >>"$work/$1"
}

median() {
    if [ ! -s "$work/$1" ]; then
        if [ -f "$work/$1.failed" ]; then echo failed; else echo "-"; fi
        return
    fi
    sort -g "$work/$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a !~ /^[0-9.e+-]+$/ || b !~ /^[0-9.e+-]+$/ || b == 0) print "-"; else printf "%.3f", a / b }'; }

# The machine, for the caption of a table: CPU model, CPUs, memory, kernel.
machine() {
    local cpu mem
    cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
    mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)
    echo "${cpu:-unknown CPU}, $(nproc) CPUs, ${mem:-? GiB}, Linux $(uname -r)"
}
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?"; }
