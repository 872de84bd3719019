# SPDX-License-Identifier: Apache-2.0
# The daemon is layered (docs/architecture.md): no two of its files call each other, directly
# or round a loop. scripts/layers.py reads the objects' symbols with nm and fails naming the
# files of any cycle and the symbols that close it.
find_program(GSLICE_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(GSLICE_PYTHON3)
  add_test(NAME unit.daemon_layers
           COMMAND ${GSLICE_PYTHON3} ${CMAKE_SOURCE_DIR}/scripts/layers.py gsliced
                   $<TARGET_OBJECTS:gsliced> $<TARGET_OBJECTS:gslice_daemon_core>
                   $<TARGET_OBJECTS:gslice_sched>
           COMMAND_EXPAND_LISTS)
  set_tests_properties(unit.daemon_layers PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
endif()
