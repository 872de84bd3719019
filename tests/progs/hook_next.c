/* SPDX-License-Identifier: Apache-2.0 */
/* Prints one line with puts, for the RTLD_NEXT check (hook_next_lib.c wraps it). */
#include <stdio.h>

int main(void) {
  return puts("hello") < 0;
}
