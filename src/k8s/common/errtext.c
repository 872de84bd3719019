/* SPDX-License-Identifier: Apache-2.0 */
/* The error text of the Kubernetes code (errtext.h). */
#include "errtext.h"

#include <stdarg.h>
#include <stdio.h>

int k8s_err(char *err, size_t errlen, int rc, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rc;
}
