# rtlab — top-level entry points. `make run` and `make test` work on a fresh
# Debian machine with a C compiler and Python 3.11.

PYTHON  ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
BUILD   := build/probe
PROBE   := $(BUILD)/src/rtlab-probe
CROSS   := build/aarch64
# meson-python runs `meson` from PATH: the one in the venv.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# Debian packages the tests use (cyclictest for the import tests, chromium to render
# the HTML report, stress-ng and iperf3 as load backends; hackbench comes with rt-tests;
# openssh-server for the SSH target tests, which start their own sshd; setpriv, unshare
# and mount, in every full Debian, for minimal images; Debian's 6.1 PREEMPT_RT and
# generic kernels, QEMU, kmod (depmod), busybox-static (the guest's DHCP) and file (the
# image's release) for the virtual-machine tests of tests/vm/, rtla for the real rtla
# output they import; linux-source-6.1 with xz-utils, flex and bison for scripts/kconfig, the
# kernel tree the kconfig fragment is merged into). tests/_skips.py maps each command the
# tests run to its package.
TEST_DEBS := rt-tests chromium stress-ng iperf3 openssh-server openssh-client util-linux mount \
	qemu-system-x86 kmod busybox-static file linux-image-rt-amd64 linux-image-amd64 rtla \
	linux-source-6.1 xz-utils flex bison

.PHONY: run test install probe probe-test pytest lint typecheck debs cross-test cross-probe bench \
	clean sanitize sanitize-deps test-lava lava-debs test-arm64 format format-check clang-format-deb

$(VENV)/.stamp: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet meson-python meson ninja pytest
	touch $@

# The package (rtlab + rtlab-probe) with its test extras, rebuilt incrementally in build/py.
install: $(VENV)/.stamp
	$(VPY) -m pip install --quiet --no-build-isolation --config-settings=build-dir=build/py '.[test]'

$(BUILD)/build.ninja: $(VENV)/.stamp probe/meson.build probe/meson_options.txt
	$(VENV)/bin/meson setup --reconfigure $(BUILD) probe || $(VENV)/bin/meson setup $(BUILD) probe

probe: $(BUILD)/build.ninja
	$(VENV)/bin/ninja -C $(BUILD)

# The quick preset (27 cases, under 3 minutes); needs root for SCHED_FIFO.
run: install
	$(VENV)/bin/rtlab run quick

# A package removed but not purged is missing too (its status is not "install ok installed").
debs:
	@missing=""; for p in $(TEST_DEBS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q '^install ok installed$$' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -eq 0 ]; then \
			apt-get update -qq -o DPkg::Lock::Timeout=600 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 $$missing; \
		else echo "not root: tests needing$$missing will skip"; fi; \
	fi

# C formatting (.clang-format): `make format` applies it, `make lint` checks it
# (CLANG_FORMAT_CHECK=0 skips the check, e.g. where clang-format cannot be installed).
CLANG_FORMAT_CHECK ?= 1
C_FILES = $(shell find probe src/scan -name '*.[ch]' | LC_ALL=C sort)

lint: install $(if $(filter 1,$(CLANG_FORMAT_CHECK)),format-check)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

# mypy over src/rtlab, configured in pyproject.toml ([tool.mypy]).
typecheck: install
	$(VENV)/bin/mypy

format: clang-format-deb
	clang-format -i $(C_FILES)

format-check: clang-format-deb
	clang-format --dry-run --Werror $(C_FILES)

# Debian's clang-format (version 14 on Debian 12), installed when missing (as root).
clang-format-deb:
	@command -v clang-format >/dev/null 2>&1 || { \
		if [ "$$(id -u)" -eq 0 ]; then \
			apt-get update -qq -o DPkg::Lock::Timeout=600 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 clang-format; \
		else echo "clang-format is missing: apt-get install clang-format (as root)" >&2; exit 1; fi; }

probe-test: probe
	$(VENV)/bin/meson test -C $(BUILD) --print-errorlogs

pytest: install debs
	$(VPY) -m pytest -q tests --ignore=tests/lava --ignore=tests/vm/test_arm64.py

test: lint typecheck probe-test sanitize pytest

# The probe and its C unit tests under AddressSanitizer + UndefinedBehaviorSanitizer
# (build/asan) and ThreadSanitizer (build/tsan), each followed by short runs of every
# meter (probe/tests/sanitize-meters.sh); any sanitizer report fails. gcc's runtimes
# (libasan, libubsan, libtsan) come with libgcc-N-dev, installed with apt-get when a
# sanitized program does not link.
ASAN     := build/asan
TSAN     := build/tsan
SAN_ARGS := -Dbuildtype=debugoptimized
SAN_ENV  := ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1 \
	UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1 \
	TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:second_deadlock_stack=1

