/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the API server client: what the connection (kube.c) reads the way the settings
 * (kubeconfig.c) do. Not for the programs: they go through kube.h. */
#pragma once
#include <stddef.h>

/* Reads a whole regular file of at most 1 MiB (a token, a certificate, a kubeconfig),
 * NUL-terminated; *ret_len (if given) its length. -EFBIG when larger or not a regular file. */
int kube_read_file(const char *path, char **ret, size_t *ret_len);
