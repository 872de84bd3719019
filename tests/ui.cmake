# SPDX-License-Identifier: Apache-2.0
# Tests of issue 5 (see and steer slices): the status renderers, /metrics, and the
# status/top/set CLI against a live daemon on the simulated GPU.
gslice_unit_test(test_render SOURCES unit/test_render.c ${CMAKE_SOURCE_DIR}/src/cli/render.c
                 LIBS m)
target_include_directories(test_render PRIVATE ${CMAKE_SOURCE_DIR}/src/cli)
# The flag table of gslice run and gslice set.
gslice_unit_test(test_cli_flags SOURCES unit/test_cli_flags.c ${CMAKE_SOURCE_DIR}/src/cli/flags.c)
target_include_directories(test_cli_flags PRIVATE ${CMAKE_SOURCE_DIR}/src/cli)
gslice_unit_test(test_metrics SOURCES unit/test_metrics.c ${CMAKE_SOURCE_DIR}/src/daemon/metrics.c
                 LIBS PkgConfig::MHD m)
# -iquote, not -I: src/daemon/sched.h must not stand in for <sched.h> under <pthread.h>.
target_compile_options(test_metrics PRIVATE -iquote ${CMAKE_SOURCE_DIR}/src/daemon)

# promtool on the hand-built snapshot's metrics (the live daemon's are in ui_metrics.sh).
gslice_script_test(ui_promtool ui_promtool.sh TIMEOUT 60)

# The demo's (and these tests') workload: spin kernels in batches, optional allocations.
# Linked like any CUDA program against libcuda.so.1 (the sim's at build time); no RPATH,
# so at run time LD_LIBRARY_PATH picks the sim, or the real driver is found.
add_executable(demo_spin ${CMAKE_SOURCE_DIR}/tests/progs/demo_spin.c)
target_link_libraries(demo_spin PRIVATE gslice_common gslice_sim_cuda)
set_target_properties(demo_spin PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                      SKIP_BUILD_RPATH TRUE)

# Against a live daemon on the simulated GPU (each < 30 s).
gslice_script_test(ui_status ui_status.sh TIMEOUT 60)
gslice_script_test(ui_status_gpus ui_status_gpus.sh TIMEOUT 60)
gslice_script_test(ui_set ui_set.sh TIMEOUT 60)
gslice_script_test(ui_set_memory ui_set_memory.sh TIMEOUT 60)
gslice_script_test(ui_metrics ui_metrics.sh TIMEOUT 60)
gslice_script_test(ui_top ui_top.sh TIMEOUT 60)
set_tests_properties(integration.ui_status integration.ui_status_gpus integration.ui_set integration.ui_set_memory
                     integration.ui_metrics integration.ui_top PROPERTIES LABELS "integration;ui")