sanitize-deps:
	@ok=1; for s in address,undefined thread; do \
		echo 'int main(void) { return 0; }' | \
			cc -x c -fsanitize=$$s -o /dev/null - >/dev/null 2>&1 || ok=0; \
	done; \
	if [ $$ok = 0 ]; then \
		pkg=libgcc-$$(cc -dumpversion | cut -d. -f1)-dev; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		echo "sanitize: installing $$pkg (gcc's sanitizer runtimes)"; \
		$$sudo apt-get update -o DPkg::Lock::Timeout=600 && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 $$pkg; \
	fi

$(ASAN)/build.ninja: $(VENV)/.stamp probe/meson.build probe/meson_options.txt
	$(VENV)/bin/meson setup --reconfigure $(ASAN) probe $(SAN_ARGS) -Db_sanitize=address,undefined || \
		$(VENV)/bin/meson setup $(ASAN) probe $(SAN_ARGS) -Db_sanitize=address,undefined

$(TSAN)/build.ninja: $(VENV)/.stamp probe/meson.build probe/meson_options.txt
	$(VENV)/bin/meson setup --reconfigure $(TSAN) probe $(SAN_ARGS) -Db_sanitize=thread || \
		$(VENV)/bin/meson setup $(TSAN) probe $(SAN_ARGS) -Db_sanitize=thread

sanitize: sanitize-deps $(ASAN)/build.ninja $(TSAN)/build.ninja
	$(VENV)/bin/ninja -C $(ASAN)
	$(SAN_ENV) $(VENV)/bin/meson test -C $(ASAN) --print-errorlogs
	PYTHON=$(PYTHON) probe/tests/sanitize-meters.sh $(ASAN)/src/rtlab-probe asan
	$(VENV)/bin/ninja -C $(TSAN)
	$(SAN_ENV) $(VENV)/bin/meson test -C $(TSAN) --print-errorlogs
	PYTHON=$(PYTHON) probe/tests/sanitize-meters.sh $(TSAN)/src/rtlab-probe tsan

# Static aarch64 build of rtlab-probe, smoke-tested under qemu-user. Installs
# gcc-aarch64-linux-gnu / qemu-user-static with apt-get when they are missing.
# Only the rtlab-probe target is built (the unit tests stay native); its path
# in the build tree comes from `meson introspect`.
CROSS_FILE := probe/cross/aarch64-linux-gnu.ini
CROSS_QEMU := qemu-aarch64-static
# Target libc of gcc-aarch64-linux-gnu: lets qemu run the dynamically linked
# test program of Meson's compiler sanity check (the cross file's exe_wrapper).
CROSS_ENV  := QEMU_LD_PREFIX=/usr/aarch64-linux-gnu

cross-test: $(VENV)/.stamp
	@missing=""; \
	command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing="$$missing gcc-aarch64-linux-gnu"; \
	command -v $(CROSS_QEMU) >/dev/null 2>&1 || missing="$$missing qemu-user-static"; \
	command -v file >/dev/null 2>&1 || missing="$$missing file"; \
	if [ -n "$$missing" ]; then \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		echo "cross-test: installing$$missing"; \
		$$sudo apt-get update -o DPkg::Lock::Timeout=600 && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 $$missing; \
	fi
	@if [ -f $(CROSS)/build.ninja ]; then \
		$(CROSS_ENV) $(VENV)/bin/meson setup --reconfigure $(CROSS) probe --cross-file $(CROSS_FILE) -Dstatic=true; \
	else \
		$(CROSS_ENV) $(VENV)/bin/meson setup $(CROSS) probe --cross-file $(CROSS_FILE) -Dstatic=true; \
	fi
	$(CROSS_ENV) $(VENV)/bin/meson compile -C $(CROSS) rtlab-probe
	@set -e; \
	exe=$$($(VENV)/bin/meson introspect --targets $(CROSS) | $(PYTHON) -c 'import json, sys; \
		print(next(t["filename"][0] for t in json.load(sys.stdin) if t["name"] == "rtlab-probe"))'); \
	exe=$${exe#$(CURDIR)/}; \
	info=$$(file -b $$exe); echo "file $$exe: $$info"; \
	case "$$info" in \
	*"ARM aarch64"*) ;; \
	*) echo "cross-test: $$exe is not an ARM aarch64 executable" >&2; exit 1;; \
	esac; \
	case "$$info" in \
	*executable*"statically linked"*|*executable*"static-pie linked"*) ;; \
	*) echo "cross-test: $$exe is not a statically linked executable" >&2; exit 1;; \
	esac; \
	echo "$(CROSS_QEMU) $$exe --version"; \
	$(CROSS_QEMU) $$exe --version; \
	rm -f $(CROSS)/wakeup.json; \
	echo "$(CROSS_QEMU) $$exe wakeup --loops 200 --interval 1ms --policy other --no-mlock --json $(CROSS)/wakeup.json"; \
	$(CROSS_QEMU) $$exe wakeup --loops 200 --interval 1ms --policy other --no-mlock \
		--json $(CROSS)/wakeup.json; \
	$(PYTHON) -c 'import json, sys; d = json.load(open(sys.argv[1])); \
		t = d["threads"][0]; \
		assert t["count"] == 200, "threads[0].count is %r, expected 200" % t["count"]; \
		print("cross-test: OK, %s %s (aarch64, static) under qemu: %d wake-ups, p50 %d ns, max %d ns" % \
		      (d["tool"], d["version"], t["count"], t["percentiles_ns"]["50"], t["max_ns"]))' \
		$(CROSS)/wakeup.json

