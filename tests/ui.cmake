# Tests of issue 5 (see and steer slices): the status renderers, /metrics, and the
# status/top/set CLI against a live daemon on the simulated GPU.
gslice_unit_test(test_render SOURCES unit/test_render.c ${CMAKE_SOURCE_DIR}/src/cli/render.c
                 LIBS m)
target_include_directories(test_render PRIVATE ${CMAKE_SOURCE_DIR}/src/cli)
gslice_unit_test(test_metrics SOURCES unit/test_metrics.c ${CMAKE_SOURCE_DIR}/src/daemon/metrics.c
                 LIBS PkgConfig::MHD m)
# -iquote, not -I: src/daemon/sched.h must not stand in for <sched.h> under <pthread.h>.
target_compile_options(test_metrics PRIVATE -iquote ${CMAKE_SOURCE_DIR}/src/daemon)

# promtool on the hand-built snapshot's metrics (the live daemon's are in ui_metrics.sh).
gslice_script_test(ui_promtool ui_promtool.sh TIMEOUT 60)
