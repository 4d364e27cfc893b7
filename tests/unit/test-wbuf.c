/* Unit test of the cos plugin's write-back buffer (cos-backend/wbuf.c)
 * against an in-memory store: what a sync returns for is stored, also
 * when writes go on into the objects being stored; at most one store
 * of an object is in flight; a failed store keeps the object dirty and
 * readable, fails the sync that covers it (and only that), and the next
 * sync stores it; a full buffer of objects that cannot be stored gives
 * EIO instead of waiting for ever.  Run under TSan in CI.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "wbuf.h"

#define OSIZE 64   /* object size */
#define NOBJ 16    /* objects in the store */
#define NWRITERS 4 /* threads; each owns bytes [16 t, 16 t + 16) */
#define SPAN (OSIZE / NWRITERS)

/* The store. */
static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char store[NOBJ][OSIZE];
static unsigned inflight[NOBJ]; /* stores of each object running */
static bool fail_obj[NOBJ];     /* stores of it fail */
static unsigned stores, overlaps;
static bool slow;                   /* stores take a little while */
static pthread_mutex_t locks[NOBJ]; /* the writers' object locks */

static int
fake_store (uint64_t idx, const void *data)
{
  bool fail;

  assert_true (idx < NOBJ);
  pthread_mutex_lock (&store_lock);
  if (inflight[idx]++ > 0)
    overlaps++;
  fail = fail_obj[idx];
  pthread_mutex_unlock (&store_lock);
  if (slow)
    {
      /* Widen the window for writes into an object being stored. */
      struct timespec ts = { 0, 200 * 1000 };
      nanosleep (&ts, NULL);
    }
  pthread_mutex_lock (&store_lock);
  inflight[idx]--;
  if (!fail)
    {
      memcpy (store[idx], data, OSIZE);
      stores++;
    }
  pthread_mutex_unlock (&store_lock);
  if (fail)
    errno = EIO;
  return fail ? -1 : 0;
}

static void
set_fail (int idx, bool v)
{
  pthread_mutex_lock (&store_lock);
  fail_obj[idx] = v;
  pthread_mutex_unlock (&store_lock);
}

static pthread_mutex_t *
fake_lock (uint64_t idx)
{
  return &locks[idx];
}

static void
fake_stored (uint64_t idx, const void *data, bool ok)
{
  assert_true (idx < NOBJ);
}

static const struct wbuf_ops ops
    = { .store = fake_store, .lock = fake_lock, .stored = fake_stored };

static void
reset (void)
{
  memset (store, 0, sizeof store);
  memset (fail_obj, 0, sizeof fail_obj);
  stores = overlaps = 0;
  slow = false;
  for (int i = 0; i < NOBJ; i++)
    pthread_mutex_init (&locks[i], NULL);
}

/* What cos.c's buffer_object does: patch the dirty copy, or make one
 * from what the store holds.
 */
static int
write_obj (struct wbuf *w, uint64_t idx, uint32_t off, uint32_t n,
           const void *buf)
{
  char *obj;

  pthread_mutex_lock (&locks[idx]);
  if (wbuf_patch (w, idx, off, n, buf))
    {
      pthread_mutex_unlock (&locks[idx]);
      return 0;
    }
  pthread_mutex_unlock (&locks[idx]);
  if (wbuf_reserve (w) == -1)
    return -1;
  pthread_mutex_lock (&locks[idx]);
  if (wbuf_patch (w, idx, off, n, buf))
    wbuf_unreserve (w);
  else
    {
      obj = malloc (OSIZE);
      assert_non_null (obj);
      pthread_mutex_lock (&store_lock);
      memcpy (obj, store[idx], OSIZE);
      pthread_mutex_unlock (&store_lock);
      memcpy (obj + off, buf, n);
      assert_int_equal (wbuf_add (w, idx, obj), 0);
    }
  pthread_mutex_unlock (&locks[idx]);
  return 0;
}

static void
stored_bytes (uint64_t idx, uint32_t off, uint32_t n, void *out)
{
  pthread_mutex_lock (&store_lock);
  memcpy (out, store[idx] + off, n);
  pthread_mutex_unlock (&store_lock);
}

