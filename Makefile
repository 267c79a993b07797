# rtlab — top-level entry points. `make run` and `make test` work on a fresh
# Debian machine with a C compiler and Python 3.11.

PYTHON  ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
BUILD   := build/probe
PROBE   := $(BUILD)/rtlab-probe
CROSS   := build/aarch64

.PHONY: run test probe probe-test pytest cross-test bench clean

$(VENV)/.stamp: Makefile
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet meson ninja pytest
	touch $@

$(BUILD)/build.ninja: $(VENV)/.stamp probe/meson.build probe/meson_options.txt
	$(VENV)/bin/meson setup --reconfigure $(BUILD) probe || $(VENV)/bin/meson setup $(BUILD) probe

probe: $(BUILD)/build.ninja
	$(VENV)/bin/ninja -C $(BUILD)

# Measure wake-up latency on every CPU for 20 s under 2 fork-copy loads.
run: probe
	$(PROBE) wakeup --cpus $$(cat /sys/devices/system/cpu/online) --duration 20s \
		--load forkcopy:2 --allow-fallback --json results-probe.json
	@echo "result document: results-probe.json"

probe-test: probe
	$(VENV)/bin/meson test -C $(BUILD) --print-errorlogs

pytest: probe
	RTLAB_PROBE=$(abspath $(PROBE)) $(VPY) -m pytest -q tests

test: probe-test pytest

# Static aarch64 build of rtlab-probe, smoke-tested under qemu-user. Installs
# gcc-aarch64-linux-gnu / qemu-user-static with apt-get when they are missing.
CROSS_FILE := probe/cross/aarch64-linux-gnu.ini
CROSS_QEMU := qemu-aarch64-static

cross-test: $(VENV)/.stamp
	@missing=""; \
	command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing="$$missing gcc-aarch64-linux-gnu"; \
	command -v $(CROSS_QEMU) >/dev/null 2>&1 || missing="$$missing qemu-user-static"; \
	command -v file >/dev/null 2>&1 || missing="$$missing file"; \
	if [ -n "$$missing" ]; then \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		echo "cross-test: installing$$missing"; \
		$$sudo apt-get update && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	fi
	@if [ -f $(CROSS)/build.ninja ]; then \
		$(VENV)/bin/meson setup --reconfigure $(CROSS) probe --cross-file $(CROSS_FILE) -Dstatic=true; \
	else \
		$(VENV)/bin/meson setup $(CROSS) probe --cross-file $(CROSS_FILE) -Dstatic=true; \
	fi
	$(VENV)/bin/ninja -C $(CROSS) rtlab-probe
	@info=$$(file -b $(CROSS)/rtlab-probe); echo "file: $$info"; \
	case "$$info" in \
	*"ARM aarch64"*) ;; \
	*) echo "cross-test: $(CROSS)/rtlab-probe is not an ARM aarch64 executable" >&2; exit 1;; \
	esac; \
	case "$$info" in \
	*executable*"statically linked"*|*executable*"static-pie linked"*) ;; \
	*) echo "cross-test: $(CROSS)/rtlab-probe is not a statically linked executable" >&2; exit 1;; \
	esac
	$(CROSS_QEMU) $(CROSS)/rtlab-probe --version
	rm -f $(CROSS)/wakeup.json
	$(CROSS_QEMU) $(CROSS)/rtlab-probe wakeup --loops 200 --interval 1ms --policy other \
		--no-mlock --json $(CROSS)/wakeup.json
	$(PYTHON) -c 'import json, sys; d = json.load(open(sys.argv[1])); \
		t = d["threads"][0]; \
		assert t["count"] == 200, "threads[0].count is %r, expected 200" % t["count"]; \
		print("cross-test: OK, %s %s under qemu: %d wake-ups, p50 %d ns, max %d ns" % \
		      (d["tool"], d["version"], t["count"], t["percentiles_ns"]["50"], t["max_ns"]))' \
		$(CROSS)/wakeup.json

clean:
	rm -rf build $(VENV)
