/* SPDX-License-Identifier: Apache-2.0 */
/* Another interposer, preloaded after the hook: its dlsym(RTLD_NEXT, "puts") must find libc's
 * puts, not itself (the hook's dlsym must not change whose "next" it is). */
#include <dlfcn.h>
#include <stdio.h>

int puts(const char *s) {
  static int (*next)(const char *);
  if (!next)
    next = (int (*)(const char *))dlsym(RTLD_NEXT, "puts");
  if (!next || next == puts)
    return -1;
  fputs("wrapped: ", stdout);
  return next(s);
}
