# SPDX-License-Identifier: Apache-2.0
# A slice's GPUs in the hook: GPU UUIDs and their lists (uuid.h).
gslice_unit_test(test_uuid SOURCES unit/test_uuid.c)
