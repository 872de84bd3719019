/* SPDX-License-Identifier: Apache-2.0 */
/* cuGetProcAddress's one table: public name, the CUDA version its ABI variant
 * appeared in, the ABI name and pointer, and the per-thread-stream variant. */
#pragma once
#include "driver.h"

struct sim_procaddr_entry {
  const char *name; /* public name, as a program asks for it */
  int version;      /* first CUDA version (1000*major + 10*minor) this variant serves */
  const char *abi;
  void *fn;
  const char *abi_ptds; /* NULL if the call takes no stream */
  void *fn_ptds;
};

/* Finds the variant of name a program built for cudaVersion wants (the entry carries
 * both its legacy and per-thread forms; per_thread callers take fn_ptds when set).
 * Returns the CU_GET_PROC_ADDRESS_* status and sets *ret on success. */
CUdriverProcAddressQueryResult sim_procaddr_find(const char *name, int cudaVersion, int per_thread,
                                                 const struct sim_procaddr_entry **ret);
