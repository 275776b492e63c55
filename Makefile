# ipctrace build: workloads/ -> .output/ipcbench, bpf/ -> .output/*.skel.h -> .output/ipctrace-loader
# `make V=1` shows the full commands; headers are tracked with -MMD -MP.
OUTPUT    := .output
CLANG     ?= clang
CC        ?= cc
BPFTOOL   ?= bpftool
PYTHON    ?= .venv/bin/python
HOST_ARCH := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
ARCH      ?= $(HOST_ARCH)
override ARCH := $(patsubst x86_64,x86,$(patsubst aarch64,arm64,$(ARCH)))
# `make ARCH=arm64` on an x86-64 host: the cross build, into its own directory, with Debian's
# gcc-aarch64-linux-gnu and the arm64 libraries through multiarch (`tools/bootstrap --arm64`
# installs them). The BPF objects are built for arm64 (__TARGET_ARCH_arm64, pt_regs as
# arm64 lays it out) against bpf/arch/arm64/vmlinux.h, from the BTF of Debian's arm64 cloud
# kernel: CO-RE relocates them on every arm64 kernel.
ifneq ($(ARCH),$(HOST_ARCH))
ifneq ($(ARCH),arm64)
$(error ARCH=$(ARCH): the cross build knows arm64 only)
endif
OUTPUT    := .output-arm64
CROSS     ?= aarch64-linux-gnu-
CC        := $(CROSS)gcc
export PKG_CONFIG_LIBDIR := /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
endif
VMLINUX_H := $(if $(filter arm64,$(ARCH)),bpf/arch/arm64/vmlinux.h,vmlinux.h)
# <bpf/usdt.bpf.h> includes <linux/errno.h>, whose <asm/errno.h> is in the multiarch directory
# that clang -target bpf does not search.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BPF_INC   := $(if $(MULTIARCH),-idirafter /usr/include/$(MULTIARCH))

CFLAGS    ?= -O2 -g -fno-omit-frame-pointer
CFLAGS    += -Wall -Wextra -Wno-unused-parameter -std=gnu11 -D_GNU_SOURCE -I$(OUTPUT) -Ibpf -Iworkloads -iquote loaders
LDLIBS_WL := -lpthread -lrt $(shell pkg-config --libs libzmq 2>/dev/null || echo -lzmq)
LDLIBS_LD := $(shell pkg-config --libs libbpf 2>/dev/null || echo -lbpf -lelf -lz)

ifeq ($(SANITIZE),1)
OUTPUT    := .output-san
CFLAGS    += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
# The tests run these builds (the analysis honours IPCTRACE_OUTPUT); every sanitizer report
# lands in SAN_REPORTS, so that one in a program a test expected to fail still fails the
# suite. A thread ended by pthread_cancel leaves poisoned stack that GCC's ASan reports as an
# overflow in its own sigaltstack call (google/sanitizers#1399); a fake stack per frame avoids it.
SAN_REPORTS := $(CURDIR)/$(OUTPUT)/reports
SAN_ENV   := ASAN_OPTIONS=detect_stack_use_after_return=1 UBSAN_OPTIONS=print_stacktrace=1
TEST_ENV  := IPCTRACE_OUTPUT=$(OUTPUT) ASAN_OPTIONS=detect_stack_use_after_return=1:log_path=$(SAN_REPORTS)/asan \
             UBSAN_OPTIONS=print_stacktrace=1:log_path=$(SAN_REPORTS)/ubsan
endif

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

WL_SRCS   := $(wildcard workloads/*.c workloads/cases/*.c)
# the JSON writer and the maker of files in a results directory they share
WL_OBJS   := $(patsubst %.c,$(OUTPUT)/%.o,$(WL_SRCS)) $(OUTPUT)/loaders/json.o $(OUTPUT)/loaders/outfile.o
BPF_SRCS  := $(wildcard bpf/*.bpf.c)
BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.bpf.o,$(BPF_SRCS))
SKELS     := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))
LD_SRCS   := $(wildcard loaders/*.c)
LD_OBJS   := $(patsubst %.c,$(OUTPUT)/%.o,$(LD_SRCS))

# The analysis' passes over all events (analysis/store/decode.c, analysis/model/timeline.c), loaded by Python through ctypes:
# built without the sanitizers, whose runtimes a Python process has not loaded.
AN_SRCS   := $(wildcard analysis/*/*.c)
AN_OBJS   := $(patsubst %.c,$(OUTPUT)/%.o,$(AN_SRCS))
LIB_CFLAGS := $(filter-out -fsanitize=%,$(CFLAGS)) -fPIC

