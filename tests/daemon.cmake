# Daemon, protocol and compute-gate tests (issue 4).
gslice_unit_test(test_proto SOURCES unit/test_proto.c)
if(TARGET gslice_sched)
  gslice_unit_test(test_sched SOURCES unit/test_sched.c LIBS gslice_sched)
endif()
