/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's SIGBUS guard (guard.h): a fault on the loop thread inside an armed section jumps
 * back to it; anywhere else SIGBUS kills the daemon as it always did. */
#include "guard.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <unistd.h>

/* Thread-local, the one piece of global state here: the handler runs on the faulting thread and
 * has nothing else to go on. Only the loop thread ever arms it; the metrics thread (libmicrohttpd)
 * reads a published snapshot, never a region, and a SIGBUS there is still fatal. */
static __thread sigjmp_buf *armed;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
  sigjmp_buf *jb = armed;

  (void)uc;
  /* si_code > 0: raised by the kernel for this access, not sent with kill(). */
  if (jb && si->si_code > 0) {
    armed = NULL;
    siglongjmp(*jb, 1);
  }
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigaction(sig, &dfl, NULL);
  raise(sig);
}

int guard_install(void) {
  struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};

  sigemptyset(&sa.sa_mask);
  return sigaction(SIGBUS, &sa, NULL) < 0 ? -errno : 0;
}

void guard_arm(sigjmp_buf *jb) {
  armed = jb;
}

void guard_disarm(void) {
  armed = NULL;
}

/* Nothing else to undo: the daemon never hands a region's mutex to glibc (region.c), so no robust
 * list of its threads can point into a mapping the jump leaves behind; a lock word the daemon took
 * by hand to add a device stays as the fault left it, in a region given up on anyway. (Before,
 * the daemon locked regions through glibc and this emptied the loop thread's robust list.) */
void guard_recovered(void) {
  armed = NULL;
}
