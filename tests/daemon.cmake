# SPDX-License-Identifier: Apache-2.0
# Daemon, protocol and compute-gate tests (issue 4).
gslice_unit_test(test_proto SOURCES unit/test_proto.c)
if(TARGET gslice_sched)
  gslice_unit_test(test_sched SOURCES unit/test_sched.c LIBS gslice_sched)
endif()

# Workload of the share tests and benches: linked to libcuda.so.1 like any CUDA program
# (the sim's at build time; LD_LIBRARY_PATH picks the driver at run time).
if(TARGET gslice_sim_cuda)
  add_executable(compute_spin progs/compute_spin.c)
  target_include_directories(compute_spin PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(compute_spin PRIVATE gslice_sim_cuda)
  set_target_properties(compute_spin PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                        SKIP_BUILD_RPATH TRUE)
endif()
# A slice's process speaking the hook's protocol itself, its launches unhooked (compute_charge_check).
if(TARGET gslice_sim_cuda)
  add_executable(compute_forge progs/compute_forge.c)
  target_include_directories(compute_forge PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(compute_forge PRIVATE gslice_sim_cuda gslice_common)
  set_target_properties(compute_forge PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                        SKIP_BUILD_RPATH TRUE)
endif()
if(TARGET gslice_sim_cuda)
  add_executable(compute_ptsz progs/compute_ptsz.c)
  target_include_directories(compute_ptsz PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(compute_ptsz PRIVATE gslice_sim_cuda Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(compute_ptsz PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                        SKIP_BUILD_RPATH TRUE)
endif()
# Threaded programs on the sim, each run by its integration/<name>*.sh: compute_graph (CUDA
# graphs under the gate, the capture pattern of PyTorch and vLLM, replays measured like
# compute_spin), compute_stream_destroy (streams destroyed while in a burst), compute_threads
# (launching threads that come and go).
if(TARGET gslice_sim_cuda)
  foreach(prog compute_ctx2 compute_graph compute_stream_destroy compute_sync_kinds compute_threads)
    add_executable(${prog} progs/${prog}.c)
    target_include_directories(${prog} PRIVATE ${CUDA_INCLUDE_DIR})
    target_link_libraries(${prog} PRIVATE gslice_sim_cuda Threads::Threads)
    set_target_properties(${prog} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                          SKIP_BUILD_RPATH TRUE)
  endforeach()
endif()
if(TARGET gslice_daemon_core)
  gslice_unit_test(test_registry SOURCES unit/test_registry.c LIBS gslice_daemon_core)
  gslice_unit_test(test_loop SOURCES unit/test_loop.c LIBS gslice_daemon_core)
  # The token mechanism on its own: token.c with its connections' I/O stubbed in the test.
  gslice_unit_test(test_token SOURCES unit/test_token.c ${CMAKE_SOURCE_DIR}/src/daemon/token.c
                   LIBS gslice_daemon_core)
  # Attribution of processes to slices on a fake process tree (attrib.c).
  gslice_unit_test(test_attrib SOURCES unit/test_attrib.c ${CMAKE_SOURCE_DIR}/src/daemon/attrib.c
                   LIBS gslice_daemon_core)
endif()

file(GLOB GSLICE_DAEMON_SCRIPTS CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_SOURCE_DIR}/integration/daemon_*.sh
     ${CMAKE_CURRENT_SOURCE_DIR}/integration/compute_*.sh)
foreach(script ${GSLICE_DAEMON_SCRIPTS})
  get_filename_component(name ${script} NAME_WE)
  gslice_script_test(${name} ${name}.sh TIMEOUT 90)
endforeach()

add_executable(daemon_badclient progs/daemon_badclient.c)
target_link_libraries(daemon_badclient PRIVATE gslice_common)
set_target_properties(daemon_badclient PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
# A command run DEPTH forks below its slice's runner (daemon_attrib_*).
add_executable(deep_fork progs/deep_fork.c)
set_target_properties(deep_fork PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

add_executable(daemon_attack progs/daemon_attack.c)
target_link_libraries(daemon_attack PRIVATE gslice_common)
set_target_properties(daemon_attack PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

add_executable(daemon_truncate progs/daemon_truncate.c)
target_link_libraries(daemon_truncate PRIVATE gslice_common Threads::Threads)
set_target_properties(daemon_truncate PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

# gslice-node's REGISTER with per-GPU values, and a container's requests on the hook socket.
add_executable(daemon_k8s progs/daemon_k8s.c)
target_link_libraries(daemon_k8s PRIVATE gslice_common)
set_target_properties(daemon_k8s PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

# A slice's process scribbling over its region's mutex, or holding its lock word, under the daemon.
add_executable(daemon_region_lock progs/daemon_region_lock.c)
target_link_libraries(daemon_region_lock PRIVATE gslice_common Threads::Threads)
set_target_properties(daemon_region_lock PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
