# SPDX-License-Identifier: Apache-2.0
# Front door: everything builds with CMake into build/ (build-san/ for SANITIZE=1).
CUDA_HOME ?= /usr/local/cuda
SANITIZE ?= 0
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
ifeq ($(SANITIZE),1)
BUILD ?= build-san
CMAKE_FLAGS += -DGSLICE_SANITIZE=ON
else
BUILD ?= build
endif
CTEST_FLAGS ?= --output-on-failure

.PHONY: all deps build test demo bench clean format install format-check

all: build

deps:
	@sh scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	@sh scripts/deps.sh
	cmake -S . -B $(BUILD) -DCUDA_HOME=$(CUDA_HOME) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

PREFIX ?= /usr/local
# DESTDIR (staged installs, packages) is honoured by cmake --install from the environment.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

test: build
	cd $(BUILD) && ctest $(CTEST_FLAGS) -j $(JOBS)

demo: build
	@sh scripts/demo.sh $(BUILD)

bench: build
	@sh scripts/bench.sh $(BUILD)

clean:
	rm -rf build build-san out

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# Fails (and lists the places) where a tracked C file is not laid out as .clang-format says,
# or a tracked source file has no SPDX line.
format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')
	@sh scripts/spdx-check.sh
