/* Checked pthread calls and a lock held to the end of a scope: one
 * idiom for the core, the filter and the plugins.
 *
 * A failed lock, unlock or wait is a bug (a mutex used after it was
 * destroyed, an unlock by a thread that does not hold it), never an
 * error to report: the process aborts with a message naming the call.
 * Header only, so that every user compiles it in and none has to
 * link anything for it.
 */
#ifndef HHC_COMMON_LOCK_H
#define HHC_COMMON_LOCK_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Abort after a failed pthread call WHAT that returned R. */
static inline void __attribute__ ((noreturn))
hhc_lock_fail (const char *what, int r)
{
  fprintf (stderr, "hhc: %s: %s\n", what, strerror (r));
  abort ();
}

/* pthread_mutex_lock, aborting on failure. */
static inline void
hhc_lock (pthread_mutex_t *m)
{
  int r = pthread_mutex_lock (m);
  if (r)
    hhc_lock_fail ("pthread_mutex_lock", r);
}

/* pthread_mutex_unlock, aborting on failure. */
static inline void
hhc_unlock (pthread_mutex_t *m)
{
  int r = pthread_mutex_unlock (m);
  if (r)
    hhc_lock_fail ("pthread_mutex_unlock", r);
}

/* pthread_cond_wait, aborting on failure. */
static inline void
hhc_cond_wait (pthread_cond_t *c, pthread_mutex_t *m)
{
  int r = pthread_cond_wait (c, m);
  if (r)
    hhc_lock_fail ("pthread_cond_wait", r);
}

/* The cleanup of HHC_SCOPED_LOCK: unlock *MP unless it is NULL. */
static inline void
hhc_unlockp (pthread_mutex_t **mp)
{
  if (*mp)
    hhc_unlock (*mp);
}

#define HHC_CAT_(a, b) a##b
#define HHC_CAT(a, b) HHC_CAT_ (a, b)

/* Lock M until the end of the enclosing scope. */
#define HHC_SCOPED_LOCK(m)                                                     \
  pthread_mutex_t *HHC_CAT (hhc_scoped_lock_, __LINE__)                        \
      __attribute__ ((cleanup (hhc_unlockp), unused))                          \
      = (hhc_lock (m), (m))

/* Lock M until the end of the enclosing scope if COND is true (it is
 * evaluated once); otherwise take no lock.
 */
#define HHC_SCOPED_LOCK_IF(cond, m)                                            \
  pthread_mutex_t *HHC_CAT (hhc_scoped_lock_, __LINE__)                        \
      __attribute__ ((cleanup (hhc_unlockp), unused))                          \
      = (cond) ? (hhc_lock (m), (m)) : NULL

#endif /* HHC_COMMON_LOCK_H */
