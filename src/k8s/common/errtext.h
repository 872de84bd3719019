/* SPDX-License-Identifier: Apache-2.0 */
/* The error text of the Kubernetes code: a failing function writes what was wrong into the
 * caller's buffer and returns its -errno, in one call. Owns nothing else. */
#pragma once
#include <stddef.h>

/* Writes fmt into err (when err and errlen are given) and returns rc. */
__attribute__((format(printf, 4, 5))) int k8s_err(char *err, size_t errlen, int rc, const char *fmt,
                                                  ...);