# Programs that show how to mark iterations for `ipctrace trace` (examples/ipctrace_marker.h).
EX_SRCS   := $(wildcard examples/*.c)
EX_BINS   := $(patsubst examples/%.c,$(OUTPUT)/examples/%,$(EX_SRCS))

BINS      := $(OUTPUT)/ipcbench $(OUTPUT)/libipctrace-analysis.so $(OUTPUT)/ipctrace-start $(OUTPUT)/ipctrace-broker \
             $(OUTPUT)/version $(EX_BINS)
ifneq ($(LD_SRCS),)
BINS      += $(OUTPUT)/ipctrace-loader
endif

.DELETE_ON_ERROR:
.PHONY: all clean vmlinux vmlinux-arm64 cross-arm64 test bench bench-workloads vmtest vmtest-arm64 vmtest-arm64-short soak-watch

all: $(BINS) $(OUTPUT)/.built

# The front end's bytecode, written here once: Python then reads it at every start instead of
# compiling the modules again (tens of ms), also where PYTHONDONTWRITEBYTECODE is set.
PY_SRCS   := $(wildcard analysis/*.py analysis/*/*.py)
PYC_PY    := $(firstword $(wildcard $(PYTHON)) python3)

# What the launcher compares the sources' times with (ipctrace): newer than every program. A
# directory made anew: mkdir follows no link that someone who can write .output planted there.
$(OUTPUT)/.built: $(BINS) $(PY_SRCS)
	$(call msg,PYC,analysis)
	$(Q)$(PYC_PY) -m compileall -q analysis >/dev/null
	$(Q)rm -rf $@ && mkdir $@

$(OUTPUT)/ipcbench: $(WL_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(WL_OBJS) $(LDLIBS_WL) $(LDLIBS_LD)

$(OUTPUT)/ipctrace-loader: $(LD_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_LD)

# The launcher's last step (tools/start.c): static, so that nothing runs before it blocks the
# signals, and without the sanitizers, which cannot link statically.
$(OUTPUT)/ipctrace-start: tools/start.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -Wall -Wextra -static -o $@ $<

# Under sudo, the one process that keeps root (tools/broker.c); the launcher execs it through
# ipctrace-start, so that it starts with the stop signals blocked. Without the sanitizers.
$(OUTPUT)/ipctrace-broker: tools/broker.c tools/broker.h | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -Wall -Wextra -D_GNU_SOURCE -o $@ $<

# The version `ipctrace --version` and every results directory state, recorded at build time
# (no git runs later, under anyone's rights): rebuilt when HEAD or the index moves. git runs
# here without anyone's configuration but the repository's.
GIT       := env -i PATH=/usr/bin:/bin HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 git -C $(CURDIR) -c safe.directory=$(CURDIR)
GIT_DIR   := $(shell $(GIT) rev-parse --absolute-git-dir 2>/dev/null)
$(OUTPUT)/version: $(wildcard $(GIT_DIR)/HEAD $(GIT_DIR)/index) | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)($(GIT) describe --always --dirty 2>/dev/null || echo unknown) >$@

# <sys/sdt.h>: Debian's systemtap-sdt-dev (tools/bootstrap installs it).
$(OUTPUT)/examples/%: examples/%.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -Iexamples -MMD -MP -MF $@.d $(LDFLAGS) -o $@ $<

$(OUTPUT)/libipctrace-analysis.so: $(AN_OBJS)
	$(call msg,LIB,$@)
	$(Q)$(CC) -shared -o $@ $^

$(OUTPUT)/analysis/%.o: analysis/%.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

# C objects depend on the skeletons so that a BPF change rebuilds whoever embeds it.
$(OUTPUT)/%.o: %.c $(SKELS) | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(VMLINUX_H) | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(dir $(VMLINUX_H)) -Ibpf $(BPF_INC) -MMD -MP -c $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

