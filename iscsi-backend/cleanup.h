/* Scope-bound helpers for the iSCSI plugin: a mutex held until the end
 * of the enclosing scope, and a pointer freed there.
 */
#ifndef HHCISCSI_CLEANUP_H
#define HHCISCSI_CLEANUP_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* Abort: a failed lock or unlock is a bug, never an I/O error. */
static inline void
iscsi_lock_check (int r, const char *what)
{
  if (r != 0)
    {
      fprintf (stderr, "hhciscsi: %s failed (%d)\n", what, r);
      abort ();
    }
}

static inline void
iscsi_unlockp (pthread_mutex_t **mp)
{
  if (*mp)
    iscsi_lock_check (pthread_mutex_unlock (*mp), "pthread_mutex_unlock");
}

static inline pthread_mutex_t *
iscsi_lock (pthread_mutex_t *m)
{
  iscsi_lock_check (pthread_mutex_lock (m), "pthread_mutex_lock");
  return m;
}

#define ISCSI_CAT_(a, b) a##b
#define ISCSI_CAT(a, b) ISCSI_CAT_ (a, b)

/* Hold mutex M until the end of the enclosing scope. */
#define ISCSI_SCOPED_LOCK(m)                                                   \
  pthread_mutex_t *ISCSI_CAT (iscsi_scoped_lock_, __LINE__)                    \
      __attribute__ ((cleanup (iscsi_unlockp), unused))                        \
      = iscsi_lock (m)

static inline void
iscsi_freep (void *p)
{
  free (*(void **)p);
}

/* A heap pointer freed at the end of the enclosing scope. */
#define ISCSI_CLEANUP_FREE __attribute__ ((cleanup (iscsi_freep)))

#endif /* HHCISCSI_CLEANUP_H */
