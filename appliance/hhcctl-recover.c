/* hhcctl recover: replay the gateway's HDD log into the backend
 * (offline, after the loss of the SSD cache).
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "hhcctl.h"

/* The backend, as replay writes it. */
struct target {
  struct hhc_dev *dev;
  uint64_t size;
  uint32_t bs;
  bool tty;
  unsigned last;
};

/* What to replay into what. */
struct recover_args {
  const char *logs[HHC_MAX_LOGS];
  unsigned nlogs;
  const char *backend;
};

/* Writes to the backend at once (the replay's writer threads): a
 * remote backend's latency overlaps, as the gateway's write-back does.
 */
#define RECOVER_WRITERS 4

/* n blocks from lba (the volume's last block may be partial). */
static int
write_run (void *opaque, const void *buf, uint64_t lba, uint32_t n)
{
  struct target *t = opaque;
  uint64_t off = lba * t->bs;
  uint64_t left = t->size - off;
  uint64_t want = (uint64_t)n * t->bs;

  return offline_write (t->dev, buf, left < want ? left : want, off);
}

static void
progress (void *opaque, uint64_t done, uint64_t total)
{
  struct target *t = opaque;
  unsigned pct = total ? done * 100 / total : 100;

  if (quiet)
    return;
  if (t->tty)
    {
      char bar[41];
      unsigned fill = pct * 40 / 100;
      memset (bar, '#', fill);
      memset (bar + fill, ' ', 40 - fill);
      bar[40] = '\0';
      fprintf (stderr, "\rreplaying [%s] %3u%% %" PRIu64 "/%" PRIu64, bar, pct,
               done, total);
      if (done == total)
        fputc ('\n', stderr);
    }
  else if (pct / 10 != t->last / 10 || done == total)
    fprintf (stderr, "replaying: %u%% (%" PRIu64 " of %" PRIu64 " blocks)\n",
             pct, done, total);
  t->last = pct;
}

static void
recover_usage (FILE *f)
{
  fprintf (f, "usage: hhcctl recover --log PATH [--log PATH...] --backend "
              "PATH|NBD-URI [--quiet]\n"
              "Replay the HHC gateway's HDD log into the backend (offline).\n"
              "See hhcctl(8).\n");
}

/* The command line into a; -1 to go on, else the exit status. */
static int
recover_args (int argc, char **argv, struct recover_args *a)
{
  static const struct option opts[] = {
    { "log", required_argument, NULL, 'l' },
    { "backend", required_argument, NULL, 'b' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  int c;

  while ((c = getopt_long (argc, argv, ":l:b:qh", opts, NULL)) != -1)
    switch (c)
      {
      case 'l':
        if (add_log (a->logs, &a->nlogs, optarg))
          return 2;
        break;
      case 'b':
        a->backend = optarg;
        break;
      case 'q':
        quiet = true;
        break;
      case 'h':
        recover_usage (stdout);
        return 0;
      default:
        return bad_option (c, argv);
      }
  if (optind != argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);
  if (a->nlogs == 0 || a->backend == NULL)
    return usage_error ("--log and --backend are required");
  return -1;
}

/* Open the backend: 0, or 1 (said why) if it cannot hold the volume
 * of the log.
 */
static int
open_backend (const char *backend, const struct offline_log_info *li,
              struct target *t)
{
  if (offline_open (backend, msg_cb, &t->dev) != 0)
    return 1;
  if (offline_size (t->dev) < t->size)
    {
      fprintf (stderr,
               "hhcctl: error: %s has %" PRIu64
               " bytes, but the log is of a volume of %" PRIu64
               " bytes (identity \"%s\"): refusing\n",
               backend, offline_size (t->dev), t->size, li->sb.identity);
      offline_close (t->dev);
      return 1;
    }
  return 0;
}

/* Replay log into the open backend and flush it: 0 or 1. */
static int
replay (struct hhc_log *log, const char *backend, struct target *t)
{
  int r;

  t->tty = isatty (2);
  r = offline_log_replay (log, write_run, progress, t, RECOVER_WRITERS);
  if (r == 0 && (r = offline_sync (t->dev)) != 0)
    fprintf (stderr, "hhcctl: error: flushing %s: %s\n", backend, strerror (r));
  return r ? 1 : 0;
}

int
cmd_recover (int argc, char **argv)
{
  struct recover_args a = { 0 };
  struct hhc_log *log = NULL;
  struct offline_log_info li;
  struct target t = { 0 };
  int r = recover_args (argc, argv, &a);

  if (r >= 0)
    return r;
  if (offline_log_open (a.logs, a.nlogs, msg_cb, &log) != 0)
    return 1;
  offline_log_info (log, &li);
  t.size = li.sb.volume_size;
  t.bs = li.sb.block_size;
  if (open_backend (a.backend, &li, &t) != 0)
    {
      offline_log_close (log);
      return 1;
    }
  if (!quiet)
    fprintf (stderr, "hhcctl: log of volume \"%s\" (%" PRIu64 " bytes)\n",
             li.sb.identity, t.size);
  r = replay (log, a.backend, &t);
  offline_close (t.dev);
  offline_log_close (log);
  return r;
}