$(OUTPUT):
	$(Q)mkdir -p $@

vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h

# bpf/arch/arm64/vmlinux.h from the BTF inside Debian's arm64 cloud kernel (the 6.12 that
# `make vmtest-arm64` boots): tools/vmtest/kimage finds it in the kernel image.
vmlinux-arm64:
	$(Q)mkdir -p bpf/arch/arm64
	$(Q)mkdir -p .output && tools/vmtest/kimage btf "$$(tools/vmtest/kernels --arch arm64 6.12 | awk '{print $$3}')" .output/vmlinux-arm64.btf
	$(BPFTOOL) btf dump file .output/vmlinux-arm64.btf format c > bpf/arch/arm64/vmlinux.h

# The cross build for arm64 (the loader, ipcbench, the examples and the analysis library in
# .output-arm64/), then the arm64 guests: Debian's 6.1 and 6.12 arm64 cloud kernels under
# qemu-system-aarch64 (TCG), the analysis of their traces on this host.
cross-arm64:
	$(Q)tools/bootstrap --arm64
	$(Q)$(MAKE) --no-print-directory ARCH=arm64 all

vmtest-arm64:
	$(Q)tools/bootstrap --test --arm64
	$(Q)tools/vmtest/run --arch arm64

# CI's arm64 check (tools/vmtest/README.md): the 6.12 arm64 guest's doctor and one known answer,
# known_pingpong over pipe traced by --rtt (200 round trips), in a few minutes.
vmtest-arm64-short:
	$(Q)tools/bootstrap --test --arm64
	$(Q)tools/vmtest/run --arch arm64 --short

clean:
	rm -rf .output .output-san .output-arm64

# The C tests are built into the driver (`ipcbench selftest`); pytest runs everything else.
# Installs what is missing (apt packages as root, .venv), then builds, lints (ruff: the
# rules and the format of pyproject.toml), checks the types (mypy, configured there) and tests.
test:
	$(Q)tools/bootstrap --test
	$(Q)$(MAKE) --no-print-directory all
	$(call msg,LINT,ruff)
	$(Q)$(PYTHON) -m ruff check --quiet . && $(PYTHON) -m ruff format --check --quiet .
	$(call msg,TYPES,mypy)
	$(Q)$(PYTHON) -m mypy
	$(call msg,TEST,selftest)
	$(Q)$(SAN_ENV) $(OUTPUT)/ipcbench selftest
ifeq ($(SANITIZE),1)
	$(Q)rm -rf $(SAN_REPORTS) && mkdir -p $(SAN_REPORTS)
	$(Q)$(TEST_ENV) $(PYTHON) -m pytest -q -rR tests; rc=$$?; \
	if [ -n "$$(ls -A $(SAN_REPORTS))" ]; then \
		echo "sanitizer reports in $(SAN_REPORTS):"; head -n 40 $(SAN_REPORTS)/*; exit 1; fi; exit $$rc
else
	$(Q)$(PYTHON) -m pytest -q -rR tests
endif

bench-workloads:
	$(Q)tools/bootstrap
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) -m analysis bench-workloads

bench:
	$(Q)tools/bootstrap
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) -m analysis bench
	$(Q)$(PYTHON) -m analysis bench-analysis
	$(Q)$(PYTHON) -m analysis validate

# The one-hour soak of `ipctrace watch` (issue 37): memory flat, disk within --max-disk, every slow
# request kept; SOAK_S=600 for a shorter one, SOAK_GAP_NS=0 for a client that asks at full speed.
soak-watch:
	$(Q)tools/bootstrap
	$(Q)$(MAKE) --no-print-directory all
	$(Q)tools/soak-watch

# Boots Debian's 6.1 and 6.12 kernels under QEMU to prove the fentry and kprobe paths, then
# two 6.12 guests for a round trip traced on both and joined (ipctrace merge), a short one.
vmtest:
	$(Q)tools/bootstrap --test
	$(Q)tools/vmtest/run
	$(Q)tools/vmtest/twohost --iterations 200

-include $(patsubst %.o,%.d,$(WL_OBJS) $(LD_OBJS) $(BPF_OBJS) $(AN_OBJS)) $(EX_BINS:=.d)
