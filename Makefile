# The two commands: `make run` (set up, build, run the main job) and
# `make test` (set up, build, run the whole test suite).
BUILD ?= build
ASAN_BUILD ?= build-asan
# One sanitized clang tree for the ASan + UBSan unit tests and the fuzz targets.
FUZZ_BUILD ?= $(ASAN_BUILD)
FUZZ_SECONDS ?= 60
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PREFIX ?= /usr/local

.PHONY: all deps build run test install test-asan fuzz bench format clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/run-example.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The CLI, librlx.so + headers, the CMake package (find_package(rlx) ->
# rlx::rlx), rlx.pc and the Python packages rlx and rlx_torch, under PREFIX.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# ASan + UBSan build of the unit tests (clang, -O1; scripts/configure-sanitize.sh),
# in the tree that also carries the libFuzzer targets (make fuzz).
test-asan: deps
	scripts/configure-sanitize.sh $(ASAN_BUILD) -DRLX_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	# The forced-ISA reruns (label isa_paths) are left to the release run: they
	# repeat the kernel suites, which would add minutes under ASan.
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) -LE isa_paths

# libFuzzer targets for every file reader (clang, ASan + UBSan), each run for
# FUZZ_SECONDS on seeds generated from the hostile suite; a finding fails.
# $(BUILD)/rlx, when built, exports the .mlpackage seeds. See tests/fuzz/.
fuzz: deps
	scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(BUILD)/rlx

bench: build
	@scripts/bench.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