# The static aarch64 probe of cross-test, carried by the package: `make install` after
# this puts it in rtlab/probes/aarch64/, which SSH targets of that architecture get.
cross-probe: cross-test
	install -D -m 755 $(CROSS)/src/rtlab-probe src/rtlab/probes/aarch64/rtlab-probe

# `rtlab lava testdef` run by a real LAVA dispatcher (tests/lava/, not part of `make
# test`; needs root, boots one QEMU guest under TCG): Debian's lava-dispatcher runs a job
# on the QEMU device of tests/lava/device.yaml that boots Debian's 6.1 PREEMPT_RT kernel
# with a busybox initramfs (built once into build/lava, kept until mkramdisk.sh changes)
# and the static probe (downloaded by the test definition from an HTTP server of the
# test, and appended to the initramfs by LAVA), runs the test definition inline and checks the
# lava-test-case results it logs (the log is kept in build/lava/lava-run.log).
LAVA      := build/lava
LAVA_DEBS := lava-dispatcher qemu-system-x86 linux-image-rt-amd64 busybox-static cpio file

lava-debs:
	@missing=""; for p in $(LAVA_DEBS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q '^install ok installed$$' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -ne 0 ]; then echo "test-lava: needs root (lava-run, and to install$$missing)" >&2; exit 1; fi; \
		apt-get update -qq -o DPkg::Lock::Timeout=600 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $$missing; \
	fi

LAVA_KERNEL := 6.1.0-56-rt-amd64

$(LAVA)/ramdisk-$(LAVA_KERNEL).cpio.gz: tests/lava/mkramdisk.sh
	mkdir -p $(LAVA)
	sh tests/lava/mkramdisk.sh $@ $(LAVA_KERNEL)

$(LAVA)/probe/build.ninja: $(VENV)/.stamp probe/meson.build probe/meson_options.txt
	$(VENV)/bin/meson setup --reconfigure $(LAVA)/probe probe -Dstatic=true || \
		$(VENV)/bin/meson setup $(LAVA)/probe probe -Dstatic=true

test-lava: install lava-debs $(LAVA)/ramdisk-$(LAVA_KERNEL).cpio.gz $(LAVA)/probe/build.ninja
	$(VENV)/bin/meson compile -C $(LAVA)/probe rtlab-probe
	RTLAB_LAVA_RAMDISK=$(LAVA)/ramdisk-$(LAVA_KERNEL).cpio.gz RTLAB_LAVA_PROBE=$(LAVA)/probe/src/rtlab-probe \
		RTLAB_LAVA_KERNEL=/boot/vmlinuz-$(LAVA_KERNEL) RTLAB_LAVA_LOG=$(LAVA)/lava-run.log $(VPY) -m pytest -q tests/lava

# An arm64 guest end to end (docs/testing.md, "arm64 guests"): Debian's 6.1 PREEMPT_RT
# kernel for arm64 booted under qemu-system-aarch64 (TCG) on a Debian arm64 root that
# `rtlab vm root` builds once with mmdebstrap (cached in ~/.cache/rtlab/vm-roots), and
# one wake-up case with --explain measured there by the static aarch64 probe. Not part
# of `make test` (about 3.5 minutes to build the root once, then about 1 per run).
ARM64_DEBS := qemu-system-arm mmdebstrap arch-test qemu-user-static binfmt-support \
	busybox-static kmod

test-arm64: cross-probe
	$(MAKE) debs TEST_DEBS="$(ARM64_DEBS)"
	$(MAKE) install
	$(VENV)/bin/rtlab vm root --arch arm64
	RTLAB_TEST_ARM64=1 $(VPY) -m pytest -q -rs tests/vm/test_arm64.py

clean:
	rm -rf build $(VENV)
