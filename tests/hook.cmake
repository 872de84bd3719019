# The hook's tests: unit tests of its pure parts, client programs, integration scripts on the sim.
gslice_unit_test(test_region SOURCES unit/test_region.c)
gslice_unit_test(test_hook_allocs SOURCES unit/test_hook_allocs.c ${CMAKE_SOURCE_DIR}/src/hook/allocs.c)
target_include_directories(test_hook_allocs PRIVATE ${CMAKE_SOURCE_DIR}/src/hook)