static void
test_write_read_sync (void **state)
{
  unsigned char b[OSIZE], got[OSIZE];
  struct wbuf *w;

  reset ();
  w = wbuf_new (&ops, 4, OSIZE, 2);
  assert_non_null (w);
  memset (b, 0xa1, sizeof b);
  assert_int_equal (write_obj (w, 3, 10, 20, b), 0);
  /* Readable at once, whatever the threads did meanwhile. */
  if (wbuf_read (w, 3, 0, OSIZE, got))
    {
      assert_int_equal (got[9], 0);
      assert_int_equal (got[10], 0xa1);
      assert_int_equal (got[29], 0xa1);
      assert_int_equal (got[30], 0);
    }
  else
    {
      stored_bytes (3, 0, OSIZE, got);
      assert_int_equal (got[10], 0xa1);
    }
  assert_int_equal (wbuf_sync (w, 0, UINT64_MAX), 0);
  stored_bytes (3, 0, OSIZE, got);
  assert_int_equal (got[9], 0);
  assert_int_equal (got[10], 0xa1);
  assert_int_equal (got[29], 0xa1);
  assert_int_equal (got[30], 0);
  assert_false (wbuf_has (w, 3));
  assert_int_equal (wbuf_dirty (w), 0);
  wbuf_free (w);
}

/* Each writer owns a byte range in every object and keeps a model of
 * it: after each of its syncs the store must hold the model there.
 */
struct writer {
  struct wbuf *w;
  unsigned t;
  unsigned seed;
  unsigned char model[NOBJ][SPAN];
  int failed; /* a check that failed (asserts are for the main thread) */
};

static void *
writer_thread (void *p)
{
  struct writer *wr = p;

  for (int i = 0; i < 3000 && !wr->failed; i++)
    {
      uint64_t idx = rand_r (&wr->seed) % NOBJ;
      uint32_t off = rand_r (&wr->seed) % SPAN;
      uint32_t n = 1 + rand_r (&wr->seed) % (SPAN - off);
      unsigned char b[SPAN];

      memset (b, 1 + rand_r (&wr->seed) % 255, n);
      if (write_obj (wr->w, idx, wr->t * SPAN + off, n, b) == -1)
        wr->failed = 1;
      memcpy (wr->model[idx] + off, b, n);
      if (rand_r (&wr->seed) % 16 == 0)
        {
          bool all = rand_r (&wr->seed) % 2;
          uint64_t lo = all ? 0 : idx, hi = all ? UINT64_MAX : idx;
          if (wbuf_sync (wr->w, lo, hi) == -1)
            wr->failed = 2;
          for (uint64_t j = lo; j <= hi && j < NOBJ; j++)
            {
              unsigned char got[SPAN];
              stored_bytes (j, wr->t * SPAN, SPAN, got);
              if (memcmp (got, wr->model[j], SPAN) != 0)
                wr->failed = 3;
            }
        }
    }
  return NULL;
}

static void
test_concurrent_writers (void **state)
{
  struct writer wr[NWRITERS];
  pthread_t tid[NWRITERS];
  struct wbuf_stats st;
  struct wbuf *w;

  reset ();
  slow = true;
  w = wbuf_new (&ops, 6, OSIZE, 4); /* fewer slots than objects */
  assert_non_null (w);
  for (unsigned t = 0; t < NWRITERS; t++)
    {
      memset (&wr[t], 0, sizeof wr[t]);
      wr[t].w = w;
      wr[t].t = t;
      wr[t].seed = 1000 + t;
      assert_int_equal (pthread_create (&tid[t], NULL, writer_thread, &wr[t]),
                        0);
    }
  for (unsigned t = 0; t < NWRITERS; t++)
    {
      pthread_join (tid[t], NULL);
      assert_int_equal (wr[t].failed, 0);
    }
  assert_int_equal (wbuf_sync (w, 0, UINT64_MAX), 0);
  for (unsigned t = 0; t < NWRITERS; t++)
    for (unsigned j = 0; j < NOBJ; j++)
      assert_memory_equal (store[j] + t * SPAN, wr[t].model[j], SPAN);
  assert_int_equal (overlaps, 0);
  wbuf_get_stats (w, &st);
  assert_int_equal (st.failures, 0);
  assert_true (st.stores > 0);
  assert_true (st.merged > 0); /* writes into dirty objects happened */
  assert_int_equal (st.stores, stores);
  wbuf_free (w);
}

