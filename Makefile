# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
FULL := $(VENV)/.installed-all

.PHONY: demo test install sysdeps benchdeps bench bench-quick experiments verify-experiments docs clean

# What the demo needs: topoplan and its core dependencies (no extras, no test tools; not byte-compiled ahead:
# Python compiles what a process imports, once, and the install takes a third of the CPU). The demo and the
# README's tour compile nothing: their simulations are small, so they run on the NumPy engine until the event
# loop is compiled (make install, or the first large simulation; results agree to 1e-9), their matchings
# (32 OCS nodes) run interpreted until the matching is compiled, and the tour's placement (64 ranks) is refined
# by the interpreter too (the same computations). The compiled kernels are make install's: compiling the
# placement's here took a third of make demo (24 s of 70).
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e .
	$(PY) -c "import pulp; assert pulp.PULP_CBC_CMD(msg=0).available(), 'CBC solver missing'"
	touch $(STAMP)

# Everything else: every extra and the test tools (the `test` extra names them), and the compiled kernels.
$(FULL): $(STAMP)
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) -m compileall -q -j 2 $(VENV)/lib topoplan >/dev/null   # what make demo's install left to first imports
	$(PY) -m topoplan.warmup placement engine flows replay groups matching
	touch $(FULL)

# The ahead-of-time event loop (topoplan/sim/_engine.py) is rebuilt when its sources change after the install (a pull):
# a stale build is never used, but the JIT that serves instead costs a process about 0.6 s to load. The sources
# are topoplan.sim._sources.SOURCES (tests/test_sim_aot.py checks the list below against it).
AOT := topoplan/sim/_engine_aot.json
AOT_SOURCES := $(addprefix topoplan/sim/,program.py _jit.py _flows.py _loop.py _engine.py)
$(AOT): $(AOT_SOURCES) | $(STAMP)
	$(PY) -m topoplan.warmup engine
# The forwarding tables' traffic pass, built the same way (topoplan/problems/circuits/_sharing.py; its sources are
# _sharing.SOURCES, checked by tests/test_plan_tables.py).
SHARING_AOT := topoplan/problems/circuits/_sharing_aot.json
SHARING_SOURCES := $(addprefix topoplan/problems/circuits/,_sharing_jit.py)
$(SHARING_AOT): $(SHARING_SOURCES) | $(STAMP)
	$(PY) -m topoplan.warmup matching

install: $(FULL) $(AOT) $(SHARING_AOT)

# Debian packages some tests use (Open MPI for the launcher and emulator tests, iproute2 for the emulator's
# route files, Chromium for the report test, SimGrid 3.32 for the peer test of the flow engine).
# Installed when we are root and they are missing; tests that need them skip with a reason otherwise.
sysdeps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  need=""; \
	  command -v mpirun >/dev/null || need="$$need openmpi-bin libopenmpi-dev"; \
	  command -v ip >/dev/null || need="$$need iproute2"; \
	  command -v chromium >/dev/null || need="$$need chromium"; \
	  /usr/bin/python3 -c "import simgrid" 2>/dev/null || need="$$need python3-simgrid"; \
	  if [ -n "$$need" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null) \
	      || echo "warning: could not install$$need"; \
	  fi; \
	fi

# SimGrid 3.32 (Debian python3-simgrid, for the system interpreter /usr/bin/python3; libsimgrid-dev for
# smpirun and its trace replay program): the peers that benchmarks/bench_sim.py and bench_replay.py measure
# in the same run. Installed when we are root and they are missing; the benchmarks say so in one line and run
# without them otherwise.
benchdeps:
	@need=""; \
	/usr/bin/python3 -c "import simgrid" 2>/dev/null || need=" python3-simgrid"; \
	[ -x /usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain ] && command -v smpirun >/dev/null || need="$$need libsimgrid-dev"; \
	if [ -z "$$need" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null) \
	    || echo "warning: could not install$$need (the benchmarks run without SimGrid or SMPI)"; \
	else \
	  echo "warning:$$need missing and cannot be installed here (not root or no apt-get);" \
	       "the benchmarks run without SimGrid or SMPI"; \
	fi

# (the event loop's build is refreshed when one exists and its sources changed; make demo alone builds none)
demo: $(STAMP)
	@if [ -f $(AOT) ]; then $(MAKE) --no-print-directory $(AOT); fi
	$(VENV)/bin/topoplan demo

test: install sysdeps
	$(PY) -m pytest -n 2 --dist loadfile

# make bench: every benchmark at full size (hours on 2 cores). make bench-quick: each in its --quick mode (about
# 10 minutes; the figures of docs/benchmarks.md's summary table come from one such run, saved in $(BENCH_LOG)).
# Every row with a peer times both sides as processes in the same run (benchmarks/processes.py: wall, CPU and
# peak memory by GNU time): SimGrid for the flow scenarios, KaHIP for placement, NetworkX for the matching.
# bench_steps.py's own --quick takes an hour: here one system and one application (its cells go to a
# scratch file, not the results kept in benchmarks/results/).
BENCH_LOG ?= bench-quick.log
QUICK_ARGS_bench_steps := --systems 003 --traffic cg --fresh --out /tmp/topoplan-bench-steps-quick.jsonl

bench: install benchdeps
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

bench-quick: install benchdeps
	@{ echo "== make bench-quick, $$(date -u '+%Y-%m-%d %H:%M UTC'), load $$(cut -d' ' -f1-3 /proc/loadavg), $$(nproc) cores"; \
	  rc=0; for b in benchmarks/bench_*.py; do n=$$(basename $$b .py); \
	    extra=$$(case $$n in bench_steps) echo "$(QUICK_ARGS_bench_steps)";; esac); \
	    echo "== $$b --quick $$extra (load $$(cut -d' ' -f1 /proc/loadavg), $$(date -u +%H:%M:%S))"; \
	    $(PY) $$b --quick $$extra 2>&1 || { rc=1; echo "FAILED: $$b"; }; done; \
	  echo "== done $$(date -u +%H:%M:%S), load $$(cut -d' ' -f1-3 /proc/loadavg)$$([ $$rc = 0 ] || echo '; a benchmark FAILED')"; \
	} | tee $(BENCH_LOG); ! tail -n 1 $(BENCH_LOG) | grep -q FAILED

experiments: install
	@for e in experiments/[a-z]*.py; do m=$$(basename $$e .py); echo "== $$m"; $(PY) -m experiments.$$m || exit 1; done

# recompute every cached cell of the paper reproductions and compare it with the committed cache (cold-run time)
verify-experiments: install
	@for m in paper000 paper001 paper003; do echo "== $$m"; $(PY) -m experiments.$$m --verify || exit 1; done

# the documentation site (Sphinx, Markdown pages in docs/), warnings as errors; open docs/_build/html/index.html
docs: install
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info topoplan/sim/_engine_aot* docs/_build
