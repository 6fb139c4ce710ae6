#!/usr/bin/env bash
# Regenerate the InfiniBand dumps under tests/data/ib/ with the real tools run
# against a simulated fabric (no InfiniBand hardware needed):
#
#   ibsim (ibsim-utils)        simulates the fabric described by <fabric>/ibsim.net
#   opensm -o                  the real subnet manager: assigns LIDs, programs the LFTs, exits
#   ibnetdiscover [-p]         the real discovery dump (plain and ports form)
#   ibroute <switch lid>       the real linear forwarding table of every switch
#   ibtracert <lid> <lid>      the real route between every ordered pair of hosts
#
# The tools talk to ibsim through the preload library libumad2sim (package
# libumad2sim0, pulled in by ibsim-utils). Debian packages:
#   apt-get install -y ibsim-utils opensm infiniband-diags
#
# Usage: scripts/make_ib_fixtures.sh [fabric ...]   (default: all fabrics)
# Run from anywhere; writes only tests/data/ib/<fabric>/{ibnetdiscover*.txt,lft/,ibtracert.txt,versions.txt}.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/tests/data/ib"

for tool in ibsim opensm ibnetdiscover ibroute ibtracert; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y ibsim-utils opensm infiniband-diags" >&2; exit 1; }
done
SIMLIB="$(ls /usr/lib/*/umad2sim/libumad2sim.so /usr/lib/umad2sim/libumad2sim.so 2>/dev/null | head -n 1 || true)"
[ -n "$SIMLIB" ] || { echo "libumad2sim.so not found (package libumad2sim0)" >&2; exit 1; }

# opensm options per fabric: fattree-rewired runs with LMC 1 (two LIDs per port, "path #" lines in ibroute).
osm_args() {
  case "$1" in
    fattree-rewired) echo "-l 1" ;;
    *) echo "" ;;
  esac
}

SIM_PID=""
cleanup() { if [ -n "$SIM_PID" ]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT

run_fabric() {
  local name="$1" dir="$OUT/$1" work
  [ -f "$dir/ibsim.net" ] || { echo "no $dir/ibsim.net" >&2; exit 1; }
  work="$(mktemp -d)"
  echo "== $name (work dir $work)"

  ibsim -s -n "$dir/ibsim.net" </dev/null >"$work/ibsim.log" 2>&1 &
  SIM_PID=$!
  for _ in $(seq 1 100); do
    grep -q "Network simulator ready" "$work/ibsim.log" && break
    kill -0 "$SIM_PID" 2>/dev/null || { cat "$work/ibsim.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "Network simulator ready" "$work/ibsim.log" || { echo "ibsim did not start" >&2; exit 1; }

  # Every diag below runs with the simulator's preload library and a private cache dir.
  sim() { LD_PRELOAD="$SIMLIB" OSM_TMP_DIR="$work" OSM_CACHE_DIR="$work" "$@" 2>>"$work/diags.err"; }

  # shellcheck disable=SC2046
  sim opensm -o -f "$work/opensm.log" $(osm_args "$name") >"$work/opensm.out"
  grep -q "SUBNET UP" "$work/opensm.log" || { echo "opensm did not bring the subnet up" >&2; tail "$work/opensm.log" >&2; exit 1; }

  sim ibnetdiscover >"$dir/ibnetdiscover.txt"
  sim ibnetdiscover -p >"$dir/ibnetdiscover-p.txt"

  # One ibroute dump per switch, named after the switch description (readers identify
  # the switch from the dump's header, not from the file name).
  rm -rf "$dir/lft" && mkdir "$dir/lft"
  for lid in $(awk '$1 == "SW" {print $2}' "$dir/ibnetdiscover-p.txt" | sort -n -u); do
    sim ibroute "$lid" >"$work/lft.txt"
    desc="$(sed -n "1s/^Unicast lids .* (\(.*\)):\$/\1/p" "$work/lft.txt" | tr -c 'A-Za-z0-9_.\n-' '_')"
    mv "$work/lft.txt" "$dir/lft/ibroute-${desc:-lid$lid}.txt"
  done

  # ibtracert between the first port of every pair of channel adapters (the hosts' primary ports).
  : >"$dir/ibtracert.txt"
  lids="$(awk '$1 == "CA" && $3 == 1 {print $2}' "$dir/ibnetdiscover-p.txt" | sort -n)"
  for s in $lids; do
    for d in $lids; do
      [ "$s" = "$d" ] || sim ibtracert "$s" "$d" >>"$dir/ibtracert.txt"
    done
  done

  {
    echo "# tool versions that produced these dumps"
    dpkg-query -W -f '${Package} ${Version}\n' ibsim-utils libumad2sim0 opensm infiniband-diags 2>/dev/null || true
    echo "opensm options: -o $(osm_args "$name")"
  } >"$dir/versions.txt"

  kill "$SIM_PID"; wait "$SIM_PID" 2>/dev/null || true; SIM_PID=""
  rm -rf "$work"
  echo "   $(grep -c '^Switch' "$dir/ibnetdiscover.txt") switches, $(grep -c '^Ca' "$dir/ibnetdiscover.txt") CAs," \
       "$(ls "$dir/lft" | wc -l) LFTs, $(grep -c '^From' "$dir/ibtracert.txt") traces"
}

if [ "$#" -eq 0 ]; then set -- tree2 fattree fattree-rewired; fi
for f in "$@"; do run_fabric "$f"; done
