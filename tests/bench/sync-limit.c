/* scripts/bench/sync-limit's load: CLIENTS closed-loop clients repeat
 * one "FLUSH" of a pattern on three preallocated files for SECONDS and
 * print the FLUSHes per second (the header of scripts/bench/sync-limit
 * says what each pattern does).
 *
 *   sync-limit PATTERN SECONDS CLIENTS FILE-A FILE-L FILE-C
 */
#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#define BS 4096

enum pattern { P_FILE, P_CKPT, P_1SYNC, P_2SYNC };

static enum pattern pat;
static int fd_a, fd_l, fd_c;
static uint64_t nblocks;
static double deadline;

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
must (bool ok, const char *what)
{
  if (!ok)
    {
      perror (what);
      exit (1);
    }
}

/* A 4 KiB write at a random block of fd. */
static void
write_block (int fd, unsigned *seed, const char *buf)
{
  off_t off = (off_t)(rand_r (seed) % nblocks) * BS;

  must (pwrite (fd, buf, BS, off) == BS, "pwrite");
}

static void
sync_fd (int fd)
{
  must (fdatasync (fd) == 0, "fdatasync");
}

/* The cache's side of one FLUSH (run beside the log's). */
static void
cache_side (unsigned *seed, const char *buf)
{
  if (pat == P_FILE)
    return;
  write_block (fd_c, seed, buf);
  if (pat == P_2SYNC)
    sync_fd (fd_c);
  if (pat == P_1SYNC || pat == P_2SYNC)
    {
      write_block (fd_c, seed, buf);
      sync_fd (fd_c);
    }
}

struct client {
  pthread_t th, helper;
  pthread_barrier_t bar;
  unsigned seed, hseed;
  bool stop;
  uint64_t count;
  char buf[BS];
};

static void *
helper_main (void *arg)
{
  struct client *cl = arg;

  for (;;)
    {
      pthread_barrier_wait (&cl->bar);
      if (__atomic_load_n (&cl->stop, __ATOMIC_ACQUIRE))
        return NULL;
      cache_side (&cl->hseed, cl->buf);
      pthread_barrier_wait (&cl->bar);
    }
}

static void *
client_main (void *arg)
{
  struct client *cl = arg;

  while (now () < deadline)
    {
      pthread_barrier_wait (&cl->bar);
      write_block (pat == P_FILE ? fd_a : fd_l, &cl->seed, cl->buf);
      sync_fd (pat == P_FILE ? fd_a : fd_l);
      pthread_barrier_wait (&cl->bar);
      cl->count++;
    }
  __atomic_store_n (&cl->stop, true, __ATOMIC_RELEASE);
  pthread_barrier_wait (&cl->bar);
  return NULL;
}

static int
open_file (const char *path)
{
  struct stat st;
  int fd = open (path, O_RDWR);

  must (fd >= 0, path);
  must (fstat (fd, &st) == 0, path);
  nblocks = st.st_size / BS;
  must (nblocks > 0, "file size");
  return fd;
}

int
main (int argc, char **argv)
{
  static const char *names[] = { "file", "ckpt", "1sync", "2sync" };
  int n, k;
  double secs, t0;
  struct client *cls;
  uint64_t total = 0;

  if (argc != 7)
    {
      fprintf (stderr, "usage: %s PATTERN SECONDS CLIENTS A L C\n", argv[0]);
      return 2;
    }
  for (k = 0; k < 4 && strcmp (argv[1], names[k]) != 0; k++)
    ;
  if (k == 4 || (secs = atof (argv[2])) <= 0 || (n = atoi (argv[3])) <= 0)
    {
      fprintf (stderr, "%s: bad pattern, seconds or clients\n", argv[0]);
      return 2;
    }
  pat = k;
  fd_a = open_file (argv[4]);
  fd_l = open_file (argv[5]);
  fd_c = open_file (argv[6]);
  cls = calloc (n, sizeof *cls);
  must (cls != NULL, "calloc");
  t0 = now ();
  deadline = t0 + secs;
  for (int i = 0; i < n; i++)
    {
      cls[i].seed = 2 * i + 1;
      cls[i].hseed = 2 * i + 2;
      memset (cls[i].buf, 'a' + i % 26, BS);
      pthread_barrier_init (&cls[i].bar, NULL, 2);
      must (pthread_create (&cls[i].helper, NULL, helper_main, &cls[i]) == 0,
            "pthread_create");
      must (pthread_create (&cls[i].th, NULL, client_main, &cls[i]) == 0,
            "pthread_create");
    }
  for (int i = 0; i < n; i++)
    {
      pthread_join (cls[i].th, NULL);
      pthread_join (cls[i].helper, NULL);
      total += cls[i].count;
    }
  printf ("%.1f\n", total / (now () - t0));
  free (cls);
  return 0;
}
