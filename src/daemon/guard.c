/* The daemon's SIGBUS guard (guard.h): a fault on the loop thread inside an armed section jumps
 * back to it; anywhere else SIGBUS kills the daemon as it always did. */
#include "guard.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
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

/* The fault may have hit while this thread held the region's robust mutex, or halfway through
 * taking it: glibc then has the mutex on the thread's robust list (or as its pending operation),
 * a list that lives in the slice's memory and points into a mapping about to be unmapped. Left
 * there, the next robust lock (the next region, very likely mapped at the same address) would
 * write through the stale entry. The mutex is not unlocked: its memory is gone (or is the
 * slice's again, whatever it now holds), and the region is given up on anyway. Region calls
 * take and drop the lock within one call, and the loop thread holds no other robust mutex, so
 * the list at a fault holds that mutex at most: emptying it forgets exactly that. The list head
 * is glibc's own, registered with the kernel (set_robust_list), whose layout is the kernel ABI
 * (struct robust_list_head: empty when it points at itself). */
void guard_recovered(void) {
  struct robust_list_head *head = NULL;
  size_t len = 0;

  armed = NULL;
  if (syscall(SYS_get_robust_list, 0, &head, &len) == 0 && head && len == sizeof(*head)) {
    head->list.next = &head->list;
    head->list_op_pending = NULL;
  }
  /* region.c turns cancellation off while it holds the lock; nothing cancels the loop thread,
   * but leave it as it was. */
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
}
