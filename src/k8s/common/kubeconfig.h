/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the API server client: what the connection (kube.c) reads the way the settings
 * (kubeconfig.c) do. Not for the programs: they go through kube.h. */
#pragma once
#include <stddef.h>

#define KUBE_FILE_MAX (1u << 20) /* a kubeconfig, token or certificate file */
#define KUBE_FILE_MAX_TEXT "1 MiB"

/* Reads a whole regular file of at most KUBE_FILE_MAX bytes (following links: a Secret
 * volume's files are links), NUL-terminated; *ret_len (if given) its length. 0, or a negative
 * errno with err "WHAT PATH: why": -EFBIG when larger (never a cut file), -EINVAL when not a
 * regular file. */
int kube_read_file(const char *what, const char *path, char **ret, size_t *ret_len, char *err,
                   size_t errlen);