static void
test_failed_store (void **state)
{
  unsigned char a[OSIZE], b[OSIZE], got[OSIZE];
  struct wbuf_stats st;
  struct wbuf *w;

  reset ();
  w = wbuf_new (&ops, 4, OSIZE, 2);
  assert_non_null (w);
  memset (a, 0x11, sizeof a);
  memset (b, 0x22, sizeof b);
  set_fail (5, true);
  assert_int_equal (write_obj (w, 5, 0, OSIZE, a), 0);
  assert_int_equal (write_obj (w, 6, 0, OSIZE, b), 0);
  errno = 0;
  assert_int_equal (wbuf_sync (w, 0, UINT64_MAX), -1);
  assert_int_equal (errno, EIO);
  /* The other object was stored, and its own sync succeeds. */
  stored_bytes (6, 0, OSIZE, got);
  assert_memory_equal (got, b, OSIZE);
  assert_int_equal (wbuf_sync (w, 6, 6), 0);
  /* The failed one is dirty and readable; syncs of it fail (each
   * tries again) until the store works.
   */
  assert_true (wbuf_read (w, 5, 0, OSIZE, got));
  assert_memory_equal (got, a, OSIZE);
  assert_int_equal (wbuf_sync (w, 5, 5), -1);
  set_fail (5, false);
  assert_int_equal (wbuf_sync (w, 5, 5), 0);
  stored_bytes (5, 0, OSIZE, got);
  assert_memory_equal (got, a, OSIZE);
  assert_int_equal (wbuf_dirty (w), 0);
  wbuf_get_stats (w, &st);
  assert_true (st.failures >= 2); /* 3 if the first sync retried it */
  wbuf_free (w);
}

static void
test_full_of_failures (void **state)
{
  unsigned char a[OSIZE], p[8];
  struct wbuf *w;

  reset ();
  w = wbuf_new (&ops, 2, OSIZE, 2);
  assert_non_null (w);
  memset (a, 0x33, sizeof a);
  for (int i = 0; i < NOBJ; i++)
    set_fail (i, true);
  assert_int_equal (write_obj (w, 0, 0, OSIZE, a), 0);
  assert_int_equal (write_obj (w, 1, 0, OSIZE, a), 0);
  /* No room, and nothing can be stored: EIO, not a hang. */
  errno = 0;
  assert_int_equal (write_obj (w, 2, 0, OSIZE, a), -1);
  assert_int_equal (errno, EIO);
  /* A write into a dirty (failed) object needs no room. */
  memset (p, 0x44, sizeof p);
  assert_int_equal (write_obj (w, 1, 0, sizeof p, p), 0);
  /* Once the store works again, room comes. */
  for (int i = 0; i < NOBJ; i++)
    set_fail (i, false);
  assert_int_equal (write_obj (w, 2, 0, OSIZE, a), 0);
  assert_int_equal (wbuf_sync (w, 0, UINT64_MAX), 0);
  assert_memory_equal (store[0], a, OSIZE);
  assert_memory_equal (store[1], p, sizeof p);
  assert_memory_equal (store[1] + sizeof p, a + sizeof p, OSIZE - sizeof p);
  assert_memory_equal (store[2], a, OSIZE);
  wbuf_free (w);
}

/* The store is down and a writer keeps writing the object: every store
 * fails with the object written again meanwhile.  A sync must still
 * return (EIO), not wait for the writer to stop.
 */
struct rewriter {
  struct wbuf *w;
  int stop; /* atomic */
  unsigned writes;
};

static void *
rewriter_thread (void *p)
{
  struct rewriter *rw = p;
  unsigned char b = 0;

  while (!__atomic_load_n (&rw->stop, __ATOMIC_ACQUIRE))
    {
      b++;
      if (write_obj (rw->w, 9, 0, 1, &b) == -1)
        break;
      rw->writes++;
    }
  return NULL;
}

static void
test_failing_while_written (void **state)
{
  struct rewriter rw = { 0 };
  unsigned char a[OSIZE];
  pthread_t tid;

  reset ();
  slow = true; /* each failing store leaves time for writes */
  rw.w = wbuf_new (&ops, 4, OSIZE, 1);
  assert_non_null (rw.w);
  memset (a, 0x55, sizeof a);
  set_fail (9, true);
  assert_int_equal (write_obj (rw.w, 9, 0, OSIZE, a), 0);
  assert_int_equal (pthread_create (&tid, NULL, rewriter_thread, &rw), 0);
  errno = 0;
  assert_int_equal (wbuf_sync (rw.w, 9, 9), -1);
  assert_int_equal (errno, EIO);
  assert_int_equal (wbuf_sync (rw.w, 0, UINT64_MAX), -1);
  __atomic_store_n (&rw.stop, 1, __ATOMIC_RELEASE);
  pthread_join (tid, NULL);
  set_fail (9, false);
  assert_int_equal (wbuf_sync (rw.w, 0, UINT64_MAX), 0);
  assert_int_equal (wbuf_dirty (rw.w), 0);
  wbuf_free (rw.w);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_write_read_sync),
    cmocka_unit_test (test_concurrent_writers),
    cmocka_unit_test (test_failed_store),
    cmocka_unit_test (test_full_of_failures),
    cmocka_unit_test (test_failing_while_written),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
