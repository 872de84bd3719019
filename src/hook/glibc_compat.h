/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's glibc floor: 2.17 (manylinux2014). libgslice.so is loaded through /etc/ld.so.preload
 * into every program of a container, whatever glibc its image has (Ubuntu 20.04: 2.31, RHEL 8:
 * 2.28, Amazon Linux 2: 2.26); one symbol version that glibc lacks fails the load of every
 * program there. Force-included (-include, src/hook/CMakeLists.txt) into each file of the hook and
 * of its own copy of src/common, before any other header. tests/integration/hook_glibc.sh reads
 * the built library's needs.
 *
 * Two kinds of names need care when building on glibc >= 2.34:
 * - dl* and pthread_* moved from libdl.so.2 and libpthread.so.0 into libc.so.6 in 2.34, with a
 *   new default version GLIBC_2.34; libc.so.6 keeps the old versions for old binaries. .symver
 *   below binds each reference to its old version. On an older glibc those versions are defined
 *   in libdl.so.2 and libpthread.so.0 (the version's name is what the dynamic linker matches, not
 *   the file), which the hook therefore names as NEEDED (CMakeLists.txt).
 * - fstat and lstat became symbols only in 2.33 (before, <sys/stat.h> inlined calls of __fxstat
 *   and __lxstat): they are raw system calls here.
 * Names with no version at or below 2.17 are not used (pthread_mutex_clocklock: region.c).
 * dlsym is not in the list: the hook defines it (resolve.c), and .symver in that file would
 * rename the definition; the hook reaches the real one through dlvsym. */
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Each name's oldest version: x86_64's base is GLIBC_2.2.5, names added later carry theirs;
 * aarch64's base is GLIBC_2.17, so there every name here is GLIBC_2.17. */
#if defined(__x86_64__)
#define GS_GLIBC_OLD(name, x86_64) __asm__(".symver " #name "," #name "@" x86_64);
#elif defined(__aarch64__)
#define GS_GLIBC_OLD(name, x86_64) __asm__(".symver " #name "," #name "@GLIBC_2.17");
#else
#error "glibc_compat.h: no symbol versions for this architecture (add its base version)"
#endif

GS_GLIBC_OLD(dlopen, "GLIBC_2.2.5")
GS_GLIBC_OLD(dlclose, "GLIBC_2.2.5")
GS_GLIBC_OLD(dlerror, "GLIBC_2.2.5")
GS_GLIBC_OLD(dlvsym, "GLIBC_2.2.5")
GS_GLIBC_OLD(dladdr, "GLIBC_2.2.5")
GS_GLIBC_OLD(dladdr1, "GLIBC_2.3.3")
GS_GLIBC_OLD(dlinfo, "GLIBC_2.3.3")
GS_GLIBC_OLD(pthread_create, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_detach, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_join, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_once, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_key_create, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_key_delete, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_getspecific, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_setspecific, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_sigmask, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_mutex_trylock, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_mutex_timedlock, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_mutex_consistent, "GLIBC_2.12")
GS_GLIBC_OLD(pthread_mutexattr_init, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_mutexattr_destroy, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_mutexattr_settype, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_mutexattr_setpshared, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_mutexattr_setrobust, "GLIBC_2.12")
GS_GLIBC_OLD(pthread_condattr_setclock, "GLIBC_2.3.3")
GS_GLIBC_OLD(pthread_condattr_setpshared, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_rwlock_rdlock, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_rwlock_wrlock, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_rwlock_unlock, "GLIBC_2.2.5")
GS_GLIBC_OLD(pthread_kill, "GLIBC_2.2.5")

/* fstat and lstat as the kernel's: on x86_64 and aarch64 the kernel's struct stat is glibc's
 * (what __fxstat and __lxstat filled in before 2.33, with the same calls). aarch64 has no lstat
 * call: newfstatat with AT_SYMLINK_NOFOLLOW is both architectures' way. Function-like macros,
 * defined after <sys/stat.h> declared the real names: only calls are renamed. */
static inline int gs_compat_fstat(int fd, struct stat *st) {
  return (int)syscall(SYS_fstat, fd, st);
}

static inline int gs_compat_lstat(const char *path, struct stat *st) {
  return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

static inline int gs_compat_stat(const char *path, struct stat *st) {
  return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0);
}

static inline int gs_compat_fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, st, flags);
}

#define fstat(fd, st) gs_compat_fstat(fd, st)
#define lstat(path, st) gs_compat_lstat(path, st)
#define stat(path, st) gs_compat_stat(path, st)
#define fstatat(dirfd, path, st, flags) gs_compat_fstatat(dirfd, path, st, flags)
